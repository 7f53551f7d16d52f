package io.kafkatier.source;

import java.lang.reflect.Field;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.spark.sql.connector.metric.CustomMetric;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.types.TimestampType;

/**
 * The bytes a reader holds: its read and decompression buffers and the arrays of its column
 * vectors (from their capacities: a null byte and the element's width per row, the bytes of
 * binary values). Shown as the scan's SQL metric "peak task memory" (the largest task's), and
 * kept per JVM for benchmarks ({@link #peak}), which compare it with {@code readChunkBytes}.
 */
public final class TaskMemory implements CustomMetric {
  public TaskMemory() {}

  static final String NAME = "peakTaskMemory";
  private static final AtomicLong PEAK = new AtomicLong();
  private static final Field CAPACITY = capacityField();

  /** The most any reader of this JVM has held since {@link #reset}. */
  public static long peak() {
    return PEAK.get();
  }

  public static void reset() {
    PEAK.set(0);
  }

  static long measure(long buffers, WritableColumnVector[] vectors) {
    long bytes = buffers;
    for (WritableColumnVector v : vectors) {
      bytes += bytesOf(v);
    }
    PEAK.accumulateAndGet(bytes, Math::max);
    return bytes;
  }

  private static long bytesOf(WritableColumnVector v) {
    long rows = capacity(v);
    DataType type = v.dataType();
    long bytes = rows; // nulls
    if (type instanceof ByteType) {
      bytes += rows;
    } else if (type instanceof IntegerType) {
      bytes += 4 * rows;
    } else if (type instanceof LongType || type instanceof TimestampType) {
      bytes += 8 * rows;
    } else if (type instanceof BinaryType || type instanceof StringType
        || type instanceof ArrayType) {
      bytes += 8 * rows + bytesOf(v.arrayData()); // offsets and lengths, then the elements
    } else if (type instanceof StructType) {
      for (int i = 0; i < ((StructType) type).size(); i++) {
        bytes += bytesOf((WritableColumnVector) v.getChild(i));
      }
    }
    return bytes;
  }

  private static long capacity(WritableColumnVector v) {
    try {
      return CAPACITY.getInt(v);
    } catch (IllegalAccessException e) {
      return 0;
    }
  }

  private static Field capacityField() {
    try {
      Field f = WritableColumnVector.class.getDeclaredField("capacity");
      f.setAccessible(true);
      return f;
    } catch (NoSuchFieldException e) {
      throw new IllegalStateException(e);
    }
  }

  @Override
  public String name() {
    return NAME;
  }

  @Override
  public String description() {
    return "peak task memory (read buffer and column vectors)";
  }

  @Override
  public String aggregateTaskMetrics(long[] taskMetrics) {
    long max = 0;
    for (long m : taskMetrics) {
      max = Math.max(max, m);
    }
    return String.format("%.1f MiB", max / 1048576.0);
  }

  /** A task's value of the metric. */
  static CustomTaskMetric value(long bytes) {
    return new CustomTaskMetric() {
      @Override
      public String name() {
        return NAME;
      }

      @Override
      public long value() {
        return bytes;
      }
    };
  }
}
