package io.kafkatier.sink;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;

/** Kafka's default partitioner for keyed records: (murmur2(key) & 0x7fffffff) % partitions. */
final class Murmur2 {
  // Kafka reads each 4-byte block as a little-endian int, byte by byte; one load does the same
  private static final VarHandle INT_LE =
      MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.LITTLE_ENDIAN);

  private Murmur2() {}

  /** Kafka's Utils.murmur2 (MurmurHash2, seed 0x9747b28c), byte for byte. */
  static int hash(byte[] data) {
    return hash(data, 0, data.length);
  }

  /** The hash of length bytes of data from offset. */
  @SuppressWarnings("fallthrough")
  static int hash(byte[] data, int offset, int length) {
    final int m = 0x5bd1e995;
    final int r = 24;
    int h = 0x9747b28c ^ length;
    final int blocks = length / 4;
    for (int i = 0; i < blocks; i++) {
      int k = (int) INT_LE.get(data, offset + i * 4);
      k *= m;
      k ^= k >>> r;
      k *= m;
      h *= m;
      h ^= k;
    }
    final int tail = offset + (length & ~3);
    switch (length % 4) {
      case 3:
        h ^= (data[tail + 2] & 0xff) << 16;
      // fall through
      case 2:
        h ^= (data[tail + 1] & 0xff) << 8;
      // fall through
      case 1:
        h ^= data[tail] & 0xff;
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

  static int partition(Slice key, int partitions) {
    return (hash(key.data, key.offset, key.length) & 0x7fffffff) % partitions;
  }
}
