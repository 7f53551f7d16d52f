package io.kafkatier.source;

import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.util.LinkedHashSet;
import java.util.Set;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * A streaming query's micro-batches read by this reader: the Python source's stream keeps
 * everything about offsets (initial, latest, read limits, Trigger.AvailableNow, commits), and
 * only the reading of a micro-batch's offsets is this reader's: the driver's planner plans them
 * ({@link Planner#microBatch}) and {@link ColumnarReader}s read them. The stream is a proxy with
 * every interface of the Python one (which differ with the features the source has), so Spark
 * sees the same capabilities; it is equal only to itself, as Spark keys its state by stream.
 */
final class JvmStream implements InvocationHandler {
  private final MicroBatchStream python;
  private final CaseInsensitiveStringMap options;
  private final StructType columns;

  private JvmStream(MicroBatchStream python, CaseInsensitiveStringMap options, StructType columns) {
    this.python = python;
    this.options = options;
    this.columns = columns;
  }

  static MicroBatchStream wrap(
      MicroBatchStream python, CaseInsensitiveStringMap options, StructType columns) {
    Set<Class<?>> interfaces = new LinkedHashSet<>();
    for (Class<?> c = python.getClass(); c != null; c = c.getSuperclass()) {
      for (Class<?> i : c.getInterfaces()) {
        if (i.getName().startsWith("org.apache.spark.sql.connector.")) {
          interfaces.add(i);
        }
      }
    }
    return (MicroBatchStream) Proxy.newProxyInstance(JvmStream.class.getClassLoader(),
        interfaces.toArray(new Class<?>[0]), new JvmStream(python, options, columns));
  }

  @Override
  public Object invoke(Object proxy, Method method, Object[] args) throws Throwable {
    switch (method.getName()) {
      case "planInputPartitions":
        if (args != null && args.length == 2) {
          return Planner.microBatch(
              options, ((Offset) args[0]).json(), ((Offset) args[1]).json());
        }
        break;
      case "createReaderFactory":
        return new ColumnarReaderFactory(columns);
      case "equals":
        return proxy == args[0];
      case "hashCode":
        return System.identityHashCode(proxy);
      case "toString":
        return "kafkatier stream (JVM reader)";
      default:
        break;
    }
    try {
      return method.invoke(python, args);
    } catch (InvocationTargetException e) {
      throw e.getCause();
    }
  }
}
