package io.kafkatier.source;

import static io.kafkatier.source.BatchHeader.*;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.util.List;

/**
 * The segments of one range read in order, from the batch holding its start to the batch
 * holding its last offset: chunks of whole batches of at most {@code readChunkBytes} (one batch
 * larger than that comes alone), or, for a count, one batch header at a time. A batch cut short
 * at the end of the last segment (the writer still appending past the planned end) ends the
 * range; anywhere else it is a corrupt segment.
 */
final class RangeCursor implements AutoCloseable {
  private final ReadRange range;
  private final PartitionLog log;
  private final int chunkBytes;
  private int segment;
  private long position;
  private FileChannel channel;
  private long size;
  private boolean done;
  private final ByteBuffer head = ByteBuffer.allocate(SIZE);

  RangeCursor(ReadRange range, int chunkBytes) throws IOException {
    this.range = range;
    this.chunkBytes = chunkBytes;
    this.log = new PartitionLog(range.dir);
    done = log.segments() == 0 || range.start >= range.end;
    if (!done) {
      long start = startNow(range, log);
      segment = log.segmentOf(start);
      position = log.positionOf(segment, start);
    }
  }

  /**
   * Where the range starts in the files as they are now: the planner checked its start against
   * the log start, but retention may have deleted the segments holding it since (the first one
   * left then starts past it). Spark's Kafka source fails such a task ("Some data may have been
   * lost") with failOnDataLoss, else reads on from what is left.
   */
  private static long startNow(ReadRange range, PartitionLog log) {
    long first = log.base(0);
    if (range.start >= first) {
      return range.start;
    }
    if (range.failOnDataLoss) {
      throw ReadError.at("OffsetOutOfRangeError", "offset " + range.start + " of " + range.topic
          + "-" + range.partition + " is gone: the log starts at " + first + " (retention since "
          + "the scan was planned; set failOnDataLoss=false to read from there on)",
          range.dir, 0);
    }
    return first;
  }

  /** The aborted transactions that may touch the range: the .txnindex files' and the planner's. */
  AbortedFilter filter() throws IOException {
    if (!range.committed) {
      return null;
    }
    List<long[]> txns = log.abortedTxns(range.start, range.end);
    for (int i = 0; i < range.abortedProducers.length; i++) {
      txns.add(new long[] {range.abortedProducers[i], range.abortedFirstOffsets[i]});
    }
    return txns.isEmpty() ? null : new AbortedFilter(txns);
  }

  String file() {
    return log.file(segment, ".log");
  }

  long position() {
    return position;
  }

  /** The header of the next batch (in {@link #header}), or false at the range's end. */
  boolean nextHeader() throws IOException {
    if (!seek()) {
      return false;
    }
    head.clear();
    if (position + SIZE > size || channel.read(head, position) < head.limit()) {
      return endOrCorrupt();
    }
    int length = size(head);
    if (length < SIZE) {
      throw ReadError.at("CorruptRecordError", "truncated record batch", file(), position);
    }
    if (position + length > size) {
      return endOrCorrupt();
    }
    if (head.getLong(BASE_OFFSET) >= range.end) {
      done = true;
      return false;
    }
    return true;
  }

  ByteBuffer header() {
    return head;
  }

  /** Steps past the batch whose header {@link #nextHeader} gave. */
  void skip() {
    position += size(head);
  }

  /**
   * Reads the next whole batches into {@code buffer} (grown if one batch is larger), at most
   * {@code readChunkBytes} unless one batch is; the bytes read, or 0 at the range's end.
   */
  int read(byte[][] buffer) throws IOException {
    return read(buffer, chunkBytes);
  }

  /** As {@link #read(byte[][])}, at most {@code limit} bytes unless one batch is larger. */
  int read(byte[][] buffer, long limit) throws IOException {
    if (!nextHeader()) {
      return 0;
    }
    long want = Math.min(Math.max(limit, (long) size(head)), size - position);
    if (buffer[0].length < want) {
      buffer[0] = new byte[(int) want];
    }
    ByteBuffer into = ByteBuffer.wrap(buffer[0], 0, (int) want);
    while (into.hasRemaining() && channel.read(into, position + into.position()) > 0) {
      // read on: a file read may return less than asked
    }
    int whole = 0;
    long last = -1;
    byte[] buf = buffer[0];
    for (int n = into.position(); whole + LOG_OVERHEAD <= n; ) { // the whole batches read
      int end = whole + LOG_OVERHEAD + i32(buf, whole + LENGTH);
      if (end > n || end < whole + SIZE) {
        break;
      }
      last = i64(buf, whole + BASE_OFFSET) + i32(buf, whole + LAST_OFFSET_DELTA);
      whole = end;
    }
    position += whole;
    if (last >= range.end - 1) {
      done = true;
    }
    return whole;
  }

  /** Opens the segment holding the next batch; false when the range has no more. */
  private boolean seek() throws IOException {
    while (!done) {
      if (channel == null) {
        channel = PartitionLog.open(file());
        size = channel.size();
      }
      if (position < size) {
        return true;
      }
      channel.close();
      channel = null;
      segment++;
      position = 0;
      done = segment >= log.segments() || log.base(segment) >= range.end;
    }
    return false;
  }

  private boolean endOrCorrupt() {
    if (segment == log.segments() - 1) {
      done = true; // the writer's tail, past what the scan planned
      return false;
    }
    throw ReadError.at("CorruptRecordError", "truncated record batch", file(), position);
  }

  @Override
  public void close() throws IOException {
    if (channel != null) {
      channel.close();
    }
  }
}
