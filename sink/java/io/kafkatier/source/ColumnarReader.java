package io.kafkatier.source;

import java.io.EOFException;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * One Spark task: its ranges' spans read in turn, each into one buffer (at most {@code
 * readChunkBytes}, reused) and decoded into one columnar batch, so a task holds one span of log
 * and its decoded rows, whatever the partition's size; a query that uses no record (a count)
 * reads batch headers only ({@link #countSpan}).
 */
final class ColumnarReader implements PartitionReader<ColumnarBatch> {
  private final ReadTask task;
  private final RecordColumns columns;
  private final BatchDecoder decoder = new BatchDecoder();
  private byte[] buffer = new byte[0];
  private int range;
  private int span;
  private AbortedFilter filter;

  ColumnarReader(ReadTask task, StructType schema) {
    this.task = task;
    this.columns = new RecordColumns(schema);
  }

  @Override
  public boolean next() throws IOException {
    while (range < task.ranges.length) {
      ReadRange r = task.ranges[range];
      if (span == 0) {
        filter = r.committed && r.abortedProducers.length > 0 ? new AbortedFilter(r) : null;
      }
      if (span == r.files.length) {
        range++;
        span = 0;
        continue;
      }
      if (columns.needsRecords()) {
        decodeSpan(r, span);
      } else {
        countSpan(r, span);
      }
      span++;
      if (columns.rows > 0) {
        return true;
      }
    }
    return false;
  }

  private void decodeSpan(ReadRange r, int i) throws IOException {
    int size = read(r.files[i], r.positions[i], r.sizes[i]);
    checkFirst(size >= 8 ? BatchDecoder.i64(buffer, 0) : -1, r, i);
    columns.reset(BatchDecoder.capacity(buffer, size), r);
    decoder.decode(buffer, size, r.files[i], r.positions[i], r, filter, columns);
  }

  /**
   * A span whose records the query does not use (a count): batch headers only. Each data batch
   * wholly in range counts its records unread, so unchecked by its CRC, as Parquet counts from
   * footers; control batches and batches at the range's edges are read and decoded whole.
   */
  private void countSpan(ReadRange r, int i) throws IOException {
    columns.reset(0, r);
    ByteBuffer head = ByteBuffer.allocate(BatchDecoder.HEADER);
    try (FileChannel channel = open(r.files[i], r.positions[i])) {
      for (long at = r.positions[i], end = at + r.sizes[i]; at < end; ) {
        head.clear();
        readFully(channel, head, at, r.files[i]);
        long base = head.getLong(0);
        int size = 12 + head.getInt(8);
        if (at == r.positions[i]) {
          checkFirst(base, r, i);
        }
        int attributes = head.getShort(21);
        long last = base + head.getInt(23);
        int records = head.getInt(57);
        columns.ensure(Math.max(records, 0));
        if (head.get(16) != 2 || (attributes & 0x20) != 0 || base < r.start || last >= r.end) {
          int n = read(r.files[i], at, size);
          decoder.decode(buffer, n, r.files[i], at, r, filter, columns);
        } else if (filter == null
            || filter.keep(last, (attributes & 0x10) != 0, head.getLong(43))) {
          columns.endRows(records, (attributes & 0x08) != 0 ? 1 : 0);
        }
        at += size;
      }
    }
  }

  private static void checkFirst(long base, ReadRange r, int i) {
    if (base != r.firstOffsets[i]) {
      throw ReadError.at("OffsetOutOfRangeError", "segment file changed since the scan was "
          + "planned (compacted or recovered): run the query again", r.files[i], r.positions[i]);
    }
  }

  private static FileChannel open(String file, long position) throws IOException {
    try {
      return FileChannel.open(Path.of(file), StandardOpenOption.READ);
    } catch (NoSuchFileException e) {
      throw gone(file, position);
    }
  }

  private static void readFully(FileChannel channel, ByteBuffer into, long at, String file)
      throws IOException {
    while (into.hasRemaining()) {
      if (channel.read(into, at + into.position()) < 0) {
        throw ReadError.at("CorruptRecordError", "segment file shorter than planned", file, at);
      }
    }
  }

  private static ReadError gone(String file, long position) {
    return ReadError.at("OffsetOutOfRangeError", "segment file gone since the scan was planned"
        + " (deleted by retention or compaction): run the query again", file, position);
  }

  private int read(String file, long position, int size) throws IOException {
    if (buffer.length < size) {
      buffer = new byte[size];
    }
    try (RandomAccessFile f = new RandomAccessFile(file, "r")) {
      f.seek(position);
      f.readFully(buffer, 0, size);
    } catch (FileNotFoundException e) {
      throw gone(file, position);
    } catch (EOFException e) {
      throw ReadError.at("CorruptRecordError", "segment file shorter than planned (" + size
          + " bytes from here)", file, position);
    }
    return size;
  }

  @Override
  public ColumnarBatch get() {
    return columns.batch();
  }

  @Override
  public void close() {
    columns.close();
  }
}
