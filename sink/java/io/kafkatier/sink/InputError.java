package io.kafkatier.sink;

/**
 * Errors for a micro-batch the sink cannot write (bad partition, unknown topic, record too
 * large, ...), found on an executor before anything reaches the log. They are plain
 * IllegalArgumentExceptions whose message starts with {@link #MARK} and the name of the Python
 * error the driver raises for it ({@code kafkatier input error [SinkSchemaError] column ...}):
 * the driver's class loader does not know this jar's classes, so an exception class of our own
 * would reach it as "UnknownReason"; a JDK class with its message arrives intact.
 */
final class InputError {
  static final String MARK = "kafkatier input error ";

  private InputError() {}

  private static IllegalArgumentException of(String pythonType, String message) {
    return new IllegalArgumentException(MARK + "[" + pythonType + "] " + message);
  }

  static IllegalArgumentException schema(String message) {
    return of("SinkSchemaError", message);
  }

  static IllegalArgumentException tooLarge(String message) {
    return of("RecordTooLargeError", message);
  }

  static IllegalArgumentException invalid(String message) {
    return of("InvalidRecordError", message);
  }

  /** A staging write the filesystem refused (no space, permissions): one line naming the file. */
  static IllegalArgumentException write(java.io.IOException cause) {
    return of("LogWriteError", "cannot write " + cause.getMessage());
  }

  /** The same for a write or sync of {@code path} whose error names no file (ENOSPC, EIO). */
  static IllegalArgumentException write(String path, java.io.IOException cause) {
    return of("LogWriteError", "cannot write " + path + ": " + cause.getMessage());
  }
}
