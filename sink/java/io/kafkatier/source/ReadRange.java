package io.kafkatier.source;

import java.io.Serializable;

/**
 * Offsets [start, end) of one partition, and the byte spans of its segment files that hold them:
 * whole record batches, each span at most the reader's {@code readChunkBytes}. With {@code
 * committed} (read_committed), the aborted transactions (producer id, first offset) that may
 * touch the range, from the {@code .txnindex} files and the ABORT markers the planner saw. Each
 * span's first batch is based at {@code firstOffsets[i]}: a segment replaced since planning (by
 * compaction) fails the read rather than decoding other bytes.
 */
final class ReadRange implements Serializable {
  private static final long serialVersionUID = 1L;
  final String topic;
  final int partition;
  final long start;
  final long end;
  final boolean committed;
  final long[] abortedProducers;
  final long[] abortedFirstOffsets;
  final String[] files;
  final long[] positions;
  final int[] sizes;
  final long[] firstOffsets;

  ReadRange(String topic, int partition, long start, long end, boolean committed,
      long[] abortedProducers, long[] abortedFirstOffsets, String[] files, long[] positions,
      int[] sizes, long[] firstOffsets) {
    this.topic = topic;
    this.partition = partition;
    this.start = start;
    this.end = end;
    this.committed = committed;
    this.abortedProducers = abortedProducers;
    this.abortedFirstOffsets = abortedFirstOffsets;
    this.files = files;
    this.positions = positions;
    this.sizes = sizes;
    this.firstOffsets = firstOffsets;
  }
}
