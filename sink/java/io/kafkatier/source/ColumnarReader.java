package io.kafkatier.source;

import java.io.EOFException;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.RandomAccessFile;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * One Spark task: its ranges' spans read in turn, each into one buffer (at most {@code
 * readChunkBytes}, reused) and decoded into one columnar batch, so a task holds one span of log
 * and its decoded rows, whatever the partition's size.
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
      int size = read(r.files[span], r.positions[span], r.sizes[span]);
      if (size < 8 || BatchDecoder.i64(buffer, 0) != r.firstOffsets[span]) {
        throw ReadError.at("OffsetOutOfRangeError", "segment file changed since the scan was "
            + "planned (compacted or recovered): run the query again", r.files[span],
            r.positions[span]);
      }
      columns.reset(BatchDecoder.capacity(buffer, size), r);
      decoder.decode(buffer, size, r.files[span], r.positions[span], r, filter, columns);
      span++;
      if (columns.rows > 0) {
        return true;
      }
    }
    return false;
  }

  private int read(String file, long position, int size) throws IOException {
    if (buffer.length < size) {
      buffer = new byte[size];
    }
    try (RandomAccessFile f = new RandomAccessFile(file, "r")) {
      f.seek(position);
      f.readFully(buffer, 0, size);
    } catch (FileNotFoundException e) {
      throw ReadError.at("OffsetOutOfRangeError", "segment file gone since the scan was planned"
          + " (deleted by retention or compaction): run the query again", file, position);
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
