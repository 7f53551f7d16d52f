package io.kafkatier.source;

import java.util.HashSet;
import java.util.List;
import java.util.PriorityQueue;
import java.util.Set;

/**
 * Kafka's consumer-side skipping of aborted transactions (the Python engine's
 * AbortedTransactionFilter), one pass over the batches of a range in offset order: a
 * transactional batch whose producer has an aborted transaction starting at or before its last
 * offset is dropped, until that producer's ABORT marker.
 */
final class AbortedFilter {
  private final PriorityQueue<long[]> aborted; // {firstOffset, producerId}, lowest first
  private final Set<Long> abortedProducers = new HashSet<>();

  /** Of aborted transactions given as {producer id, first offset}; one may repeat. */
  AbortedFilter(List<long[]> txns) {
    aborted = new PriorityQueue<>((a, b) -> Long.compare(a[0], b[0]));
    for (long[] txn : txns) {
      aborted.add(new long[] {txn[1], txn[0]});
    }
  }

  /** Whether a data batch is kept; {@code control} batches are never (see {@link #marker}). */
  boolean keep(long lastOffset, boolean transactional, long producerId) {
    if (!transactional) {
      return true;
    }
    advance(lastOffset);
    return !abortedProducers.contains(producerId);
  }

  /** A transactional control batch: an ABORT marker ends its producer's aborted transaction. */
  void marker(long lastOffset, long producerId, boolean abort) {
    advance(lastOffset);
    if (abort) {
      abortedProducers.remove(producerId);
    }
  }

  private void advance(long lastOffset) {
    while (!aborted.isEmpty() && aborted.peek()[0] <= lastOffset) {
      abortedProducers.add(aborted.poll()[1]);
    }
  }
}
