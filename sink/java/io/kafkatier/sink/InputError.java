package io.kafkatier.sink;

/**
 * A micro-batch the sink cannot write (bad partition, unknown topic, record too large, ...),
 * found on an executor before anything reaches the log. The message starts with the name of
 * the Python error the driver raises for it ({@code [SinkSchemaError] column 'partition' ...}),
 * because only the message text survives the trip from executor to driver.
 */
public final class InputError extends RuntimeException {
  private static final long serialVersionUID = 1L;

  InputError(String pythonType, String message) {
    super("[" + pythonType + "] " + message);
  }

  static InputError schema(String message) {
    return new InputError("SinkSchemaError", message);
  }

  static InputError tooLarge(String message) {
    return new InputError("RecordTooLargeError", message);
  }

  static InputError invalid(String message) {
    return new InputError("InvalidRecordError", message);
  }
}
