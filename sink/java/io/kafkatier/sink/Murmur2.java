package io.kafkatier.sink;

import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.types.UTF8String;

/** Kafka's default partitioner for keyed records: (murmur2(key) & 0x7fffffff) % partitions. */
final class Murmur2 {
  private Murmur2() {}

  /** Kafka's Utils.murmur2 (MurmurHash2, seed 0x9747b28c), byte for byte. */
  static int hash(byte[] data) {
    return hash(data, Platform.BYTE_ARRAY_OFFSET, data.length);
  }

  /**
   * The hash of the bytes at (base, offset) as Spark's {@link Platform} addresses them (a
   * byte[] and BYTE_ARRAY_OFFSET, or a row's buffer): a key read as a view, never copied.
   */
  @SuppressWarnings("fallthrough")
  static int hash(Object base, long offset, int length) {
    final int m = 0x5bd1e995;
    final int r = 24;
    int h = 0x9747b28c ^ length;
    final int blocks = length / 4;
    for (int i = 0; i < blocks; i++) {
      final int i4 = i * 4;
      int k = (at(base, offset, i4) & 0xff) + ((at(base, offset, i4 + 1) & 0xff) << 8)
          + ((at(base, offset, i4 + 2) & 0xff) << 16) + ((at(base, offset, i4 + 3) & 0xff) << 24);
      k *= m;
      k ^= k >>> r;
      k *= m;
      h *= m;
      h ^= k;
    }
    final int tail = length & ~3;
    switch (length % 4) {
      case 3:
        h ^= (at(base, offset, tail + 2) & 0xff) << 16;
      // fall through
      case 2:
        h ^= (at(base, offset, tail + 1) & 0xff) << 8;
      // fall through
      case 1:
        h ^= at(base, offset, tail) & 0xff;
        h *= m;
        break;
      default:
        break;
    }
    h ^= h >>> 13;
    h *= m;
    h ^= h >>> 15;
    return h;
  }

  private static byte at(Object base, long offset, int i) {
    return Platform.getByte(base, offset + i);
  }

  static int partition(UTF8String key, int partitions) {
    return (hash(key.getBaseObject(), key.getBaseOffset(), key.numBytes()) & 0x7fffffff)
        % partitions;
  }
}
