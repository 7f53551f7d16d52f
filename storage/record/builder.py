"""Writing v2 batches byte-for-byte as Kafka's ``MemoryRecordsBuilder`` does (kafka-format.md §1,
§3).

The layout is :class:`~kafkatier.storage.record.records.RecordBatch`'s. Records carry absolute
offsets and timestamps; the builder turns them into deltas from the batch's baseOffset and
baseTimestamp (the first record's timestamp, or the delete horizon when one is given), fills the
header, compresses the record bytes as one stream and sets the CRC-32C over [21, end).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from kafkatier.storage.errors import CompressionError, InvalidRecordError
from kafkatier.storage.record.compression import compress
from kafkatier.storage.record.crc import crc32c
from kafkatier.storage.record.record import Record, encode_record
from kafkatier.storage.wire import (
    BATCH_HEADER,
    CONTROL_KEY,
    CRC_OFFSET,
    CRC_START,
    END_TXN_MARKER_VALUE,
    INT32_MAX,
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    Codec,
    ControlType,
    TimestampType,
    attributes,
)

if TYPE_CHECKING:
    from kafkatier.storage.record.batch import RecordBatch

_CRC = struct.Struct(">I")
_INT64_MAX = 2**63 - 1
_CODECS = frozenset(int(c) for c in Codec)


def _check_range(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise InvalidRecordError(f"{name} {value} outside [{low}, {high}]")


def _validate_producer(
    producer_id: int, producer_epoch: int, base_sequence: int, transactional: bool, control: bool
) -> None:
    """``MemoryRecordsBuilder.validateProducerState``, plus the int widths of the header."""
    _check_range("producer id", producer_id, -1, _INT64_MAX)
    _check_range("producer epoch", producer_epoch, -1, 2**15 - 1)
    _check_range("base sequence", base_sequence, -1, INT32_MAX)
    if transactional and producer_id == -1:
        raise InvalidRecordError("cannot write transactional records without a producer id")
    if producer_id != -1:
        if producer_epoch == -1:
            raise InvalidRecordError("invalid negative producer epoch with a producer id")
        if base_sequence < 0 and not control:
            raise InvalidRecordError("invalid negative sequence number with a producer id")


def _encode_body(
    records: Sequence[Record], base_offset: int, last_offset: int, base_timestamp: int
) -> tuple[bytearray, int]:
    """The concatenated records and their max timestamp (-1 when none has one)."""
    body = bytearray()
    max_ts = NO_TIMESTAMP
    previous = base_offset - 1
    for record in records:
        if not previous < record.offset <= last_offset:
            raise InvalidRecordError(
                f"record offset {record.offset} not in ({previous}, {last_offset}]: offsets must "
                "increase and lie within the batch"
            )
        if record.timestamp < 0 and record.timestamp != NO_TIMESTAMP:
            raise InvalidRecordError(f"invalid negative timestamp {record.timestamp}")
        encode_record(
            body,
            record.offset - base_offset,
            record.timestamp - base_timestamp,
            record.key,
            record.value,
            record.headers,
        )
        max_ts = max(max_ts, record.timestamp)
        previous = record.offset
    return body, max_ts


def _assemble(payload: bytes | bytearray, *fields: int) -> bytes:
    """Header (fields after the length/magic/CRC placeholders, in BATCH_HEADER order) + payload,
    with batchLength and CRC filled in."""
    base_offset, ple, attrs, lod, base_ts, max_ts, pid, epoch, seq, count = fields
    batch_length = BATCH_HEADER.size - LOG_OVERHEAD + len(payload)
    _check_range("batch length", batch_length, 0, INT32_MAX)
    header = bytearray(
        BATCH_HEADER.pack(
            base_offset,
            batch_length,
            ple,
            2,
            0,
            attrs,
            lod,
            base_ts,
            max_ts,
            pid,
            epoch,
            seq,
            count,
        )
    )
    crc = crc32c(payload, crc32c(memoryview(header)[CRC_START:]))
    _CRC.pack_into(header, CRC_OFFSET, crc)
    return bytes(header + payload)


def _offsets(
    records: Sequence[Record], base_offset: int | None, last_offset: int | None
) -> tuple[int, int]:
    base = records[0].offset if base_offset is None else base_offset
    last = records[-1].offset if last_offset is None else last_offset
    _check_range("base offset", base, 0, _INT64_MAX)
    _check_range("last offset delta", last - base, 0, INT32_MAX)
    return base, last


def _build(
    records: Sequence[Record],
    offsets: tuple[int | None, int | None],
    compression: tuple[Codec, int | None],
    timestamp_type: TimestampType,
    log_append_time: int | None,
    producer: tuple[int, int, int, bool, bool],
    partition_leader_epoch: int,
    delete_horizon_ms: int | None,
) -> bytes:
    """``producer`` is (id, epoch, base sequence, transactional, control)."""
    if not records:
        raise InvalidRecordError("a batch needs at least one record")
    pid, epoch, seq, transactional, control = producer
    _validate_producer(pid, epoch, seq, transactional, control)
    _check_range("partition leader epoch", partition_leader_epoch, -(2**31), INT32_MAX)
    base, last = _offsets(records, *offsets)
    horizon = delete_horizon_ms is not None and delete_horizon_ms >= 0
    base_ts = (
        records[0].timestamp if delete_horizon_ms is None or not horizon else delete_horizon_ms
    )
    body, max_ts = _encode_body(records, base, last, base_ts)
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        if log_append_time is None or log_append_time < 0:
            raise InvalidRecordError("LogAppendTime batches need a log_append_time >= 0")
        max_ts = log_append_time
    codec, level = compression
    payload = body if codec == Codec.NONE else compress(codec, body, level)
    attrs = attributes(codec, timestamp_type, transactional, control, horizon)
    ple, count = partition_leader_epoch, len(records)
    return _assemble(
        payload, base, ple, attrs, last - base, base_ts, max_ts, pid, epoch, seq, count
    )


def build_batch(
    records: Sequence[Record],
    *,
    base_offset: int | None = None,
    last_offset: int | None = None,
    codec: Codec = Codec.NONE,
    level: int | None = None,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    log_append_time: int | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    partition_leader_epoch: int = -1,
    delete_horizon_ms: int | None = None,
) -> bytes:
    """One data batch. ``base_offset``/``last_offset`` default to the first/last record's offset;
    the cleaner passes the original ones, so offsets may have gaps and the record count may be
    below lastOffsetDelta + 1. A ``delete_horizon_ms`` >= 0 sets attribute bit 6 and becomes
    baseTimestamp (record deltas are then relative to it); a negative one means none, as in
    Kafka. Record ``sequence`` fields are ignored: sequences follow from ``base_sequence``."""
    if codec not in _CODECS:
        raise CompressionError(f"unknown codec {codec!r}", codec=str(codec))
    producer = (producer_id, producer_epoch, base_sequence, transactional, False)
    return _build(records, (base_offset, last_offset), (Codec(codec), level),
                  TimestampType(timestamp_type), log_append_time, producer,
                  partition_leader_epoch, delete_horizon_ms)  # fmt: skip


def build_control_batch(
    control_type: ControlType,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int = 0,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = 0,
) -> bytes:
    """A transaction marker batch (``MemoryRecords.writeEndTransactionalMarker``): 78 bytes,
    transactional + control, baseSequence -1, one record with the 4-byte key and 6-byte value."""
    if control_type not in (ControlType.ABORT, ControlType.COMMIT):
        raise InvalidRecordError(
            f"only ABORT and COMMIT markers can be built, not {control_type!r}"
        )
    _check_range("coordinator epoch", coordinator_epoch, -(2**31), INT32_MAX)
    record = Record(
        offset=base_offset,
        timestamp=timestamp,
        key=CONTROL_KEY.pack(0, int(control_type)),
        value=END_TXN_MARKER_VALUE.pack(0, coordinator_epoch),
    )
    producer = (producer_id, producer_epoch, -1, True, True)
    return _build([record], (None, None), (Codec.NONE, None), TimestampType.CREATE_TIME, None,
                  producer, partition_leader_epoch, None)  # fmt: skip


def build_empty_batch(batch: RecordBatch) -> bytes:
    """``DefaultRecordBatch.writeEmptyHeader``: what the cleaner keeps of a batch whose records
    were all removed but whose producer state must survive (61 bytes, baseTimestamp -1, codec
    NONE, no horizon bit; offsets, producer fields, PLE, maxTimestamp and flags preserved)."""
    attrs = attributes(Codec.NONE, batch.timestamp_type, batch.is_transactional, batch.is_control)
    return _assemble(
        b"",
        batch.base_offset,
        batch.partition_leader_epoch,
        attrs,
        batch.last_offset_delta,
        NO_TIMESTAMP,
        batch.max_timestamp,
        batch.producer_id,
        batch.producer_epoch,
        batch.base_sequence,
        0,
    )


class _StoredBatch(Protocol):
    """The header fields a rebuild keeps (storage.records.RecordBatch has them)."""

    @property
    def base_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def max_timestamp(self) -> int: ...
    @property
    def producer_id(self) -> int: ...
    @property
    def producer_epoch(self) -> int: ...
    @property
    def base_sequence(self) -> int: ...
    @property
    def partition_leader_epoch(self) -> int: ...
    @property
    def codec(self) -> Codec: ...
    @property
    def timestamp_type(self) -> TimestampType: ...
    @property
    def is_transactional(self) -> bool: ...


def rebuild_batch(
    batch: _StoredBatch,
    records: Sequence[Record],
    *,
    codec: Codec | None = None,
    level: int | None = None,
    delete_horizon_ms: int | None = None,
) -> bytes:
    """``records`` as a data batch with ``batch``'s header kept: offsets (gaps allowed), timestamp
    type (a LogAppendTime batch keeps its append time), producer fields, transactional flag and
    leader epoch. The leader recompresses this way and the cleaner writes partial batches."""
    log_append = batch.timestamp_type is TimestampType.LOG_APPEND_TIME
    return build_batch(
        records,
        base_offset=batch.base_offset,
        last_offset=batch.last_offset,
        codec=batch.codec if codec is None else codec,
        level=level,
        timestamp_type=batch.timestamp_type,
        log_append_time=batch.max_timestamp if log_append else None,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        transactional=batch.is_transactional,
        partition_leader_epoch=batch.partition_leader_epoch,
        delete_horizon_ms=delete_horizon_ms,
    )
