package io.kafkatier.source;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The driver's Python planner (sink/source/jvm.py), asked through {@link
 * KafkaTierProvider#planner}. Requests are {@code {"ask": "scope"|"plan"|"stream",
 * "options": {...}}}, a plan's with its {@code "filters"} ({@link PushedFilters}), a stream's
 * with the stream's id, the {@code "call"} and its arguments ({@link #stream}; offsets are
 * Spark's Kafka offset JSON, as strings), each with {@code "cores"}, Spark's default
 * parallelism, which the planner splits by; answers are {@code {"jvm": true|false}} for a
 * scope, {@code {"offset": "..."}} or {@code {"max_rows": n}} for a stream's offsets and
 * limit, and for a plan (a stream's too) the Spark tasks, each a list of ranges:
 *
 * <pre>
 * {"tasks": [[{"dir": "/logs/t-0", "topic": "t", "partition": 0, "start": 0, "end": 100,
 *              "committed": true, "aborted": [[producerId, firstOffset], ...],
 *              "chunk_bytes": 16777216, "fail_on_data_loss": true}]]}
 * </pre>
 *
 * or {@code {"error": "ConfigError", "message": "..."}} for a planning error (the options, a
 * partition gone from under the query), raised here as one line.
 */
final class Planner {
  private static final ObjectMapper JSON = new ObjectMapper();

  private Planner() {}

  /** Whether this reader reads the batch scans of these options (else the Python source). */
  static boolean scope(CaseInsensitiveStringMap options) {
    return ask("scope", options, Map.of()).path("jvm").asBoolean(false);
  }

  /** The Spark tasks of a batch scan narrowed by {@code filters} ({@link PushedFilters}). */
  static InputPartition[] plan(
      CaseInsensitiveStringMap options, List<Map<String, Object>> filters) {
    return tasks(ask("plan", options, Map.of("filters", filters)).get("tasks"));
  }

  /**
   * One call of streaming query {@code stream} ({@link JvmStream}): {@code what} is {@code
   * initial}, {@code latest}, {@code default_limit}, {@code report_latest}, {@code
   * available_now}, {@code plan} or {@code stop}, with its {@code args}.
   */
  static JsonNode stream(
      CaseInsensitiveStringMap options, long stream, String what, Map<String, Object> args) {
    Map<String, Object> more = new HashMap<>(args);
    more.put("stream", stream);
    more.put("call", what);
    return ask("stream", options, more);
  }

  static InputPartition[] tasks(JsonNode tasks) {
    InputPartition[] out = new InputPartition[tasks.size()];
    for (int i = 0; i < out.length; i++) {
      JsonNode ranges = tasks.get(i);
      ReadRange[] parsed = new ReadRange[ranges.size()];
      for (int j = 0; j < parsed.length; j++) {
        parsed[j] = range(ranges.get(j));
      }
      out[i] = new ReadTask(parsed);
    }
    return out;
  }

  private static ReadRange range(JsonNode r) {
    JsonNode aborted = r.get("aborted");
    long[] producers = new long[aborted.size()];
    long[] firsts = new long[aborted.size()];
    for (int i = 0; i < producers.length; i++) {
      producers[i] = aborted.get(i).get(0).asLong();
      firsts[i] = aborted.get(i).get(1).asLong();
    }
    return new ReadRange(r.get("dir").asText(), r.get("topic").asText(),
        r.get("partition").asInt(), r.get("start").asLong(), r.get("end").asLong(),
        r.get("committed").asBoolean(), producers, firsts, r.get("chunk_bytes").asInt(),
        r.path("fail_on_data_loss").asBoolean(true));
  }

  private static Integer defaultParallelism() {
    scala.Option<SparkSession> session = SparkSession.getActiveSession();
    if (session.isEmpty()) {
      session = SparkSession.getDefaultSession();
    }
    return session.isEmpty() ? null : session.get().sparkContext().defaultParallelism();
  }

  private static JsonNode ask(
      String what, CaseInsensitiveStringMap options, Map<String, Object> more) {
    Function<String, String> planner = KafkaTierProvider.planner;
    if (planner == null) {
      throw new IllegalStateException(
          "kafkatier: no planner registered in this JVM; call register_data_source(spark)");
    }
    try {
      Map<String, Object> request = new HashMap<>(more);
      request.put("ask", what);
      request.put("cores", defaultParallelism());
      request.put("options", options.asCaseSensitiveMap());
      JsonNode answer = JSON.readTree(planner.apply(JSON.writeValueAsString(request)));
      if (answer.has("error")) {
        throw new ReadError(answer.get("error").asText(), answer.get("message").asText());
      }
      return answer;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
