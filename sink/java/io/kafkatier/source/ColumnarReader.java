package io.kafkatier.source;

import static io.kafkatier.source.BatchHeader.*;

import java.io.IOException;
import java.nio.ByteBuffer;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * One Spark task: its ranges read in turn ({@link RangeCursor}: the executor finds the batches in
 * the segment files itself), each chunk of at most {@code readChunkBytes} read into one buffer
 * (reused) and decoded into columnar batches of about {@link #BATCH_ROWS} rows, so a task holds
 * one chunk of log and a few thousand decoded rows, whatever the partition's size; a query that
 * uses no record (a count) reads batch headers only ({@link #countChunk}).
 */
final class ColumnarReader implements PartitionReader<ColumnarBatch> {
  /** Rows a columnar batch holds (then it ends with its record batch), as Spark's Parquet. */
  static final int BATCH_ROWS = 4096;
  private final ReadTask task;
  private final RecordColumns columns;
  private final BatchDecoder decoder = new BatchDecoder();
  private final byte[][] buffer = {new byte[0]};
  private int range = -1;
  private RangeCursor cursor;
  private AbortedFilter filter;
  private String file; // of the chunk in the buffer
  private long position;
  private int size;
  private int at; // where its next batch starts
  private long held; // the most this task has held (TaskMemory)

  ColumnarReader(ReadTask task, StructType schema) {
    this.task = task;
    this.columns = new RecordColumns(schema);
  }

  @Override
  public boolean next() throws IOException {
    while (true) {
      if (at < size) { // a chunk in progress: its next rows
        columns.reset(task.ranges[range]);
        at = decoder.decode(buffer[0], size, at, file, position, task.ranges[range], filter,
            columns, BATCH_ROWS);
        if (produced()) {
          return true;
        }
        continue;
      }
      if (cursor == null && !nextRange()) {
        return false;
      }
      if (!columns.needsRecords()) {
        columns.reset(task.ranges[range]);
        countChunk();
        if (produced()) {
          return true;
        }
        continue;
      }
      file = cursor.file();
      position = cursor.position();
      size = cursor.read(buffer);
      at = 0;
      if (size == 0) {
        closeCursor();
      }
    }
  }

  private boolean nextRange() throws IOException {
    if (++range >= task.ranges.length) {
      return false;
    }
    cursor = new RangeCursor(task.ranges[range], task.ranges[range].chunkBytes);
    filter = cursor.filter();
    return true;
  }

  private boolean produced() {
    held = Math.max(held, columns.memory(buffer[0].length + decoder.bufferBytes()));
    return columns.rows > 0;
  }

  /**
   * Up to {@link #BATCH_ROWS} rows of a range whose records the query does not use, from batch
   * headers alone: each data batch wholly in range counts its records unread, so unchecked by
   * its CRC, as Parquet counts from footers; control batches and batches at the range's edges
   * are read and decoded whole.
   */
  private void countChunk() throws IOException {
    RangeCursor c = cursor;
    ReadRange r = task.ranges[range];
    while (columns.rows < BATCH_ROWS) {
      if (!c.nextHeader()) {
        closeCursor();
        return;
      }
      ByteBuffer head = c.header();
      int attributes = head.getShort(ATTRIBUTES);
      long base = head.getLong(BASE_OFFSET);
      long last = lastOffset(head);
      int records = head.getInt(RECORDS);
      columns.ensure(Math.max(records, 0));
      if (head.get(MAGIC) != 2 || (attributes & CONTROL) != 0 || base < r.start || last >= r.end) {
        String where = c.file();
        long from = c.position();
        int n = c.read(buffer, size(head));
        decoder.decode(buffer[0], n, 0, where, from, r, filter, columns, Integer.MAX_VALUE);
        continue;
      }
      if (last >= r.start && (filter == null
          || filter.keep(last, (attributes & TRANSACTIONAL) != 0, head.getLong(PRODUCER_ID)))) {
        columns.endRows(records, (attributes & LOG_APPEND_TIME) != 0 ? 1 : 0);
      }
      c.skip();
    }
  }

  private void closeCursor() throws IOException {
    if (cursor != null) {
      cursor.close();
      cursor = null;
    }
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
  public void close() throws IOException {
    closeCursor();
    columns.close();
  }
}
