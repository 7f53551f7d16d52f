package io.kafkatier.source;

import java.util.Set;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The Python source's table, its scans (batch and streaming) read in the JVM when the planner
 * says this reader can ({@link Planner#scope}); any other scan is the Python table's own.
 */
final class KafkaTierTable implements Table, SupportsRead {
  private final Table python;

  KafkaTierTable(Table python) {
    this.python = python;
  }

  @Override
  public String name() {
    return "kafkatier";
  }

  @Override
  @SuppressWarnings("deprecation")
  public StructType schema() {
    return python.schema();
  }

  @Override
  public Set<TableCapability> capabilities() {
    return python.capabilities();
  }

  @Override
  public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
    if (!Planner.scope(options)) {
      return ((SupportsRead) python).newScanBuilder(options);
    }
    return new JvmScanBuilder(schema(), options);
  }
}
