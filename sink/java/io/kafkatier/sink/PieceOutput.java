package io.kafkatier.sink;

import java.io.BufferedOutputStream;
import java.io.File;
import java.io.FileNotFoundException;
import java.io.FileOutputStream;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;

/**
 * Where a task's closed batches go, and the rows that tell the driver where they are: one row
 * per piece of consecutive batches of one Kafka partition, at most chunkBytes (a single batch
 * may exceed it), in the schema of sink/encode.py's CHUNK_SCHEMA: (task, topic, partition,
 * records, path, position, length, data). Staged: the batches are appended to the task
 * attempt's staging file (sink/stage.py) and the row holds path/position/length; otherwise the
 * row carries the bytes in data. The file is written through a 1 MiB buffer: at 1,024
 * partitions a task closes a batch of a few KiB for each, and with a write call a batch the
 * encode job of 200,000 rows took 100-104 ms of executor CPU against 89-94 ms buffered
 * (Spark's stage metrics, ad hoc, alternating runs; 66-71 ms at 8 partitions either way).
 */
final class PieceOutput implements AutoCloseable {
  private static final int WRITE_BUFFER = 1 << 20;
  private final int task;
  private final int chunkBytes;
  private final String path;
  private final FileOutputStream file;
  private final BufferedOutputStream buffered;
  private final List<Row> rows = new ArrayList<>();
  private final Bytes pending = new Bytes(1024 * 1024); // inline mode: the open piece's bytes
  private long written; // staged: bytes in the file
  private String topic; // the open piece
  private int partition;
  private long records;
  private long start;
  private long length;

  PieceOutput(int task, String stagingDir, String prefix, long attempt, int chunkBytes) {
    this.task = task;
    this.chunkBytes = chunkBytes;
    if (stagingDir == null) {
      path = null;
      file = null;
      buffered = null;
      return;
    }
    File dir = new File(stagingDir);
    if (!dir.isDirectory()) {
      throw new IllegalStateException("staging directory " + stagingDir + " is not visible on "
          + "this executor; fix: pass KafkaLogSink(..., staging='<a directory every executor "
          + "and the driver share>') or staging=False (encoded bytes then travel through the "
          + "driver JVM)");
    }
    File f = new File(dir, prefix + "task-" + task + "-" + attempt + ".kbatches");
    path = f.getPath();
    try {
      file = new FileOutputStream(f);
    } catch (FileNotFoundException e) {
      throw InputError.write(e); // its message names the file
    }
    buffered = new BufferedOutputStream(file, WRITE_BUFFER);
  }

  /** Takes the closed batches in buf (all of one partition, `count` records). */
  void add(String t, int p, Bytes buf, int count) {
    boolean extend = topic != null && topic.equals(t) && partition == p
        && length + buf.size <= chunkBytes;
    if (!extend) {
      emit();
      topic = t;
      partition = p;
      start = written;
    }
    if (file != null) {
      try {
        buffered.write(buf.data, 0, buf.size);
      } catch (IOException e) {
        throw InputError.write(path, e);
      }
    } else {
      pending.put(buf.data, 0, buf.size);
    }
    written += buf.size;
    length += buf.size;
    records += count;
  }

  private void emit() {
    if (topic == null || length == 0) {
      return;
    }
    if (file != null) {
      rows.add(RowFactory.create(task, topic, partition, records, path, start, length, null));
    } else {
      byte[] data = java.util.Arrays.copyOf(pending.data, pending.size);
      rows.add(RowFactory.create(task, topic, partition, records, null, null, null, data));
      pending.reset();
    }
    topic = null;
    records = 0;
    length = 0;
  }

  /**
   * The rows for every piece, once all batches are in; a staging file is fsynced first (it is
   * the sink's write-ahead log: each task syncs its own while the others still encode, so the
   * driver's sync of the files before its commit decision finds them clean).
   */
  List<Row> finish() {
    emit();
    if (file != null) {
      try {
        buffered.flush();
        file.getFD().sync();
      } catch (IOException e) {
        throw InputError.write(path, e); // one line, as the driver's space check gives
      }
    }
    close();
    return rows;
  }

  @Override
  public void close() {
    if (file != null) {
      try {
        file.close();
      } catch (IOException e) {
        throw InputError.write(path, e);
      }
    }
  }
}
