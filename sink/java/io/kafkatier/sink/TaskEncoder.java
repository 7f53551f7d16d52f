package io.kafkatier.sink;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.function.Function2;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * One Spark task of the sink's encode job: routes each row to its Kafka partition as a Kafka
 * producer would (an explicit partition wins, a key goes to murmur2(key) % partitions, keyless
 * rows round robin from the task's index) and appends it to that partition's open batch. A
 * batch closes when the next record would take it past the topic's max.message.bytes, when the
 * open batches of the task together pass the plan's open budget (the largest one closes, and
 * with many partitions gives its buffer back: memory stays bounded whatever the partition
 * count), or at the end. Records keep their input order within
 * each partition. Bad input fails the task before the driver writes anything.
 */
final class TaskEncoder implements Function2<Integer, Iterator<Object>, Iterator<Row>> {
  private static final long serialVersionUID = 1L;
  private static final int FEW_PARTITIONS = 16; // up to this many open batches keep their buffers

  private final EncodePlan plan;
  private final RowReader reader;

  TaskEncoder(EncodePlan plan, RowReader reader) {
    this.plan = plan;
    this.reader = reader;
  }

  /** Per topic: partition count, batch limits, open batches and the keyless rows so far. */
  private static final class TopicState {
    final int partitions;
    final int maxBatchBytes;
    final int limit;
    final int room; // what a new open batch's records start with
    final boolean keysRequired; // a compacted topic: no record without a key
    final long earliest; // the timestamps its records may have (message.timestamp.*.max.ms)
    final long latest;
    final BatchBuilder[] open;
    long keyless;

    TopicState(long[] plan, int task, EncodePlan encode) {
      partitions = (int) plan[0];
      maxBatchBytes = (int) plan[1];
      limit = (int) plan[2];
      keysRequired = plan[3] != 0;
      earliest = plan[4];
      latest = plan[5];
      open = new BatchBuilder[partitions];
      keyless = task;
      long most = Math.min(limit, encode.openBudget / Math.max(partitions, 1));
      room = (int) Math.max(1024, Math.min(encode.openBatchBytes, most));
    }
  }

  /**
   * The task over its input's elements ({@link InputSource}): Spark's internal rows, or a
   * columnar scan's batches, whose rows are views of the batch's columns.
   */
  @Override
  public Iterator<Row> call(Integer task, Iterator<Object> input) {
    try (PieceOutput out = output(task)) {
      Run run = new Run(task, out);
      while (input.hasNext()) {
        Object next = input.next();
        if (next instanceof ColumnarBatch batch) {
          run.addRows(batch.rowIterator(), reader.viewable(batch));
        } else {
          InternalRow row = (InternalRow) next;
          run.addRow(row, row instanceof UnsafeRow);
        }
      }
      run.closeAll();
      return out.finish().iterator();
    }
  }

  private PieceOutput output(int task) {
    TaskContext ctx = TaskContext.get();
    long attempt = ctx == null ? 0 : ctx.taskAttemptId();
    return new PieceOutput(task, plan.stagingDir, plan.stagingPrefix, attempt, plan.chunkBytes);
  }

  /** The state of one task attempt. */
  private final class Run {
    private final int task;
    private final PieceOutput out;
    private final Compression codec = new Compression(plan.codecId, plan.level);
    private final Map<String, TopicState> topics = new HashMap<>();
    private final List<BatchBuilder> builders = new ArrayList<>();
    private final Bytes batch = new Bytes(1024 * 1024);
    private final Record record = new Record(); // every row's, in turn
    private long rowsRead; // in the task so far: the next row's index
    private long openBytes;
    private String lastName; // the topic of the last row, and its state
    private TopicState last;
    private SortBuffer sorting; // the records of topics of many partitions, until they move

    Run(int task, PieceOutput out) {
      this.task = task;
      this.out = out;
    }

    void addRows(Iterator<InternalRow> rows, boolean views) {
      while (rows.hasNext()) {
        addRow(rows.next(), views);
      }
    }

    /** Reads and adds a row; views: its key and value may be read as views of its bytes. */
    void addRow(InternalRow row, boolean views) {
      reader.read(row, record, plan.writeTimeMs, rowsRead, views);
      add(record, rowsRead++);
    }

    void add(Record r, long index) {
      String name = plan.fixedTopic != null ? plan.fixedTopic : r.topic;
      if (name == null) {
        throw InputError.schema("column 'topic' is null in row " + index + " of Spark "
            + "partition " + task + "; fix: fill it, or pass KafkaLogSink(..., topic=...)");
      }
      TopicState t = topicState(name);
      checkRules(r, t, name, index);
      int p = partitionOf(r, t, index);
      BatchBuilder b = t.open[p];
      if (b == null) {
        b = new BatchBuilder(name, p, t.limit, t.room, builders.size());
        t.open[p] = b;
        builders.add(b);
      }
      SortBuffer s = t.partitions > SortBuffer.ABOVE_PARTITIONS ? sorting() : null;
      int before = b.size();
      if (!b.tryAdd(r, s)) {
        close(b, t);
        before = 0;
        b.tryAdd(r, s);
      }
      openBytes += b.size() - before;
      if (s != null && s.full()) {
        s.flush(builders);
      }
      if (openBytes > plan.openBudget) {
        closeLargest();
      }
    }

    private SortBuffer sorting() {
      if (sorting == null) {
        sorting = new SortBuffer(plan.bufferBytes, plan.bufferRecords);
      }
      return sorting;
    }

    /** The topic's state; the last one's without a lookup (a fixed topic's, every row). */
    private TopicState topicState(String name) {
      if (name == lastName || name.equals(lastName)) {
        return last;
      }
      TopicState t = topics.get(name);
      if (t == null) {
        t = new TopicState(plan.topic(name), task, plan);
        topics.put(name, t);
      }
      lastName = name;
      last = t;
      return t;
    }

    /** storage/arrow/record_rules.py's rules, with its messages (a broker's LogValidator's). */
    private void checkRules(Record r, TopicState t, String name, long index) {
      if (t.keysRequired && r.key.isNull()) {
        throw InputError.invalid("compacted topic " + name + " (cleanup.policy=compact) cannot "
            + "accept a record without a key (row " + index + " of Spark partition " + task + ")");
      }
      if (r.timestamp < t.earliest || r.timestamp > t.latest) {
        throw InputError.invalid("timestamp " + r.timestamp + " is out of range for topic " + name
            + ": it must be within [" + t.earliest + ", " + t.latest + "] (message.timestamp."
            + "before.max.ms, message.timestamp.after.max.ms) (row " + index + " of Spark "
            + "partition " + task + ")");
      }
    }

    private int partitionOf(Record r, TopicState t, long index) {
      if (r.partitionGiven) {
        if (r.partition >= t.partitions || r.partition < 0) {
          throw InputError.schema("column 'partition' row " + index + ": partition "
              + r.partition + " is outside [0, " + t.partitions + "); the topic has "
              + t.partitions + " partitions (row index within Spark partition " + task + ")");
        }
        return r.partition;
      }
      if (!r.key.isNull()) {
        return Murmur2.partition(r.key, t.partitions);
      }
      return (int) (t.keyless++ % t.partitions);
    }

    private void close(BatchBuilder b, TopicState t) {
      if (b.buffered > 0) {
        sorting.flush(builders);
      }
      int count = b.count;
      openBytes -= b.records.size;
      batch.reset();
      b.closeInto(batch, plan, codec, t.maxBatchBytes);
      out.add(b.topic, b.partition, batch, count);
    }

    private void closeLargest() {
      BatchBuilder largest = builders.get(0);
      for (BatchBuilder b : builders) {
        if (b.size() > largest.size()) {
          largest = b;
        }
      }
      close(largest, topics.get(largest.topic));
      if (builders.size() > FEW_PARTITIONS) {
        largest.records.release();
      }
    }

    void closeAll() {
      if (sorting != null) {
        sorting.flush(builders); // before the sort: the buffer knows batches by their slots
      }
      builders.sort((x, y) -> x.topic.equals(y.topic)
          ? Integer.compare(x.partition, y.partition) : x.topic.compareTo(y.topic));
      for (BatchBuilder b : builders) {
        if (b.count > 0) {
          close(b, topics.get(b.topic));
        }
      }
    }
  }
}
