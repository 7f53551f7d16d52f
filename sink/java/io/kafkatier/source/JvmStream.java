package io.kafkatier.source;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxRows;
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * A streaming query read by this reader. Its offsets (initial, latest within a read limit,
 * Trigger.AvailableNow, the micro-batches' tasks) are decided by the driver's planner ({@link
 * Planner#stream}: {@code StreamOffsets} in sink/source/stream.py, the code the Python source's
 * stream runs), in the driver's own Python process: unlike a Python source's stream, this one
 * starts no Python process of its own, whose start-up (Python, PySpark's worker, the source's
 * imports) cost a query more than a second before its first trigger. Offsets are the JSON the
 * planner writes, Spark's Kafka offsets, byte for byte what the Python source's stream writes to
 * a checkpoint, so either reader resumes the other's checkpoint.
 */
final class JvmStream implements MicroBatchStream, SupportsTriggerAvailableNow {
  private static final AtomicLong STREAMS = new AtomicLong();

  private final CaseInsensitiveStringMap options;
  private final StructType columns;
  private final long id = STREAMS.incrementAndGet();

  JvmStream(CaseInsensitiveStringMap options, StructType columns) {
    this.options = options;
    this.columns = columns;
  }

  @Override
  public Offset initialOffset() {
    return offset(call("initial", Map.of()));
  }

  @Override
  public Offset latestOffset() {
    throw new UnsupportedOperationException(
        "latestOffset(Offset, ReadLimit) should be called instead of this method");
  }

  @Override
  public Offset latestOffset(Offset start, ReadLimit limit) {
    Map<String, Object> args = new HashMap<>();
    args.put("start", start.json());
    if (limit instanceof ReadMaxRows) {
      args.put("max_rows", ((ReadMaxRows) limit).maxRows());
    }
    return offset(call("latest", args));
  }

  @Override
  public ReadLimit getDefaultReadLimit() {
    JsonNode rows = call("default_limit", Map.of()).path("max_rows");
    return rows.isNumber() ? ReadLimit.maxRows(rows.asLong()) : ReadLimit.allAvailable();
  }

  @Override
  public Offset reportLatestOffset() {
    return offset(call("report_latest", Map.of()));
  }

  @Override
  public void prepareForTriggerAvailableNow() {
    call("available_now", Map.of());
  }

  @Override
  public InputPartition[] planInputPartitions(Offset start, Offset end) {
    return Planner.tasks(call("plan", Map.of("start", start.json(), "end", end.json()))
        .get("tasks"));
  }

  @Override
  public PartitionReaderFactory createReaderFactory() {
    return new ColumnarReaderFactory(columns);
  }

  @Override
  public Offset deserializeOffset(String json) {
    return new StreamOffset(json);
  }

  @Override
  public void commit(Offset end) {
    // Nothing to acknowledge: progress lives in Spark's checkpoint, not in the log dir.
  }

  @Override
  public void stop() {
    call("stop", Map.of());
  }

  @Override
  public String toString() {
    return "kafkatier stream (JVM reader)";
  }

  private JsonNode call(String what, Map<String, Object> args) {
    return Planner.stream(options, id, what, args);
  }

  private static Offset offset(JsonNode answer) {
    JsonNode json = answer.path("offset");
    return json.isTextual() ? new StreamOffset(json.asText()) : null;
  }

  /** An offset as the planner wrote it (Spark compares offsets by their JSON). */
  static final class StreamOffset extends Offset {
    private final String json;

    StreamOffset(String json) {
      this.json = json;
    }

    @Override
    public String json() {
      return json;
    }
  }
}
