package io.kafkatier.sink;

import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.execution.ColumnarToRowExec;
import org.apache.spark.sql.execution.ProjectExec;
import org.apache.spark.sql.execution.QueryExecution;
import org.apache.spark.sql.execution.RDDScanExec;
import org.apache.spark.sql.execution.SQLExecution;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.WholeStageCodegenExec;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import scala.collection.Seq;

/**
 * Where the encode job reads a micro-batch's rows from: Spark's rows as its plan computes them,
 * but for plans whose last step only copies each row into a new UnsafeRow, which the encoder
 * (it copies each field out as it reads it) does not need:
 *
 * <ul>
 *   <li>"columns": a columnar scan turned into rows (a Parquet or ORC file source, or kafkatier's
 *       JVM reader, read as a batch), or a selection of such a scan's columns, read from the
 *       scan's column batches, each row a view of the batch's columns (on Parquet input the
 *       conversion was a quarter of the encode job's Java samples, Java Flight Recorder);
 *   <li>"micro-batch columns": a scan of an existing RDD of rows (the micro-batch foreachBatch
 *       hands over: Spark's ForeachBatchSink wraps the batch's computed rows so), or a selection
 *       of its columns (the sink keeps the columns it reads), where the micro-batch's own plan is
 *       a columnar scan or a selection of its columns (a streaming file source; kafkatier's
 *       stream, whose key and value a job selects): read from that scan's column batches;
 *   <li>"rdd": such a scan of rows computed otherwise, read from that RDD;
 *   <li>"plan": anything else.
 * </ul>
 */
final class InputSource {
  final String kind;
  final JavaRDD<Object> elements; // column batches (the column kinds) or InternalRows
  final int[] columnOf; // where the batches hold the frame's column i (null: at i)

  @SuppressWarnings("unchecked") // TaskEncoder takes either kind of element
  private InputSource(String kind, JavaRDD<?> elements, int[] columnOf) {
    this.kind = kind;
    this.elements = (JavaRDD<Object>) elements;
    this.columnOf = columnOf;
  }

  static InputSource of(org.apache.spark.sql.classic.Dataset<Row> df) {
    SparkPlan plan = df.queryExecution().executedPlan();
    int[] direct = inBatches(plan);
    if (direct != null) {
      return new InputSource("columns", columnarChild(plan), direct);
    }
    SparkPlan top = belowCodegen(plan);
    RDDScanExec scan = top instanceof ProjectExec p && p.child() instanceof RDDScanExec s
        && p.projectList().forall(e -> e instanceof Attribute) ? s
        : top instanceof RDDScanExec s ? s : null;
    int[] columnOf = scan == null ? null : positions(plan.output(), scan.output());
    if (columnOf != null) {
      SparkPlan computed = computedBy(df, scan);
      if (computed != null) {
        int[] at = inBatches(computed);
        for (int i = 0; i < columnOf.length; i++) {
          columnOf[i] = at[columnOf[i]];
        }
        return new InputSource("micro-batch columns", columnarChild(computed), columnOf);
      }
      if (top == scan) {
        return new InputSource("rdd", scan.rdd().toJavaRDD(), null);
      }
    }
    return new InputSource("plan", df.queryExecution().toRdd().toJavaRDD(), null);
  }

  /**
   * Where plan is a columnar scan turned into rows, or a selection of such a scan's columns
   * (a projection of attributes alone: the rows are the scan's, fewer columns or in another
   * order): for each of plan's columns, its place in the scan's batches; else null.
   */
  private static int[] inBatches(SparkPlan plan) {
    ColumnarToRowExec rows = toRows(plan);
    return rows == null || !rows.child().supportsColumnar() ? null
        : positions(plan.output(), rows.child().output());
  }

  /** The columnar scan's conversion to rows at plan's top (below a selection), or null. */
  private static ColumnarToRowExec toRows(SparkPlan plan) {
    SparkPlan top = belowCodegen(plan);
    if (top instanceof ProjectExec p && p.projectList().forall(e -> e instanceof Attribute)) {
      top = p.child();
    }
    return top instanceof ColumnarToRowExec c ? c : null;
  }

  private static JavaRDD<ColumnarBatch> columnarChild(SparkPlan plan) {
    return toRows(plan).child().executeColumnar().toJavaRDD();
  }

  private static SparkPlan belowCodegen(SparkPlan plan) {
    return plan instanceof WholeStageCodegenExec w ? w.child() : plan;
  }

  /** Where each of wanted is among all (by expression id); null if one is not there. */
  private static int[] positions(Seq<Attribute> wanted, Seq<Attribute> all) {
    int[] at = new int[wanted.length()];
    for (int i = 0; i < at.length; i++) {
      at[i] = all.indexOf(wanted.apply(i));
      if (at[i] < 0) {
        return null;
      }
    }
    return at;
  }

  /**
   * The plan that computed scan's rows, where it is a columnar scan turned into rows with the
   * same columns; else null. foreachBatch calls its function in the query's thread, inside the
   * micro-batch's SQL execution, whose QueryExecution Spark keeps by id; that execution is
   * taken only if the RDD it computed is this very RDD, so its rows are the scan's rows.
   */
  private static SparkPlan computedBy(org.apache.spark.sql.classic.Dataset<Row> df,
      RDDScanExec scan) {
    String id = df.sparkSession().sparkContext().getLocalProperty(SQLExecution.EXECUTION_ID_KEY());
    QueryExecution qe = id == null ? null : SQLExecution.getQueryExecution(Long.parseLong(id));
    if (qe == null || qe.toRdd() != scan.rdd()) {
      return null;
    }
    SparkPlan plan = qe.executedPlan();
    return inBatches(plan) != null && sameColumns(plan.schema(), scan.schema()) ? plan : null;
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
}
