package io.kafkatier.sink;

import java.io.Serializable;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * Reads the sink's input columns (those of Spark's Kafka sink, already checked on the driver
 * by sink/schema.py) out of Spark's internal rows into a reusable {@link Record}: binary or
 * string key and value, array of (key string, value binary) headers, int/short/byte partition,
 * timestamp (microseconds, kept as milliseconds rounded down), topic.
 */
final class RowReader implements Serializable {
  private static final long serialVersionUID = 1L;
  private final int key;
  private final int value;
  private final int headers;
  private final int partition;
  private final int timestamp;
  private final int topic;
  private final boolean keyString;
  private final boolean valueString;
  private final int partitionWidth; // 1, 2 or 4 bytes
  private final int headerKey;
  private final int headerValue;

  RowReader(StructType schema) {
    this(schema, null);
  }

  /**
   * columnOf: where the rows hold schema's column i (null: at i), for rows of a scan's batches
   * of which schema selects some columns.
   */
  RowReader(StructType schema, int[] columnOf) {
    int k = ordinal(schema, "key");
    int v = ordinal(schema, "value");
    int h = ordinal(schema, "headers");
    int p = ordinal(schema, "partition");
    keyString = k >= 0 && schema.fields()[k].dataType() instanceof StringType;
    valueString = schema.fields()[v].dataType() instanceof StringType;
    DataType type = p >= 0 ? schema.fields()[p].dataType() : null;
    partitionWidth = type instanceof ByteType ? 1 : type instanceof ShortType ? 2 : 4;
    if (h >= 0) {
      StructType inner = (StructType) ((org.apache.spark.sql.types.ArrayType)
          schema.fields()[h].dataType()).elementType();
      headerKey = inner.fieldIndex("key");
      headerValue = inner.fieldIndex("value");
    } else {
      headerKey = -1;
      headerValue = -1;
    }
    key = at(columnOf, k);
    value = at(columnOf, v);
    headers = at(columnOf, h);
    partition = at(columnOf, p);
    timestamp = at(columnOf, ordinal(schema, "timestamp"));
    topic = at(columnOf, ordinal(schema, "topic"));
  }

  private static int at(int[] columnOf, int i) {
    return columnOf == null || i < 0 ? i : columnOf[i];
  }

  boolean hasTopic() {
    return topic >= 0;
  }

  /**
   * Whether key and value are read as views of a batch's column vectors (see {@link Slice}):
   * where they are on-heap writable vectors, which keep a binary's bytes as a string's.
   */
  boolean viewable(ColumnarBatch batch) {
    return viewable(batch, key) && viewable(batch, value);
  }

  private static boolean viewable(ColumnarBatch batch, int ordinal) {
    return ordinal < 0 || batch.column(ordinal) instanceof OnHeapColumnVector;
  }

  /**
   * Fills r from row; rowIndex (within the task) names the row in errors; views: key and value
   * may be read as views of the row's bytes (an UnsafeRow, or a batch's {@link #viewable}).
   */
  void read(InternalRow row, Record r, long defaultTimestamp, long rowIndex, boolean views) {
    r.key.read(row, key, keyString, views);
    r.value.read(row, value, valueString, views);
    r.headerCount = 0;
    if (headers >= 0 && !row.isNullAt(headers)) {
      readHeaders(row.getArray(headers), r, rowIndex);
    }
    r.partitionGiven = partition >= 0 && !row.isNullAt(partition);
    if (r.partitionGiven) {
      r.partition = partitionWidth == 1 ? row.getByte(partition)
          : partitionWidth == 2 ? row.getShort(partition) : row.getInt(partition);
    }
    r.timestamp = defaultTimestamp;
    if (timestamp >= 0 && !row.isNullAt(timestamp)) {
      r.timestamp = Math.floorDiv(row.getLong(timestamp), 1000L);
      if (r.timestamp < 0) { // -1 ms is an instant, but Kafka's "no timestamp" (ProducerRecord)
        throw InputError.invalid("invalid negative timestamp " + r.timestamp
            + " in column 'timestamp' row " + rowIndex + "; fix: timestamps before 1970 "
            + "cannot be stored in Kafka");
      }
    }
    r.topic = topic >= 0 && !row.isNullAt(topic) ? row.getUTF8String(topic).toString() : null;
  }

  private void readHeaders(ArrayData list, Record r, long rowIndex) {
    for (int i = 0; i < list.numElements(); i++) {
      if (list.isNullAt(i)) {
        throw InputError.invalid("null header in column 'headers' row " + rowIndex
            + "; fix: drop null elements (e.g. filter(headers, h -> h IS NOT NULL))");
      }
      InternalRow h = list.getStruct(i, 2);
      if (h.isNullAt(headerKey)) {
        throw InputError.invalid("null header key in column 'headers' row " + rowIndex
            + "; fix: give every header a key");
      }
      byte[] v = h.isNullAt(headerValue) ? null : h.getBinary(headerValue);
      r.addHeader(h.getUTF8String(headerKey).getBytes(), v);
    }
  }

  private static int ordinal(StructType schema, String name) {
    String[] names = schema.fieldNames();
    for (int i = 0; i < names.length; i++) {
      if (names[i].equals(name)) {
        return i;
      }
    }
    return -1;
  }
}
