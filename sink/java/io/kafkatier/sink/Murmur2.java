package io.kafkatier.sink;

/** Kafka's default partitioner for keyed records: (murmur2(key) & 0x7fffffff) % partitions. */
final class Murmur2 {
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
      final int i4 = offset + i * 4;
      int k = (data[i4] & 0xff) + ((data[i4 + 1] & 0xff) << 8)
          + ((data[i4 + 2] & 0xff) << 16) + ((data[i4 + 3] & 0xff) << 24);
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
