package io.kafkatier.sink;

import java.util.Arrays;

/**
 * A growable byte array with the big-endian integers and zig-zag varints of Kafka's record
 * format (kafka-format.md section 1.3). One instance per open batch and per compressed
 * output: the encoder writes straight into its array, with no per-record objects.
 */
final class Bytes {
  byte[] data;
  int size;

  Bytes(int capacity) {
    data = new byte[Math.max(capacity, 64)];
  }

  void ensure(int extra) {
    long need = (long) size + extra;
    if (need > data.length) {
      if (need > Integer.MAX_VALUE - 16) {
        throw new IllegalStateException("encoded data over 2 GiB in one buffer");
      }
      data = Arrays.copyOf(data, (int) Math.max(need, Math.min(2L * data.length, Integer.MAX_VALUE - 16)));
    }
  }

  void reset() {
    size = 0;
  }

  /** Empties the buffer and gives a large array back to the heap. */
  void release() {
    size = 0;
    if (data.length > 64 * 1024) {
      data = new byte[64 * 1024];
    }
  }

  void put(byte[] src, int off, int len) {
    ensure(len);
    System.arraycopy(src, off, data, size, len);
    size += len;
  }

  void putByte(int v) {
    ensure(1);
    data[size++] = (byte) v;
  }

  void putShort(int v) {
    ensure(2);
    data[size++] = (byte) (v >>> 8);
    data[size++] = (byte) v;
  }

  void putInt(int v) {
    ensure(4);
    setInt(size, v);
    size += 4;
  }

  void putLong(long v) {
    putInt((int) (v >>> 32));
    putInt((int) v);
  }

  void setInt(int at, int v) {
    data[at] = (byte) (v >>> 24);
    data[at + 1] = (byte) (v >>> 16);
    data[at + 2] = (byte) (v >>> 8);
    data[at + 3] = (byte) v;
  }

  void setIntLE(int at, int v) {
    data[at] = (byte) v;
    data[at + 1] = (byte) (v >>> 8);
    data[at + 2] = (byte) (v >>> 16);
    data[at + 3] = (byte) (v >>> 24);
  }

  /** Zig-zag varint (Kafka's ByteUtils.writeVarint). */
  void putVarint(int v) {
    putUnsignedVarlong(((long) ((v << 1) ^ (v >> 31))) & 0xFFFFFFFFL);
  }

  /** Zig-zag varlong (Kafka's ByteUtils.writeVarlong). */
  void putVarlong(long v) {
    putUnsignedVarlong((v << 1) ^ (v >> 63));
  }

  private void putUnsignedVarlong(long v) {
    ensure(10);
    putUnsignedUnchecked(v);
  }

  /**
   * The writes of a record whose size the caller reserved with {@link #ensure} (one check a
   * record instead of one a field): zig-zag varints and raw bytes, no capacity check.
   */
  void putVarintUnchecked(int v) {
    putUnsignedUnchecked(((long) ((v << 1) ^ (v >> 31))) & 0xFFFFFFFFL);
  }

  void putVarlongUnchecked(long v) {
    putUnsignedUnchecked((v << 1) ^ (v >> 63));
  }

  void putByteUnchecked(int v) {
    data[size++] = (byte) v;
  }

  void putUnchecked(byte[] src) {
    putUnchecked(src, 0, src.length);
  }

  void putUnchecked(byte[] src, int off, int len) {
    System.arraycopy(src, off, data, size, len);
    size += len;
  }

  private void putUnsignedUnchecked(long v) {
    while ((v & ~0x7FL) != 0) {
      data[size++] = (byte) ((v & 0x7F) | 0x80);
      v >>>= 7;
    }
    data[size++] = (byte) v;
  }

  static int sizeOfVarint(int v) {
    return sizeOfUnsigned(((long) ((v << 1) ^ (v >> 31))) & 0xFFFFFFFFL);
  }

  static int sizeOfVarlong(long v) {
    return sizeOfUnsigned((v << 1) ^ (v >> 63));
  }

  private static int sizeOfUnsigned(long v) {
    return (63 - Long.numberOfLeadingZeros(v | 1)) / 7 + 1; // 7 bits a byte, at least one
  }
}
