package io.kafkatier.source;

import java.util.Arrays;
import org.apache.spark.sql.connector.metric.CustomMetric;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * A batch scan: the driver's planner picks each partition's offsets, executors find and decode
 * their batches ({@link ColumnarReader}); a streaming query's micro-batches too ({@link
 * JvmStream}).
 */
final class JvmScan implements Scan, Batch {
  private final StructType columns;
  private final CaseInsensitiveStringMap options;
  private final Filter[] filters;
  private InputPartition[] planned;

  JvmScan(StructType columns, CaseInsensitiveStringMap options, Filter[] filters) {
    this.columns = columns;
    this.options = options;
    this.filters = filters;
  }

  @Override
  public StructType readSchema() {
    return columns;
  }

  @Override
  public String description() {
    return "kafkatier (JVM reader) PushedFilters: " + Arrays.toString(filters);
  }

  @Override
  public CustomMetric[] supportedCustomMetrics() {
    return new CustomMetric[] {new TaskMemory()};
  }

  @Override
  public Batch toBatch() {
    return this;
  }

  @Override
  public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
    return new JvmStream(options, columns);
  }

  /** Planned once a scan: Spark asks again while it plans a query (and AQE re-plans). */
  @Override
  public synchronized InputPartition[] planInputPartitions() {
    if (planned == null) {
      planned = Planner.plan(options, PushedFilters.json(Arrays.asList(filters)));
    }
    return planned;
  }

  @Override
  public PartitionReaderFactory createReaderFactory() {
    return new ColumnarReaderFactory(columns);
  }
}
