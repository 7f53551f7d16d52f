package io.kafkatier.source;

import java.io.Serializable;

/**
 * Offsets [start, end) of one partition, whose files are in {@code dir} (the executor finds the
 * batches: {@link RangeCursor}), read {@code chunkBytes} at a time. With {@code committed}
 * (read_committed), the aborted transactions (producer id, first offset) the planner saw in the
 * partition's tail (ABORT markers not yet in a {@code .txnindex}); the executor adds those of the
 * {@code .txnindex} files. {@code failOnDataLoss}: a start the partition no longer holds when the
 * task runs (retention since the planning) fails the task, else it starts where the log now does.
 */
final class ReadRange implements Serializable {
  private static final long serialVersionUID = 1L;
  final String dir;
  final String topic;
  final int partition;
  final long start;
  final long end;
  final boolean committed;
  final long[] abortedProducers;
  final long[] abortedFirstOffsets;
  final int chunkBytes;
  final boolean failOnDataLoss;

  ReadRange(String dir, String topic, int partition, long start, long end, boolean committed,
      long[] abortedProducers, long[] abortedFirstOffsets, int chunkBytes,
      boolean failOnDataLoss) {
    this.dir = dir;
    this.topic = topic;
    this.partition = partition;
    this.start = start;
    this.end = end;
    this.committed = committed;
    this.abortedProducers = abortedProducers;
    this.abortedFirstOffsets = abortedFirstOffsets;
    this.chunkBytes = chunkBytes;
    this.failOnDataLoss = failOnDataLoss;
  }
}
