package io.kafkatier.source;

import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownFilters;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * A scan of the columns the query uses (a {@code count()} decodes no record at all), narrowed by
 * its filters on topic, partition, offset and timestamp ({@link PushedFilters}), which Spark
 * still applies to the rows read.
 */
final class JvmScanBuilder
    implements ScanBuilder, SupportsPushDownRequiredColumns, SupportsPushDownFilters {
  private final CaseInsensitiveStringMap options;
  private StructType columns;
  private Filter[] pushed = new Filter[0];

  JvmScanBuilder(StructType schema, CaseInsensitiveStringMap options) {
    this.columns = schema;
    this.options = options;
  }

  @Override
  public void pruneColumns(StructType required) {
    columns = required;
  }

  @Override
  public Filter[] pushFilters(Filter[] filters) {
    pushed = PushedFilters.usable(filters).toArray(new Filter[0]);
    return filters;
  }

  @Override
  public Filter[] pushedFilters() {
    return pushed;
  }

  @Override
  public Scan build() {
    return new JvmScan(columns, options, pushed);
  }
}
