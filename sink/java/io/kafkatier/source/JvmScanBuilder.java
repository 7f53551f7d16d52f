package io.kafkatier.source;

import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/** A scan of the columns the query uses: a {@code count()} decodes no record at all. */
final class JvmScanBuilder implements ScanBuilder, SupportsPushDownRequiredColumns {
  private final CaseInsensitiveStringMap options;
  private final ScanBuilder python;
  private StructType columns;

  JvmScanBuilder(StructType schema, CaseInsensitiveStringMap options, ScanBuilder python) {
    this.columns = schema;
    this.options = options;
    this.python = python;
  }

  @Override
  public void pruneColumns(StructType required) {
    columns = required;
  }

  @Override
  public Scan build() {
    return new JvmScan(columns, options, python);
  }
}
