package io.kafkatier.sink;

import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * One input row as the encoder needs it: reused for every row of a task. Key and value are
 * views of the row's bytes where the row allows (see {@link RowReader}), valid until the next
 * row is read: they are copied once, into the open batch.
 */
final class Record {
  UTF8String key; // null: no key
  UTF8String value; // null: a tombstone
  byte[][] headerKeys = new byte[4][];
  byte[][] headerValues = new byte[4][]; // an element null: a null header value
  int headerCount;
  long timestamp; // milliseconds
  String topic;
  int partition;
  boolean partitionGiven;

  void addHeader(byte[] k, byte[] v) {
    if (headerCount == headerKeys.length) {
      headerKeys = java.util.Arrays.copyOf(headerKeys, 2 * headerCount);
      headerValues = java.util.Arrays.copyOf(headerValues, 2 * headerCount);
    }
    headerKeys[headerCount] = k;
    headerValues[headerCount] = v;
    headerCount++;
  }

  /** The record's size after its length prefix (Kafka's DefaultRecord.sizeOfBodyInBytes). */
  int bodySize(int offsetDelta, long timestampDelta) {
    int size = 1 + Bytes.sizeOfVarlong(timestampDelta) + Bytes.sizeOfVarint(offsetDelta);
    size += sizeOfView(key) + sizeOfView(value) + Bytes.sizeOfVarint(headerCount);
    for (int i = 0; i < headerCount; i++) {
      size += sizeOfBytes(headerKeys[i]) + sizeOfBytes(headerValues[i]);
    }
    return size;
  }

  /** Record v2 (kafka-format.md section 1.3): length, attributes 0, deltas, key, value, headers. */
  void writeTo(Bytes out, int bodySize, int offsetDelta, long timestampDelta) {
    out.putVarint(bodySize);
    out.putByte(0);
    out.putVarlong(timestampDelta);
    out.putVarint(offsetDelta);
    putView(out, key);
    putView(out, value);
    out.putVarint(headerCount);
    for (int i = 0; i < headerCount; i++) {
      putBytes(out, headerKeys[i]);
      putBytes(out, headerValues[i]);
    }
  }

  private static int sizeOfBytes(byte[] b) {
    return b == null ? 1 : Bytes.sizeOfVarint(b.length) + b.length;
  }

  private static int sizeOfView(UTF8String b) {
    return b == null ? 1 : Bytes.sizeOfVarint(b.numBytes()) + b.numBytes();
  }

  private static void putView(Bytes out, UTF8String b) {
    if (b == null) {
      out.putVarint(-1);
    } else {
      int n = b.numBytes();
      out.putVarint(n);
      out.ensure(n);
      b.writeToMemory(out.data, Platform.BYTE_ARRAY_OFFSET + out.size);
      out.size += n;
    }
  }

  private static void putBytes(Bytes out, byte[] b) {
    if (b == null) {
      out.putVarint(-1);
    } else {
      out.putVarint(b.length);
      out.put(b, 0, b.length);
    }
  }
}
