package io.kafkatier.sink;

import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.execution.ColumnarToRowExec;
import org.apache.spark.sql.execution.QueryExecution;
import org.apache.spark.sql.execution.RDDScanExec;
import org.apache.spark.sql.execution.SQLExecution;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.WholeStageCodegenExec;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * The sink's encode job inside Spark's JVM (see sink/jvm.py, which builds and loads this jar):
 * the rows are read where Spark keeps them (its internal rows), with no conversion to Arrow for
 * Python workers, which alone costs about as much as Spark's whole Parquet write. Returns the
 * same pieces as sink/encode.py's Python encoder, in its CHUNK_SCHEMA.
 */
public final class JvmEncoder {
  public JvmEncoder() {}

  /** The pieces of one micro-batch (a lazy DataFrame: the job runs when it is collected). */
  public Dataset<Row> encode(Dataset<Row> df, String planJson) {
    EncodePlan plan = EncodePlan.parse(planJson);
    org.apache.spark.sql.classic.Dataset<Row> classic =
        (org.apache.spark.sql.classic.Dataset<Row>) df;
    return classic.sparkSession().createDataFrame(pieces(classic, plan),
        StructType.fromDDL(plan.piecesSchema));
  }

  /**
   * The staged pieces of one micro-batch, the job run now: where each piece is, packed
   * (PieceRows) into the file piecesPath for the driver's Python, with none of a DataFrame's
   * planning and Arrow hand-over around the job (20-30 ms of a micro-batch at 8 partitions).
   * A file, not a return value: py4j hands a byte array of 40 KB (1,024 partitions' pieces)
   * over in 48 ms, one of 5 KB in 2 ms (ad hoc, this machine).
   */
  public void encodeStaged(Dataset<Row> df, String planJson, String piecesPath) {
    EncodePlan plan = EncodePlan.parse(planJson);
    JavaRDD<byte[]> packed = pieces((org.apache.spark.sql.classic.Dataset<Row>) df, plan)
        .mapPartitions(PieceRows::packTask); // each task's rows packed where it ran
    byte[] joined = PieceRows.join(packed.collect());
    try {
      java.nio.file.Files.write(java.nio.file.Path.of(piecesPath), joined);
    } catch (java.io.IOException e) {
      throw InputError.write(e);
    }
  }

  private static JavaRDD<Row> pieces(org.apache.spark.sql.classic.Dataset<Row> df,
      EncodePlan plan) {
    TaskEncoder encoder = new TaskEncoder(plan, new RowReader(df.schema()));
    JavaRDD<ColumnarBatch> batches = columnBatches(df);
    if (batches != null) {
      return tasks(batches, plan).mapPartitionsWithIndex(encoder.overBatches(), false);
    }
    return tasks(internalRows(df), plan).mapPartitionsWithIndex(encoder, false);
  }

  /** rdd coalesced to the plan's task limit (sink/plan.py TaskLimit: no shuffle). */
  private static <T> JavaRDD<T> tasks(JavaRDD<T> rdd, EncodePlan plan) {
    if (plan.maxTasks > 0 && rdd.getNumPartitions() > plan.maxTasks) {
      return rdd.coalesce(plan.maxTasks, false);
    }
    return rdd;
  }

  /**
   * The column batches df's rows are made from, where its plan only turns a columnar scan's
   * batches into rows (a Parquet or ORC file source read as a batch), or where df scans the
   * rows of a micro-batch whose own plan is such a scan (a streaming file source: foreachBatch
   * hands the micro-batch over as a scan of the RDD its plan computed, Spark's
   * ForeachBatchSink); else null. The encoder reads the batches' columns, sparing the
   * conversion of every row into an UnsafeRow (a quarter of the encode job's Java samples on
   * Parquet input, Java Flight Recorder).
   */
  static JavaRDD<ColumnarBatch> columnBatches(org.apache.spark.sql.classic.Dataset<Row> df) {
    SparkPlan plan = df.queryExecution().executedPlan();
    SparkPlan scanned = switch (source(plan)) {
      case "columns" -> plan;
      case "rdd" -> computedBy(df, ((RDDScanExec) belowCodegen(plan)).rdd());
      default -> null;
    };
    return scanned == null ? null
        : ((ColumnarToRowExec) belowCodegen(scanned)).child().executeColumnar().toJavaRDD();
  }

  /**
   * The rows of df as Spark computes them, but for a scan of an existing RDD of rows (the
   * micro-batch foreachBatch hands over), read from that RDD: the scan's last step only copies
   * each row into a new UnsafeRow, which the encoder (it copies each field out as it reads
   * it) does not need.
   */
  static JavaRDD<InternalRow> internalRows(org.apache.spark.sql.classic.Dataset<Row> df) {
    SparkPlan plan = df.queryExecution().executedPlan();
    if (source(plan).equals("rdd")) {
      return ((RDDScanExec) belowCodegen(plan)).rdd().toJavaRDD();
    }
    return df.queryExecution().toRdd().toJavaRDD();
  }

  /**
   * What a plan reads: "rdd" (a scan of an existing RDD of rows that
   * is the whole plan), "columns" (a columnar scan under a top-level ColumnarToRow with the
   * same output) or "plan".
   */
  private static String source(SparkPlan plan) {
    SparkPlan top = belowCodegen(plan);
    if (top instanceof RDDScanExec scan && scan.output().equals(plan.output())) {
      return "rdd";
    }
    if (top instanceof ColumnarToRowExec c && c.child().supportsColumnar()
        && c.child().output().equals(plan.output())) {
      return "columns";
    }
    return "plan";
  }

  private static SparkPlan belowCodegen(SparkPlan plan) {
    return plan instanceof WholeStageCodegenExec w ? w.child() : plan;
  }

  /**
   * The plan that computed rdd, where it is a columnar scan turned into rows with df's columns;
   * else null. foreachBatch calls its function in the query's thread, inside the micro-batch's
   * SQL execution, whose QueryExecution Spark keeps by id; that execution is taken only if the
   * RDD it computed is this very RDD, so its rows are df's rows.
   */
  private static SparkPlan computedBy(org.apache.spark.sql.classic.Dataset<Row> df,
      RDD<InternalRow> rdd) {
    String id = df.sparkSession().sparkContext().getLocalProperty(SQLExecution.EXECUTION_ID_KEY());
    QueryExecution qe = id == null ? null : SQLExecution.getQueryExecution(Long.parseLong(id));
    if (qe == null || qe.toRdd() != rdd) {
      return null;
    }
    SparkPlan plan = qe.executedPlan();
    return source(plan).equals("columns") && sameColumns(plan.schema(), df.schema()) ? plan : null;
  }

  /** Whether two schemas have the same column names and types in the same order. */
  private static boolean sameColumns(StructType a, StructType b) {
    if (a.length() != b.length()) {
      return false;
    }
    for (int i = 0; i < a.length(); i++) {
      if (!a.fields()[i].name().equals(b.fields()[i].name())
          || !a.fields()[i].dataType().equals(b.fields()[i].dataType())) {
        return false;
      }
    }
    return true;
  }

  /**
   * Where the encoder reads df from (for tests): "columns", "rdd", "micro-batch columns" (an RDD
   * that a columnar scan computed) or "plan".
   */
  public String readsFrom(Dataset<Row> df) {
    org.apache.spark.sql.classic.Dataset<Row> classic =
        (org.apache.spark.sql.classic.Dataset<Row>) df;
    SparkPlan plan = classic.queryExecution().executedPlan();
    String source = source(plan);
    if (source.equals("rdd")
        && computedBy(classic, ((RDDScanExec) belowCodegen(plan)).rdd()) != null) {
      return "micro-batch columns";
    }
    return source;
  }

  /** Kafka's murmur2 of key (for tests comparing with the Python partitioner). */
  public int murmur2(byte[] key) {
    return Murmur2.hash(key);
  }
}
