package io.kafkatier.sink;

import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.types.StructType;

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
    InputSource input = InputSource.of(df);
    TaskEncoder encoder = new TaskEncoder(plan, new RowReader(df.schema(), input.columnOf));
    return tasks(input.elements, plan).mapPartitionsWithIndex(encoder, false);
  }

  /** rdd coalesced to the plan's task limit (sink/plan.py TaskLimit: no shuffle). */
  private static <T> JavaRDD<T> tasks(JavaRDD<T> rdd, EncodePlan plan) {
    if (plan.maxTasks > 0 && rdd.getNumPartitions() > plan.maxTasks) {
      return rdd.coalesce(plan.maxTasks, false);
    }
    return rdd;
  }

  /**
   * Where the encoder reads df from (for tests): "columns", "micro-batch columns", "rdd" or
   * "plan" ({@link InputSource}).
   */
  public String readsFrom(Dataset<Row> df) {
    return InputSource.of((org.apache.spark.sql.classic.Dataset<Row>) df).kind;
  }

  /** Kafka's murmur2 of key (for tests comparing with the Python partitioner). */
  public int murmur2(byte[] key) {
    return Murmur2.hash(key);
  }
}
