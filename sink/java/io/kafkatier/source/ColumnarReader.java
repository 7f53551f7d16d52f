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
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * One Spark task: its ranges' spans read in turn, each into one buffer (at most {@code
 * readChunkBytes}, reused) and decoded into columnar batches of about {@link #BATCH_ROWS} rows,
 * so a task holds one span of log and a few thousand decoded rows, whatever the partition's size;
 * a query that uses no record (a count) reads batch headers only ({@link #countSpan}).
 */
final class ColumnarReader implements PartitionReader<ColumnarBatch> {
  /** Rows a columnar batch holds (then it ends with its record batch), as Spark's Parquet. */
  static final int BATCH_ROWS = 4096;
  private final ReadTask task;
  private final RecordColumns columns;
  private final BatchDecoder decoder = new BatchDecoder();
  private byte[] buffer = new byte[0];
  private int range;
  private int span;
  private AbortedFilter filter;
  private int size; // of the span in the buffer
  private int at; // where its next batch starts
  private long held; // the most this task has held (TaskMemory)

  ColumnarReader(ReadTask task, StructType schema) {
    this.task = task;
    this.columns = new RecordColumns(schema);
  }

  @Override
  public boolean next() throws IOException {
    while (true) {
      if (at < size) { // a span in progress: its next rows
        ReadRange r = task.ranges[range];
        columns.reset(r);
        at = decoder.decode(buffer, size, at, r.files[span - 1], r.positions[span - 1], r, filter,
            columns, BATCH_ROWS);
        held = Math.max(held, columns.memory(buffer.length + decoder.bufferBytes()));
        if (columns.rows > 0) {
          return true;
        }
        continue;
      }
      if (range == task.ranges.length) {
        return false;
      }
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
        startSpan(r, span++);
        continue;
      }
      countSpan(r, span++);
      held = Math.max(held, columns.memory(buffer.length + decoder.bufferBytes()));
      if (columns.rows > 0) {
        return true;
      }
    }
  }

  private void startSpan(ReadRange r, int i) throws IOException {
    size = read(r.files[i], r.positions[i], r.sizes[i]);
    checkFirst(size >= 8 ? BatchDecoder.i64(buffer, 0) : -1, r, i);
    at = 0;
  }

  /**
   * A span whose records the query does not use (a count): batch headers only. Each data batch
   * wholly in range counts its records unread, so unchecked by its CRC, as Parquet counts from
   * footers; control batches and batches at the range's edges are read and decoded whole.
   */
  private void countSpan(ReadRange r, int i) throws IOException {
    columns.reset(r);
    ByteBuffer head = ByteBuffer.allocate(BatchDecoder.HEADER);
    try (FileChannel channel = open(r.files[i], r.positions[i])) {
      for (long pos = r.positions[i], end = pos + r.sizes[i]; pos < end; ) {
        head.clear();
        readFully(channel, head, pos, r.files[i]);
        long base = head.getLong(0);
        int length = 12 + head.getInt(8);
        if (length < BatchDecoder.HEADER || pos + length > end) {
          throw ReadError.at("CorruptRecordError", "truncated record batch", r.files[i], pos);
        }
        if (pos == r.positions[i]) {
          checkFirst(base, r, i);
        }
        int attributes = head.getShort(21);
        long last = base + head.getInt(23);
        int records = head.getInt(57);
        columns.ensure(Math.max(records, 0));
        if (head.get(16) != 2 || (attributes & 0x20) != 0 || base < r.start || last >= r.end) {
          int n = read(r.files[i], pos, length);
          decoder.decode(buffer, n, 0, r.files[i], pos, r, filter, columns, Integer.MAX_VALUE);
        } else if (filter == null
            || filter.keep(last, (attributes & 0x10) != 0, head.getLong(43))) {
          columns.endRows(records, (attributes & 0x08) != 0 ? 1 : 0);
        }
        pos += length;
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
  public CustomTaskMetric[] currentMetricsValues() {
    return new CustomTaskMetric[] {TaskMemory.value(held)};
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
