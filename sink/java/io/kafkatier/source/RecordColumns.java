package io.kafkatier.source;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * The columns a scan asked for, in Spark's Kafka source schema (key, value, topic, partition,
 * offset, timestamp, timestampType), filled row by row from decoded records and handed to Spark
 * as one {@link ColumnarBatch} a span. Columns the query does not use are never filled.
 */
final class RecordColumns implements AutoCloseable {
  static final int KEY = 0;
  static final int VALUE = 1;
  static final int TOPIC = 2;
  static final int PARTITION = 3;
  static final int OFFSET = 4;
  static final int TIMESTAMP = 5;
  static final int TIMESTAMP_TYPE = 6;
  private static final List<String> NAMES =
      List.of("key", "value", "topic", "partition", "offset", "timestamp", "timestampType");
  private static final DataType[] TYPES = {DataTypes.BinaryType, DataTypes.BinaryType,
      DataTypes.StringType, DataTypes.IntegerType, DataTypes.LongType, DataTypes.TimestampType,
      DataTypes.IntegerType};

  private final OnHeapColumnVector[] vectors;
  private final OnHeapColumnVector[] byKind = new OnHeapColumnVector[NAMES.size()];
  private byte[] topic = new byte[0];
  private int partition;
  int rows;

  RecordColumns(String[] columns) {
    vectors = new OnHeapColumnVector[columns.length];
    for (int i = 0; i < columns.length; i++) {
      int kind = NAMES.indexOf(columns[i]);
      if (kind < 0) {
        throw new IllegalArgumentException("kafkatier: no column " + columns[i]);
      }
      vectors[i] = new OnHeapColumnVector(4096, TYPES[kind]);
      byKind[kind] = vectors[i];
    }
  }

  /** Whether a query needs each record parsed (else a batch in range counts its records). */
  boolean needsRecords() {
    return has(KEY) || has(VALUE) || has(OFFSET) || has(TIMESTAMP);
  }

  boolean has(int kind) {
    return byKind[kind] != null;
  }

  /** Empties the columns for up to {@code capacity} rows of {@code range}'s partition. */
  void reset(int capacity, ReadRange range) {
    for (OnHeapColumnVector v : vectors) {
      v.reset();
      v.reserve(Math.max(capacity, 1));
    }
    topic = range.topic.getBytes(StandardCharsets.UTF_8);
    partition = range.partition;
    rows = 0;
  }

  void bytes(int kind, byte[] src, int at, int length) {
    OnHeapColumnVector v = byKind[kind];
    if (v == null) {
      return;
    }
    if (length < 0) {
      v.putNull(rows);
    } else {
      v.putByteArray(rows, src, at, length);
    }
  }

  void offsetAndTime(long offset, long timestampMs) {
    if (byKind[OFFSET] != null) {
      byKind[OFFSET].putLong(rows, offset);
    }
    if (byKind[TIMESTAMP] != null) {
      byKind[TIMESTAMP].putLong(rows, timestampMs * 1000); // Spark's timestamps are micros
    }
  }

  /** Ends {@code n} rows: the values every record of one batch shares. */
  void endRows(int n, int timestampType) {
    OnHeapColumnVector v = byKind[TOPIC];
    if (v != null) {
      for (int i = 0; i < n; i++) {
        v.putByteArray(rows + i, topic, 0, topic.length);
      }
    }
    if (byKind[PARTITION] != null) {
      byKind[PARTITION].putInts(rows, n, partition);
    }
    if (byKind[TIMESTAMP_TYPE] != null) {
      byKind[TIMESTAMP_TYPE].putInts(rows, n, timestampType);
    }
    rows += n;
  }

  ColumnarBatch batch() {
    return new ColumnarBatch(vectors, rows);
  }

  @Override
  public void close() {
    Arrays.stream(vectors).forEach(OnHeapColumnVector::close);
  }
}
