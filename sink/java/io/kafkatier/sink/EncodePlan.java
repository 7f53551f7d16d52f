package io.kafkatier.sink;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.util.HashMap;
import java.util.Map;

/**
 * What the executors are told for one micro-batch: the JSON form of Python's
 * kafkatier.sink.encode.EncodePlan (sink/jvm.py writes it), shipped with the tasks.
 *
 * <pre>
 * {"fixed_topic": "events" | null,
 *  "topics": {"events": [partitions, max_batch_bytes, batch_limit, keys_required (0/1),
 *             earliest_timestamp, latest_timestamp], ...},
 *  "new_topic": [the same six] | null, "codec": 0-4,
 *  "level": int | null, "producer_id": long, "producer_epoch": short, "write_time_ms": long,
 *  "staging_dir": "/logs" | null, "staging_prefix": "name prefix", "open_budget": bytes,
 *  "chunk_bytes": bytes, "max_tasks": tasks at most (0: as the rows come),
 *  "sort_buffer_bytes": bytes, "sort_buffer_records": records (SortBuffer's buffer; absent: its defaults),
 *  "pieces_schema": "task int, topic string, ..."}
 * </pre>
 *
 * <p>batch_limit (header + uncompressed records per batch), chunk_bytes and pieces_schema are
 * Python's own figures (storage/_arrow_encode.py batch_byte_limit, sink/encode.py CHUNK_BYTES and
 * CHUNK_SCHEMA), sent so that they are defined once.
 * <pre>
 * </pre>
 */
final class EncodePlan implements Serializable {
  private static final long serialVersionUID = 1L;
  final String fixedTopic;
  final Map<String, long[]> topics = new HashMap<>();
  final long[] newTopic;
  final int codecId;
  final Integer level;
  final long producerId;
  final short producerEpoch;
  final long writeTimeMs;
  final String stagingDir;
  final String stagingPrefix; // the staging files' name prefix in stagingDir
  final long openBudget; // bytes of open batches a task may hold before closing the largest
  final int openBatchBytes; // an open batch's starting room (sink/plan.py); 0: 1 KiB
  final int chunkBytes;
  final int maxTasks; // the job's tasks at most (the rows coalesced, no shuffle); 0: no limit
  final String piecesSchema;
  final int bufferBytes; // SortBuffer's buffer: bytes and records buffered before they move
  final int bufferRecords;

  private EncodePlan(JsonNode root) {
    fixedTopic = text(root.get("fixed_topic"));
    for (Map.Entry<String, JsonNode> e : root.get("topics").properties()) {
      topics.put(e.getKey(), pair(e.getValue()));
    }
    newTopic = pair(root.get("new_topic"));
    codecId = root.get("codec").asInt();
    JsonNode lvl = root.get("level");
    level = lvl == null || lvl.isNull() ? null : lvl.asInt();
    producerId = root.get("producer_id").asLong();
    producerEpoch = (short) root.get("producer_epoch").asInt();
    writeTimeMs = root.get("write_time_ms").asLong();
    stagingDir = text(root.get("staging_dir"));
    JsonNode prefix = root.get("staging_prefix");
    stagingPrefix = prefix == null || prefix.isNull() ? "" : prefix.asText();
    openBudget = root.get("open_budget").asLong();
    JsonNode room = root.get("open_batch_bytes");
    openBatchBytes = room == null || room.isNull() ? 0 : room.asInt();
    chunkBytes = root.get("chunk_bytes").asInt();
    maxTasks = root.get("max_tasks").asInt();
    piecesSchema = root.get("pieces_schema").asText();
    bufferBytes = intOr(root.get("sort_buffer_bytes"), SortBuffer.BYTES);
    bufferRecords = intOr(root.get("sort_buffer_records"), SortBuffer.RECORDS);
  }

  static EncodePlan parse(String json) {
    try {
      return new EncodePlan(new ObjectMapper().readTree(json));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /**
   * [partitions, max.message.bytes, batch limit, keys required, earliest and latest timestamp]
   * of a topic (sink/jvm.py's plan_json); unknown without new_topic: error.
   */
  long[] topic(String name) {
    long[] plan = topics.get(name);
    if (plan == null) {
      plan = newTopic;
    }
    if (plan == null) {
      throw InputError.schema("column 'topic': unknown topic '" + name + "' (not in the log dir) "
          + "and the sink has no partitions= for new topics; fix: pass "
          + "KafkaLogSink(..., partitions=N)");
    }
    return plan;
  }

  private static int intOr(JsonNode node, int absent) {
    return node == null || node.isNull() ? absent : node.asInt();
  }

  private static String text(JsonNode node) {
    return node == null || node.isNull() ? null : node.asText();
  }

  private static long[] pair(JsonNode node) {
    if (node == null || node.isNull()) {
      return null;
    }
    long[] plan = new long[node.size()];
    for (int i = 0; i < plan.length; i++) {
      plan[i] = node.get(i).asLong();
    }
    return plan;
  }
}
