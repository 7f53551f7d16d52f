package io.kafkatier.source;

import java.nio.ByteBuffer;

/**
 * The v2 record batch header (kafka-format.md section 2), big-endian, written once here:
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
 * 61        records
 * </pre>
 */
final class BatchHeader {
  static final int BASE_OFFSET = 0;
  static final int LENGTH = 8;
  static final int LOG_OVERHEAD = 12; // base offset and length: a batch is this plus its length
  static final int MAGIC = 16;
  static final int CRC = 17;
  static final int ATTRIBUTES = 21;
  static final int LAST_OFFSET_DELTA = 23;
  static final int BASE_TIMESTAMP = 27;
  static final int MAX_TIMESTAMP = 35;
  static final int PRODUCER_ID = 43;
  static final int RECORDS = 57;
  static final int SIZE = 61;
  static final int CODEC = 0x07;
  static final int LOG_APPEND_TIME = 0x08;
  static final int TRANSACTIONAL = 0x10;
  static final int CONTROL = 0x20;

  private BatchHeader() {}

  /** The bytes of the whole batch whose header is in {@code h}. */
  static int size(ByteBuffer h) {
    return LOG_OVERHEAD + h.getInt(LENGTH);
  }

  static long lastOffset(ByteBuffer h) {
    return h.getLong(BASE_OFFSET) + h.getInt(LAST_OFFSET_DELTA);
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
