package io.kafkatier.sink;

import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
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
    JavaRDD<InternalRow> rows = classic.queryExecution().toRdd().toJavaRDD();
    if (plan.maxTasks > 0 && rows.getNumPartitions() > plan.maxTasks) {
      rows = rows.coalesce(plan.maxTasks, false); // sink/plan.py TaskLimit: no shuffle
    }
    JavaRDD<Row> pieces =
        rows.mapPartitionsWithIndex(new TaskEncoder(plan, new RowReader(df.schema())), false);
    return classic.sparkSession().createDataFrame(pieces, StructType.fromDDL(plan.piecesSchema));
  }

  /** Kafka's murmur2 of key (for tests comparing with the Python partitioner). */
  public int murmur2(byte[] key) {
    return Murmur2.hash(key);
  }
}
