package io.kafkatier.source;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * The columns a scan asked for, in Spark's Kafka source schema (key, value, topic, partition,
 * offset, timestamp, timestampType and, with includeHeaders, headers: an array of (key string,
 * value binary) structs, null when a record has none), filled row by row from decoded records
 * and handed to Spark as {@link ColumnarBatch}es of a few thousand rows. Columns the query does not
 * use are never filled.
 */
final class RecordColumns implements AutoCloseable {
  static final int KEY = 0;
  static final int VALUE = 1;
  static final int TOPIC = 2;
  static final int PARTITION = 3;
  static final int OFFSET = 4;
  static final int TIMESTAMP = 5;
  static final int TIMESTAMP_TYPE = 6;
  static final int HEADERS = 7;
  private static final List<String> NAMES = List.of(
      "key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers");

  private final OnHeapColumnVector[] vectors;
  private final OnHeapColumnVector[] byKind = new OnHeapColumnVector[NAMES.size()];
  private byte[] topic = new byte[0];
  private int partition;
  private int headers; // header structs appended to the headers column's elements
  private int headerKey = -1; // the header struct's children that the query asked for: Spark
  private int headerValue = -1; // prunes nested fields (headers.key alone keeps one child)
  int rows;

  RecordColumns(StructType schema) {
    StructField[] fields = schema.fields();
    vectors = new OnHeapColumnVector[fields.length];
    for (int i = 0; i < fields.length; i++) {
      int kind = NAMES.indexOf(fields[i].name());
      if (kind < 0) {
        throw new IllegalArgumentException("kafkatier: no column " + fields[i].name());
      }
      vectors[i] = new OnHeapColumnVector(4096, fields[i].dataType());
      byKind[kind] = vectors[i];
      if (kind == HEADERS) {
        StructType header = (StructType) ((ArrayType) fields[i].dataType()).elementType();
        List<String> names = Arrays.asList(header.fieldNames());
        headerKey = names.indexOf("key");
        headerValue = names.indexOf("value");
      }
    }
  }

  /** Whether a query needs each record parsed (else a batch in range counts its records). */
  boolean needsRecords() {
    return has(KEY) || has(VALUE) || has(OFFSET) || has(TIMESTAMP) || has(HEADERS);
  }

  boolean has(int kind) {
    return byKind[kind] != null;
  }

  /** Empties the columns for rows of {@code range}'s partition ({@link #ensure} makes room). */
  void reset(ReadRange range) {
    for (OnHeapColumnVector v : vectors) {
      v.reset();
    }
    topic = range.topic.getBytes(StandardCharsets.UTF_8);
    partition = range.partition;
    rows = 0;
    headers = 0;
  }

  /** Room for {@code more} rows beyond the current ones. */
  void ensure(int more) {
    for (OnHeapColumnVector v : vectors) {
      v.reserve(rows + more);
    }
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

  /** The current row's {@code count} headers follow ({@link #header}); none is a null. */
  void startHeaders(int count) {
    OnHeapColumnVector v = byKind[HEADERS];
    if (count <= 0) {
      v.putNull(rows);
      return;
    }
    v.putArray(rows, headers, count);
    WritableColumnVector structs = v.arrayData();
    structs.reserve(headers + count);
    for (int child : new int[] {headerKey, headerValue}) {
      if (child >= 0) {
        structs.getChild(child).reserve(headers + count);
      }
    }
  }

  /** One header of the current row: its key (UTF-8, never null) and value (-1: null). */
  void header(byte[] src, int key, int keyLength, int value, int valueLength) {
    WritableColumnVector structs = byKind[HEADERS].arrayData();
    if (headerKey >= 0) {
      structs.getChild(headerKey).putByteArray(headers, src, key, keyLength);
    }
    if (headerValue < 0) {
      headers++;
      return;
    }
    if (valueLength < 0) {
      structs.getChild(headerValue).putNull(headers);
    } else {
      structs.getChild(headerValue).putByteArray(headers, src, value, valueLength);
    }
    headers++;
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

  /** The bytes this reader holds with its buffers ({@link TaskMemory}). */
  long memory(long buffers) {
    return TaskMemory.measure(buffers, vectors);
  }

  ColumnarBatch batch() {
    return new ColumnarBatch(vectors, rows);
  }

  @Override
  public void close() {
    Arrays.stream(vectors).forEach(OnHeapColumnVector::close);
  }
}
