package io.kafkatier.source;

/**
 * A read failing on bad input or options, as one line naming the kafkatier error class (the
 * Python reader's) and where: {@code kafkatier read error [CorruptRecordError] record batch
 * CRC-32C mismatch (file=/logs/t-0/00000000000000000000.log, position=4096)}.
 */
final class ReadError extends RuntimeException {
  private static final long serialVersionUID = 1L;

  ReadError(String kind, String message) {
    super("kafkatier read error [" + kind + "] " + message, null, false, false);
  }

  static ReadError at(String kind, String message, String file, long position) {
    return new ReadError(kind, message + " (file=" + file + ", position=" + position + ")");
  }
}
