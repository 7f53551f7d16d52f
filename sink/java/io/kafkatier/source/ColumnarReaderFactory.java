package io.kafkatier.source;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/** Columnar readers of the columns a scan asked for (row readers are never asked for). */
final class ColumnarReaderFactory implements PartitionReaderFactory {
  private static final long serialVersionUID = 1L;
  private final StructType columns;

  ColumnarReaderFactory(StructType columns) {
    this.columns = columns;
  }

  @Override
  public boolean supportColumnarReads(InputPartition partition) {
    return true;
  }

  @Override
  public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
    return new ColumnarReader((ReadTask) partition, columns);
  }

  @Override
  public PartitionReader<InternalRow> createReader(InputPartition partition) {
    throw new UnsupportedOperationException("kafkatier's JVM reader is columnar");
  }
}
