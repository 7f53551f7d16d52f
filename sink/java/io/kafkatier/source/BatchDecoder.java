package io.kafkatier.source;

import java.io.IOException;
import java.util.zip.CRC32C;

/**
 * Kafka record batches (magic 2, kafka-format.md section 2) decoded into {@link RecordColumns}:
 * the batches of one span, whole, CRC-checked when in range, control batches and aborted data
 * dropped, records outside [start, end) skipped. The batch header:
 *
 * <pre>
 *  0 int64  baseOffset
 *  8 int32  batchLength            bytes after this field
 * 12 int32  partitionLeaderEpoch
 * 16 int8   magic                  2
 * 17 uint32 crc                    CRC-32C of bytes 21 to the end
 * 21 int16  attributes             0-2 codec, 3 LogAppendTime, 4 transactional, 5 control
 * 23 int32  lastOffsetDelta
 * 27 int64  baseTimestamp          or the delete horizon (bit 6); deltas are relative to it
 * 35 int64  maxTimestamp           every record's timestamp under LogAppendTime
 * 43 int64  producerId
 * 51 int16  producerEpoch
 * 53 int32  baseSequence
 * 57 int32  recordsCount
 * 61        records                varint length, int8 attributes, varlong timestampDelta,
 *                                  varint offsetDelta, key, value (varint length, -1 null),
 *                                  varint header count, headers
 * </pre>
 */
final class BatchDecoder {
  static final int HEADER = 61;
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
      int end = p + 12 + (p + 12 <= size ? i32(buf, p + 8) : 0);
      if (p + HEADER > size || end > size || end < p + HEADER) {
        throw ReadError.at("CorruptRecordError", "truncated record batch", file, at + p);
      }
      if (buf[p + 16] != 2) {
        throw ReadError.at("InvalidRecordError", "legacy message format (magic " + buf[p + 16]
            + ") is read by the Python reader: register_data_source(spark, reader='python')",
            file, at + p);
      }
      long base = i64(buf, p);
      long last = base + i32(buf, p + 23);
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
    crc.update(buf, p + 21, end - p - 21);
    if ((int) crc.getValue() != i32(buf, p + 17)) {
      throw ReadError.at("CorruptRecordError", "record batch CRC-32C mismatch", file, at + p);
    }
    int attributes = i16(buf, p + 21);
    int codec = attributes & 7;
    if (codec > Decompression.MAX_CODEC) {
      throw ReadError.at("CompressionError", "unknown compression codec id " + codec, file,
          at + p);
    }
    boolean transactional = (attributes & 0x10) != 0;
    long base = i64(buf, p);
    long last = base + i32(buf, p + 23);
    long producerId = i64(buf, p + 43);
    int count = i32(buf, p + 57);
    if ((attributes & 0x20) != 0) {
      if (filter != null && transactional) {
        filter.marker(last, producerId, count > 0 && isAbort(buf, p, end, codec, file, at));
      }
      return;
    }
    if (filter != null && !filter.keep(last, transactional, producerId)) {
      return;
    }
    int timestampType = (attributes & 0x08) != 0 ? 1 : 0;
    out.ensure(Math.max(count, 0));
    if (!out.needsRecords() && base >= range.start && last < range.end) {
      out.endRows(count, timestampType); // every record is in range: nothing to parse
      return;
    }
    payload(buf, p, end, codec, file, at);
    long baseTime = i64(buf, p + 27);
    long maxTime = timestampType == 1 ? i64(buf, p + 35) : -1;
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
      pos = p + HEADER;
      return;
    }
    try {
      inflater.inflate(codec, buf, p + HEADER, end - p - HEADER);
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

  static int i16(byte[] b, int p) {
    return (short) (((b[p] & 0xff) << 8) | (b[p + 1] & 0xff));
  }

  static int i32(byte[] b, int p) {
    return ((b[p] & 0xff) << 24) | ((b[p + 1] & 0xff) << 16) | ((b[p + 2] & 0xff) << 8)
        | (b[p + 3] & 0xff);
  }

  static long i64(byte[] b, int p) {
    return ((long) i32(b, p) << 32) | (i32(b, p + 4) & 0xffffffffL);
  }
}
