package io.kafkatier.source;

import java.util.Map;
import java.util.function.Function;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The {@code kafkatier} data source with its batch scans decoded inside Spark's JVM (see
 * sink/source/jvm.py, which puts this jar on the driver's class path and registers the Python
 * source under {@link #PYTHON_NAME}). Why: a Python data source hands its rows to Spark as Arrow
 * batches, and that hand-off alone costs more than Spark's whole Parquet scan
 * (bench/read_handoff.py), so no Python decoder can read at Parquet speed.
 *
 * <p>The Python source stays the one definition of the schema and of everything this reader does
 * not do itself: streaming reads and the scans the driver's planner sends back to it (remote
 * segments, legacy message sets; see {@link KafkaTierTable}). The planner is the driver's Python (a py4j
 * callback, {@link #planner}): it resolves the options and offsets exactly as the Python source,
 * and hands this reader the byte ranges of segment files to decode.
 */
public final class KafkaTierProvider implements TableProvider, DataSourceRegister {
  /** The name the Python source is registered under when this one takes {@code kafkatier}. */
  public static final String PYTHON_NAME = "kafkatier_python";

  /** The driver's planner: a request (JSON) in, its answer (JSON) out; see {@link Planner}. */
  public static volatile Function<String, String> planner;

  private final PythonDataSourceV2 python = new PythonDataSourceV2();

  public KafkaTierProvider() {
    python.setShortName(PYTHON_NAME);
  }

  @Override
  public String shortName() {
    return "kafkatier";
  }

  /** The schema this provider last inferred: Spark's usual {@code getTable} argument. */
  private volatile StructType inferred;

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    inferred = python.inferSchema(options);
    return inferred;
  }

  /**
   * The table, for the source's fixed schema only: a schema given with {@code .schema(...)} is
   * checked here, as the Python reader checks it (this reader's local scans never ask it), so
   * that a {@code value string} is refused, not read as text from the value's bytes, and a
   * {@code partition long} not a NullPointerException in a task.
   */
  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> props) {
    if (schema != inferred) {
      StructType fixed = python.inferSchema(new CaseInsensitiveStringMap(props));
      if (!fixed.equals(schema)) {
        throw new IllegalArgumentException(
            "the kafkatier source has a fixed schema (Spark's Kafka source schema; headers with"
                + " includeHeaders=true): expected "
                + fixed.simpleString()
                + ", got "
                + schema.simpleString());
      }
    }
    return new KafkaTierTable(python.getTable(schema, partitioning, props));
  }

  @Override
  public boolean supportsExternalMetadata() {
    return python.supportsExternalMetadata();
  }
}
