package io.kafkatier.sink;

import java.util.zip.CRC32C;

/**
 * The open record batch of one Kafka partition in one task. Closed batches are transactional
 * record batches v2 (kafka-format.md section 1.2), laid out as a segment holds them:
 *
 * <pre>
 * baseOffset int64 (0: the driver's append assigns offsets) | batchLength int32 |
 * partitionLeaderEpoch int32 (-1) | magic int8 (2) | crc uint32 (CRC-32C of attributes..end) |
 * attributes int16 (codec, transactional bit) | lastOffsetDelta int32 | baseTimestamp int64 |
 * maxTimestamp int64 | producerId int64 | producerEpoch int16 |
 * baseSequence int32 (0, provisional: the driver sets it) | recordsCount int32 | records
 * </pre>
 */
final class BatchBuilder {
  static final int HEADER = 61;
  private static final int CRC_OFFSET = 17;
  private static final int CRC_START = 21;
  private static final int TRANSACTIONAL = 0x10;

  final String topic;
  final int partition;
  final int limit; // header + uncompressed records may not exceed it
  // starts at the driver's estimate of the batch's share (TaskEncoder.TopicState.room), then
  // doubles: a fixed large start would zero 64 KiB a partition for a few records each
  final Bytes records;
  int count;
  int buffered; // bytes of this batch's records still in the task's SortBuffer
  int slot; // its place in the task's builders (SortBuffer's index)
  private long baseTimestamp;
  private long maxTimestamp;

  /** room: what the records' buffer starts with (the driver's estimate of a batch's share). */
  BatchBuilder(String topic, int partition, int limit, int room, int slot) {
    this.topic = topic;
    this.partition = partition;
    this.limit = limit;
    this.records = new Bytes(room);
    this.slot = slot;
  }

  /** The records' bytes, those still buffered included. */
  int size() {
    return records.size + buffered;
  }

  /**
   * Appends the record, into sorting if not null (the batch's bytes then wait there until the
   * buffer moves them); false (nothing written) when it does not fit beside the others.
   */
  boolean tryAdd(Record r, SortBuffer sorting) {
    long delta = count == 0 ? 0 : r.timestamp - baseTimestamp;
    int body = r.bodySize(count, delta);
    int size = Bytes.sizeOfVarint(body) + body;
    if ((long) HEADER + size() + size > limit) {
      if (count == 0) {
        throw InputError.tooLarge(
            "record needs about " + (HEADER + size) + " bytes, more than a batch may take ("
                + limit + ", set by the topic's max.message.bytes and segment.bytes); fix: raise"
                + " them or shrink the record");
      }
      return false;
    }
    if (count == 0) {
      baseTimestamp = r.timestamp;
      maxTimestamp = r.timestamp;
    } else if (r.timestamp > maxTimestamp) {
      maxTimestamp = r.timestamp;
    }
    if (sorting == null) {
      r.writeTo(records, body, count, delta);
    } else {
      sorting.add(this, r, body, size, delta);
    }
    count++;
    return true;
  }

  /**
   * Writes the batch (header, records compressed as asked, CRC) to out and empties this; none
   * of its records may still be buffered.
   */
  void closeInto(Bytes out, EncodePlan plan, Compression codec, int maxBatchBytes) {
    int start = out.size;
    out.putLong(0L);
    out.putInt(0); // batchLength, set below
    out.putInt(-1);
    out.putByte(2);
    out.putInt(0); // crc, set below
    out.putShort(plan.codecId | TRANSACTIONAL);
    out.putInt(count - 1);
    out.putLong(baseTimestamp);
    out.putLong(maxTimestamp);
    out.putLong(plan.producerId);
    out.putShort(plan.producerEpoch);
    out.putInt(0);
    out.putInt(count);
    codec.compress(records.data, 0, records.size, out);
    int size = out.size - start;
    if (codec.compressed() && size > maxBatchBytes) {
      throw InputError.tooLarge("compressed batch of " + size + " bytes exceeds "
          + maxBatchBytes + " (max.message.bytes of topic " + topic + ")");
    }
    out.setInt(start + 8, size - 12);
    CRC32C crc = new CRC32C();
    crc.update(out.data, start + CRC_START, size - CRC_START);
    out.setInt(start + CRC_OFFSET, (int) crc.getValue());
    records.reset();
    count = 0;
  }
}
