package io.kafkatier.sink;

/**
 * One input row as the encoder needs it: reused for every row of a task (no per-row objects;
 * key and value are views of the row's bytes where Spark allows, see {@link Slice}).
 */
final class Record {
  final Slice key = new Slice(); // null: no key
  final Slice value = new Slice(); // null: a tombstone
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
    size += sizeOf(key) + sizeOf(value) + Bytes.sizeOfVarint(headerCount);
    for (int i = 0; i < headerCount; i++) {
      size += sizeOfBytes(headerKeys[i]) + sizeOfBytes(headerValues[i]);
    }
    return size;
  }

  /** Record v2 (kafka-format.md section 1.3): length, attributes 0, deltas, key, value, headers. */
  void writeTo(Bytes out, int bodySize, int offsetDelta, long timestampDelta) {
    out.ensure(Bytes.sizeOfVarint(bodySize) + bodySize);
    out.putVarintUnchecked(bodySize);
    out.putByteUnchecked(0);
    out.putVarlongUnchecked(timestampDelta);
    out.putVarintUnchecked(offsetDelta);
    putSlice(out, key);
    putSlice(out, value);
    out.putVarintUnchecked(headerCount);
    for (int i = 0; i < headerCount; i++) {
      putBytes(out, headerKeys[i]);
      putBytes(out, headerValues[i]);
    }
  }

  private static int sizeOf(Slice s) {
    return s.isNull() ? 1 : Bytes.sizeOfVarint(s.length) + s.length;
  }

  private static int sizeOfBytes(byte[] b) {
    return b == null ? 1 : Bytes.sizeOfVarint(b.length) + b.length;
  }

  private static void putSlice(Bytes out, Slice s) { // within writeTo's reservation
    out.putVarintUnchecked(s.length); // -1: null
    if (!s.isNull()) {
      out.putUnchecked(s.data, s.offset, s.length);
    }
  }

  private static void putBytes(Bytes out, byte[] b) { // within writeTo's reservation
    if (b == null) {
      out.putVarintUnchecked(-1);
    } else {
      out.putVarintUnchecked(b.length);
      out.putUnchecked(b);
    }
  }
}
