package io.kafkatier.source;

import java.sql.Timestamp;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.sources.And;
import org.apache.spark.sql.sources.EqualTo;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.sources.GreaterThan;
import org.apache.spark.sql.sources.GreaterThanOrEqual;
import org.apache.spark.sql.sources.In;
import org.apache.spark.sql.sources.LessThan;
import org.apache.spark.sql.sources.LessThanOrEqual;

/**
 * The filters on {@code topic}, {@code partition}, {@code offset} and {@code timestamp} that the
 * planner narrows a scan with (sink/source/pushdown.py), as {@code {"column", "op", "value"}}
 * maps: conjuncts only (an {@code And} is split, anything else is left to Spark). Spark applies
 * every filter again to the rows read, so the planner only has to keep every row that can match.
 * Timestamps become epoch milliseconds, rounded down.
 */
final class PushedFilters {
  private static final Set<String> COLUMNS = Set.of("topic", "partition", "offset", "timestamp");

  private PushedFilters() {}

  /** The filters of {@code filters} the planner can use, each a leaf. */
  static List<Filter> usable(Filter[] filters) {
    List<Filter> out = new ArrayList<>();
    for (Filter f : filters) {
      collect(f, out);
    }
    return out;
  }

  private static void collect(Filter f, List<Filter> out) {
    if (f instanceof And) {
      collect(((And) f).left(), out);
      collect(((And) f).right(), out);
    } else if (json(f) != null) {
      out.add(f);
    }
  }

  static List<Map<String, Object>> json(List<Filter> filters) {
    List<Map<String, Object>> out = new ArrayList<>();
    for (Filter f : filters) {
      out.add(json(f));
    }
    return out;
  }

  private static Map<String, Object> json(Filter f) {
    if (f instanceof EqualTo) {
      return leaf(((EqualTo) f).attribute(), "eq", ((EqualTo) f).value());
    } else if (f instanceof GreaterThan) {
      return leaf(((GreaterThan) f).attribute(), "gt", ((GreaterThan) f).value());
    } else if (f instanceof GreaterThanOrEqual) {
      return leaf(((GreaterThanOrEqual) f).attribute(), "ge", ((GreaterThanOrEqual) f).value());
    } else if (f instanceof LessThan) {
      return leaf(((LessThan) f).attribute(), "lt", ((LessThan) f).value());
    } else if (f instanceof LessThanOrEqual) {
      return leaf(((LessThanOrEqual) f).attribute(), "le", ((LessThanOrEqual) f).value());
    } else if (f instanceof In) {
      List<Object> values = new ArrayList<>();
      for (Object v : ((In) f).values()) {
        Object plain = plain(v);
        if (plain == null) {
          return null;
        }
        values.add(plain);
      }
      return leaf(((In) f).attribute(), "in", values);
    }
    return null;
  }

  private static Map<String, Object> leaf(String column, String op, Object value) {
    Object plain = value instanceof List ? value : plain(value);
    if (!COLUMNS.contains(column) || plain == null) {
      return null;
    }
    Map<String, Object> m = new HashMap<>();
    m.put("column", column);
    m.put("op", op);
    m.put("value", plain);
    return m;
  }

  /** A filter value as JSON: numbers and strings as they are, timestamps in epoch ms. */
  private static Object plain(Object v) {
    if (v instanceof Timestamp) {
      return ((Timestamp) v).getTime(); // both round down: their nanos count up from a second
    } else if (v instanceof Instant) {
      return ((Instant) v).toEpochMilli();
    } else if (v instanceof Number || v instanceof String) {
      return v;
    }
    return null;
  }
}
