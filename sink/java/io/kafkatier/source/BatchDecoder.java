package io.kafkatier.source;

import static io.kafkatier.source.BatchHeader.*;

import java.io.IOException;
import java.util.zip.CRC32C;

/**
 * Kafka record batches (magic 2, kafka-format.md section 2) decoded into {@link RecordColumns}:
 * the batches of one chunk, whole, CRC-checked when in range, control batches and aborted data
 * dropped, records outside [start, end) skipped ({@link BatchHeader}: the layout). A record:
 * varint length, int8 attributes, varlong timestampDelta, varint offsetDelta, key and value
 * (varint length, -1 null), varint header count, headers (key, value alike).
 */
final class BatchDecoder {
    private final Decompression inflater = new Decompression();
  private final CRC32C crc = new CRC32C();
  private byte[] src;
  private int pos;

  /** The bytes of the decompression buffer. */
  long bufferBytes() {
    return inflater.buffer().length;
  }

  /**
   * Decodes the batches of {@code buf[from, size)}, read from {@code file} at {@code at}, until
   * {@code out} holds {@code maxRows} rows or more at the end of a batch; where it stopped.
   */
  int decode(byte[] buf, int size, int from, String file, long at, ReadRange range,
      AbortedFilter filter, RecordColumns out, int maxRows) {
    int p = from;
    while (p < size && out.rows < maxRows) {
      int end = p + LOG_OVERHEAD + (p + LOG_OVERHEAD <= size ? i32(buf, p + LENGTH) : 0);
      if (p + SIZE > size || end > size || end < p + SIZE) {
        throw ReadError.at("CorruptRecordError", "truncated record batch", file, at + p);
      }
      if (buf[p + MAGIC] != 2) {
        throw ReadError.at("InvalidRecordError", "legacy message format (magic " + buf[p + MAGIC]
            + ") is read by the Python reader: register_data_source(spark, reader='python')",
            file, at + p);
      }
      long base = i64(buf, p);
      long last = base + i32(buf, p + LAST_OFFSET_DELTA);
      if (last >= range.start && base < range.end) {
        batch(buf, p, end, file, at, range, filter, out);
      }
      p = end;
    }
    return p;
  }

  private void batch(byte[] buf, int p, int end, String file, long at, ReadRange range,
      AbortedFilter filter, RecordColumns out) {
    crc.reset();
    crc.update(buf, p + ATTRIBUTES, end - p - ATTRIBUTES);
    if ((int) crc.getValue() != i32(buf, p + CRC)) {
      throw ReadError.at("CorruptRecordError", "record batch CRC-32C mismatch", file, at + p);
    }
    int attributes = i16(buf, p + ATTRIBUTES);
    int codec = attributes & CODEC;
    if (codec > Decompression.MAX_CODEC) {
      throw ReadError.at("CompressionError", "unknown compression codec id " + codec, file,
          at + p);
    }
    boolean transactional = (attributes & TRANSACTIONAL) != 0;
    long base = i64(buf, p);
    long last = base + i32(buf, p + LAST_OFFSET_DELTA);
    long producerId = i64(buf, p + PRODUCER_ID);
    int count = i32(buf, p + RECORDS);
    if ((attributes & CONTROL) != 0) {
      if (filter != null && transactional) {
        filter.marker(last, producerId, count > 0 && isAbort(buf, p, end, codec, file, at));
      }
      return;
    }
    if (filter != null && !filter.keep(last, transactional, producerId)) {
      return;
    }
    int timestampType = (attributes & LOG_APPEND_TIME) != 0 ? 1 : 0;
    out.ensure(Math.max(count, 0));
    if (!out.needsRecords() && base >= range.start && last < range.end) {
      out.endRows(count, timestampType); // every record is in range: nothing to parse
      return;
    }
    payload(buf, p, end, codec, file, at);
    long baseTime = i64(buf, p + BASE_TIMESTAMP);
    long maxTime = timestampType == 1 ? i64(buf, p + MAX_TIMESTAMP) : -1;
    try {
      for (int i = 0; i < count; i++) {
        record(base, baseTime, maxTime, timestampType, range, out);
      }
    } catch (IndexOutOfBoundsException e) {
      throw ReadError.at("CorruptRecordError", "records overrun their batch", file, at + p);
    }
  }

  /** Points {@link #src}/{@link #pos} at the batch's records, inflated if compressed. */
  private void payload(byte[] buf, int p, int end, int codec, String file, long at) {
    if (codec == 0) {
      src = buf;
      pos = p + SIZE;
      return;
    }
    try {
      inflater.inflate(codec, buf, p + SIZE, end - p - SIZE);
    } catch (IOException | RuntimeException e) {
      throw ReadError.at("CompressionError", "cannot decompress the records (codec " + codec
          + "): " + e.getMessage(), file, at + p);
    }
    src = inflater.buffer();
    pos = 0;
  }

  private void record(long base, long baseTime, long maxTime, int timestampType,
      ReadRange range, RecordColumns out) {
    int length = (int) varlong();
    int next = pos + length;
    pos++; // attributes
    long time = baseTime + varlong();
    long offset = base + varlong();
    if (offset >= range.start && offset < range.end) {
      int keyLength = (int) varlong();
      out.bytes(RecordColumns.KEY, src, pos, keyLength);
      pos += Math.max(keyLength, 0);
      int valueLength = (int) varlong();
      out.bytes(RecordColumns.VALUE, src, pos, valueLength);
      pos += Math.max(valueLength, 0);
      if (out.has(RecordColumns.HEADERS)) {
        headers(out);
      }
      out.offsetAndTime(offset, timestampType == 1 ? maxTime : time);
      out.endRows(1, timestampType);
    }
    pos = next;
  }

  private void headers(RecordColumns out) {
    int count = (int) varlong();
    out.startHeaders(count);
    for (int i = 0; i < count; i++) {
      int keyLength = (int) varlong();
      if (keyLength < 0) {
        throw new IndexOutOfBoundsException("a null header key");
      }
      int key = pos;
      pos += keyLength;
      int valueLength = (int) varlong();
      out.header(src, key, keyLength, pos, valueLength);
      pos += Math.max(valueLength, 0);
    }
  }

  /** Whether a control batch is an ABORT marker: its record's key is (version, type 0). */
  private boolean isAbort(byte[] buf, int p, int end, int codec, String file, long at) {
    payload(buf, p, end, codec, file, at);
    varlong();
    pos++;
    varlong();
    varlong();
    long keyLength = varlong();
    return keyLength >= 4 && i16(src, pos + 2) == 0;
  }

  /** A zigzag varint or varlong at {@link #pos}. */
  private long varlong() {
    long raw = 0;
    for (int shift = 0; ; shift += 7) {
      byte b = src[pos++];
      raw |= (long) (b & 0x7f) << shift;
      if (b >= 0) {
        return (raw >>> 1) ^ -(raw & 1);
      }
    }
  }
}
