package io.kafkatier.sink;

import java.util.Arrays;
import java.util.List;

/**
 * The records of a task's many open batches, encoded in the rows' order into one buffer and
 * moved into their batches a batch at a time. Why: rows come in key order, not partition
 * order, so with many partitions each record went to a different open batch, and writing to a
 * thousand places in turn cost the encode job a third of its CPU: a micro-batch of 200,000 rows
 * into 1,024 partitions took 65-68 ms of executor CPU, the same rows sorted by partition 40, 8
 * partitions 41-43, and with this buffer 49-52 (Spark's stage metrics, 2026-12-01; a buffer of
 * 256 KiB to 1 MiB the same, 2 MiB 54 ms, 4 MiB 59). Here a record is written where the last one
 * ended, and when the buffer is full (or a batch is to close) the records are copied, stably
 * sorted by batch, each batch's in one run: the order within a partition is the rows' order.
 *
 * <p>A batch's count and timestamps are its builder's as the record is buffered (the record's
 * offset and timestamp deltas are final); only its bytes wait here ({@link BatchBuilder#buffered}).
 */
final class SortBuffer {
  /**
   * Topics of more partitions than this are buffered: fewer open batches take the rows in turn
   * well enough, and the buffer's copy costs them (8 partitions buffered: 43.7-44.5 ms of
   * executor CPU against 39.7-41.0 written straight, the same 200,000 rows, 2026-12-01).
   */
  static final int ABOVE_PARTITIONS = 16;
  static final int BYTES = 1 << 20; // within a core's L2 cache beside the rows being read
  static final int RECORDS = 16 * 1024;

  private final Bytes buffer;
  private final int capacity; // bytes the buffer holds before the records move
  private int[] owners; // each buffered record's batch (its slot in the task's builders)
  private int[] starts; // each buffered record's start in the buffer
  private int[] order = new int[0];
  private int[] firsts = new int[0]; // a slot's first place in order, while sorting
  private int count;

  SortBuffer(int capacityBytes, int capacityRecords) {
    capacity = capacityBytes;
    buffer = new Bytes(capacityBytes + 1024);
    owners = new int[Math.max(capacityRecords, 1)];
    starts = new int[owners.length + 1];
  }

  /** Buffers b's next record (body and size as {@link BatchBuilder#tryAdd} measured them). */
  void add(BatchBuilder b, Record r, int body, int size, long timestampDelta) {
    owners[count] = b.slot;
    starts[count] = buffer.size;
    r.writeTo(buffer, body, b.count, timestampDelta);
    count++;
    b.buffered += size;
  }

  /** Whether the buffered records should move now (the buffer or its record slots are full). */
  boolean full() {
    return count == owners.length || buffer.size >= capacity;
  }

  /** Moves every buffered record into its batch (builders: the task's, indexed by slot). */
  void flush(List<BatchBuilder> builders) {
    if (count == 0) {
      return;
    }
    starts[count] = buffer.size;
    sortBySlot(builders.size());
    byte[] data = buffer.data;
    for (int k = 0; k < count; ) {
      int slot = owners[order[k]];
      BatchBuilder b = builders.get(slot);
      Bytes out = b.records;
      out.ensure(b.buffered);
      for (; k < count && owners[order[k]] == slot; k++) {
        int i = order[k];
        out.putUnchecked(data, starts[i], starts[i + 1] - starts[i]);
      }
      b.buffered = 0;
    }
    count = 0;
    buffer.reset();
  }

  /** order: the buffered records' indexes grouped by slot, in staging order within a slot. */
  private void sortBySlot(int slots) {
    if (firsts.length < slots + 1) {
      firsts = new int[slots + 1];
    } else {
      Arrays.fill(firsts, 0, slots + 1, 0);
    }
    if (order.length < count) {
      order = new int[owners.length];
    }
    for (int i = 0; i < count; i++) {
      firsts[owners[i] + 1]++;
    }
    for (int s = 0; s < slots; s++) {
      firsts[s + 1] += firsts[s];
    }
    for (int i = 0; i < count; i++) {
      order[firsts[owners[i]]++] = i;
    }
  }
}
