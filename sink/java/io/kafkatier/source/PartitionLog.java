package io.kafkatier.source;

import static io.kafkatier.source.BatchHeader.*;

import java.io.File;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.regex.Pattern;

/**
 * One partition's files as an executor finds them, as storage/log/readonly.py does: segments
 * listed by name ({@code <20-digit base offset>.log}); the batch holding an offset is found
 * through the segment's offset index ({@code .index}: 8-byte entries, the relative last offset of
 * a batch and its position, an entry only a hint checked against the batch it points at) and
 * then batch headers. The active segment's index is read too, while its writer appends: it is
 * preallocated, its unwritten entries zero, and no entry names position 0 (Kafka indexes a batch
 * only after {@code index.interval.bytes} of earlier ones), so the written entries are the
 * prefix of entries with a position; without it a task starting deep in a large active segment
 * read every batch header before its range (a streaming query's each trigger). The aborted
 * transactions of the {@code .txnindex} files (34-byte entries: version, producer id, first
 * offset, last offset, last stable offset), as Kafka's collectAbortedTransactions.
 */
final class PartitionLog {
  private static final Pattern SEGMENT = Pattern.compile("\\d{20}\\.log");
  private final String dir;
  private final long[] bases;

  PartitionLog(String dir) {
    this.dir = dir;
    String[] names = new File(dir).list();
    if (names == null) {
      throw ReadError.at("OffsetOutOfRangeError", "partition directory gone since the scan was "
          + "planned: run the query again", dir, 0);
    }
    bases = Arrays.stream(names).filter(n -> SEGMENT.matcher(n).matches())
        .mapToLong(n -> Long.parseLong(n.substring(0, 20))).sorted().toArray();
  }

  String file(int segment, String suffix) {
    return dir + File.separator + String.format("%020d", bases[segment]) + suffix;
  }

  /** The segment holding {@code offset}: the last whose base is at most it (else the first). */
  int segmentOf(long offset) {
    int i = Arrays.binarySearch(bases, offset);
    return i >= 0 ? i : Math.max(-i - 2, 0);
  }

  int segments() {
    return bases.length;
  }

  long base(int segment) {
    return bases[segment];
  }

  /** Where the first batch whose last offset is at least {@code offset} starts in a segment. */
  long positionOf(int segment, long offset) throws IOException {
    try (FileChannel log = open(file(segment, ".log"))) {
      long from = indexed(segment, offset, log);
      ByteBuffer head = ByteBuffer.allocate(SIZE);
      long size = log.size();
      for (long at = from; at + SIZE <= size; ) {
        head.clear();
        if (log.read(head, at) < SIZE) {
          return size;
        }
        if (lastOffset(head) >= offset) {
          return at;
        }
        at += Math.max(size(head), SIZE);
      }
      return size;
    }
  }

  /** The position the offset index gives for {@code offset}, once the batch there agrees. */
  private long indexed(int segment, long offset, FileChannel log) throws IOException {
    File index = new File(file(segment, ".index"));
    if (!index.isFile()) {
      return 0;
    }
    try (FileChannel idx = FileChannel.open(index.toPath(), StandardOpenOption.READ)) {
      ByteBuffer entry = ByteBuffer.allocate(8);
      long low = 0;
      long high = idx.size() / 8 - 1;
      long position = 0; // of the last written entry whose offset is at most the target
      long named = -1; // the last offset that entry names
      while (low <= high) {
        long mid = (low + high) >>> 1;
        if (readEntry(idx, entry, mid) && bases[segment] + entry.getInt(0) <= offset) {
          position = entry.getInt(4) & 0xffffffffL;
          named = bases[segment] + entry.getInt(0);
          low = mid + 1;
        } else {
          high = mid - 1;
        }
      }
      ByteBuffer head = ByteBuffer.allocate(SIZE);
      if (named < 0 || position + SIZE > log.size() || log.read(head, position) < head.limit()
          || lastOffset(head) != named) {
        return 0; // no entry, or one that does not point at its batch: scan the segment instead
      }
      return position;
    }
  }

  /**
   * Entry {@code i} into {@code entry}: false for one not written yet (position 0) or not there
   * any more (the writer trims the active index when it rolls or closes the segment), never
   * the bytes of an earlier read.
   */
  private static boolean readEntry(FileChannel idx, ByteBuffer entry, long i) throws IOException {
    entry.clear();
    int got = idx.read(entry, i * 8);
    return got == 8 && entry.getInt(4) != 0;
  }

  /** The aborted transactions of the {@code .txnindex} files overlapping [start, end). */
  List<long[]> abortedTxns(long start, long end) throws IOException {
    List<long[]> found = new ArrayList<>();
    ByteBuffer entry = ByteBuffer.allocate(34);
    for (int s = segmentOf(start); s < bases.length; s++) {
      File index = new File(file(s, ".txnindex"));
      if (!index.isFile()) {
        continue;
      }
      try (FileChannel idx = FileChannel.open(index.toPath(), StandardOpenOption.READ)) {
        for (long at = 0, size = idx.size(); at + 34 <= size; at += 34) {
          entry.clear();
          idx.read(entry, at);
          long producerId = entry.getLong(2);
          long first = entry.getLong(10);
          long last = entry.getLong(18);
          if (last >= start && first < end) {
            found.add(new long[] {producerId, first});
          }
          if (entry.getLong(26) >= end) {
            return found; // no later entry overlaps the range
          }
        }
      }
    }
    return found;
  }

  static FileChannel open(String file) throws IOException {
    try {
      return FileChannel.open(Path.of(file), StandardOpenOption.READ);
    } catch (NoSuchFileException e) {
      throw ReadError.at("OffsetOutOfRangeError", "segment file gone since the scan was planned"
          + " (deleted by retention or compaction): run the query again", file, 0);
    }
  }
}
