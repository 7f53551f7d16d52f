"""Checks and rewrites a leader applies to incoming batches before they reach the log.

Kafka's ``LogValidator`` in-place path: every batch must be magic 2 with a valid CRC and, from a
client, hold ``lastOffsetDelta + 1`` records and no control records. The leader then assigns the
base offset and partition leader epoch in place (neither is covered by the CRC), stamps
``LogAppendTime`` topics (which does change the CRC), and recompresses a batch whose codec differs
from the topic's ``compression.type`` (unless that is ``producer``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kafkatier.storage import wire
from kafkatier.storage.errors import InvalidRecordError, RecordTooLargeError
from kafkatier.storage.native import native
from kafkatier.storage.producer.entry import AppendOrigin
from kafkatier.storage.record.batch import RecordBatch
from kafkatier.storage.record.builder import rebuild_batch
from kafkatier.storage.record.crc import crc32c
from kafkatier.storage.record.legacy import LegacyBatch
from kafkatier.storage.record.records import read_batch

_I64 = struct.Struct(">q")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")


@dataclass(frozen=True, slots=True)
class AppendRules:
    """The topic settings validation depends on (a subset of LogConfig, Kafka's names in docs)."""

    max_message_bytes: int = wire.DEFAULT_MAX_MESSAGE_BYTES
    log_append_time: bool = False  # message.timestamp.type=LogAppendTime
    compression: wire.Codec | None = None  # None = compression.type=producer
    compression_level: int | None = None


def parse_incoming(
    data: bytes | bytearray | memoryview, origin: AppendOrigin, *, file: str = "<append>"
) -> list[RecordBatch]:
    """Split ``data`` into v2 batches and check each as a leader does (CRC included); nothing
    partial allowed. ``file``: where the bytes came from, named in errors."""
    buf = memoryview(data).cast("B")
    batches: list[RecordBatch] = []
    end = 0
    while (batch := read_batch(buf, end, file=file)) is not None:
        if isinstance(batch, LegacyBatch):
            raise InvalidRecordError(
                "kafkatier appends only record batch v2 (magic 2)",
                file=file,
                position=batch.position,
            )
        batch.ensure_valid()
        _check_client_batch(batch, origin, file)
        batches.append(batch)
        end += batch.size_in_bytes
    if end != len(buf):
        raise InvalidRecordError("appended bytes end in a partial batch", file=file, position=end)
    return batches


ROW_LENGTH, ROW_RECORDS = 2, 13
"""Where :func:`checked_rows`' rows hold the batch length and the records count (after the
position, ``BATCH_HEADER``'s fields in order)."""


def checked_rows(data: memoryview) -> tuple[list[list[int]], int] | None:
    """The client batches from the start of ``data`` (a byte view) that the C library's check
    finds whole and valid, the same checks as :func:`parse_incoming`'s for a client's append,
    and where they end (any rest is for :func:`parse_incoming`, which names the fault); None
    without the library. A batch is a row, its position and ``BATCH_HEADER``'s fields
    (``RecordBatch.of_checked`` makes one a batch from them). One call for a whole buffer:
    checked one span at a time it cost more than the Python check (about 3 us a call around
    1.5 us of C, ad hoc)."""
    kernels = native()
    return None if kernels is None else kernels.check_batches(data)


def _check_client_batch(batch: RecordBatch, origin: AppendOrigin, file: str) -> None:
    if origin is not AppendOrigin.CLIENT:
        return
    count = batch.records_count
    if batch.is_control:
        message = "clients may not append control batches"
    elif count != batch.last_offset_delta + 1 or count <= 0:
        message = f"batch declares {count} records but lastOffsetDelta {batch.last_offset_delta}"
    elif batch.has_producer_id and batch.base_sequence < 0:
        message = "idempotent batch without a base sequence"
    else:
        return
    raise InvalidRecordError(message, file=file, position=batch.position)


def needs_rewrite(batch: RecordBatch, rules: AppendRules) -> bool:
    """Whether :func:`prepare_for_log` changes more than the offsets: a ``LogAppendTime`` topic,
    or a data batch in another codec than the topic's ``compression.type``."""
    return rules.log_append_time or (
        rules.compression is not None and not batch.is_control and batch.codec != rules.compression
    )


def check_unrewritten(batch: RecordBatch, rules: AppendRules) -> None:
    """:func:`prepare_for_log`'s checks of a batch that :func:`needs_rewrite` says is written as
    it came."""
    _check_size(batch.size_in_bytes, rules, batch.position)


def prepare_for_log(batch: RecordBatch, rules: AppendRules, now_ms: int) -> bytearray:
    """The batch's bytes as they will be written: recompressed / stamped where the topic says.

    Kafka checks ``max.message.bytes`` on the batch as received and again after recompression."""
    _check_size(batch.size_in_bytes, rules, batch.position)
    if rules.compression is not None and batch.codec != rules.compression and not batch.is_control:
        out = bytearray(_recompress(batch, rules))
    else:
        out = bytearray(batch.buffer)
    if rules.log_append_time:
        _stamp_log_append_time(out, now_ms)
    _check_size(len(out), rules, batch.position)
    return out


def _check_size(size: int, rules: AppendRules, position: int) -> None:
    if size > rules.max_message_bytes:
        raise RecordTooLargeError(
            f"batch of {size} bytes exceeds max.message.bytes={rules.max_message_bytes}",
            file="<append>",
            position=position,
        )


def _recompress(batch: RecordBatch, rules: AppendRules) -> bytes:
    assert rules.compression is not None
    return rebuild_batch(
        batch, list(batch.records()), codec=rules.compression, level=rules.compression_level
    )


def _stamp_log_append_time(buf: bytearray, now_ms: int) -> None:
    """Set the LogAppendTime bit and maxTimestamp, then recompute the CRC (Kafka's
    ``setMaxTimestamp``): the only leader rewrite the CRC covers."""
    attrs = _I16.unpack_from(buf, wire.ATTRIBUTES_OFFSET)[0] | wire.ATTR_LOG_APPEND_TIME
    _I16.pack_into(buf, wire.ATTRIBUTES_OFFSET, attrs)
    _I64.pack_into(buf, wire.MAX_TIMESTAMP_OFFSET, now_ms)
    crc = crc32c(memoryview(buf)[wire.CRC_START :])
    _U32.pack_into(buf, wire.CRC_OFFSET, crc)


def assign_offset(buf: bytearray | memoryview, base_offset: int, leader_epoch: int) -> None:
    """Write baseOffset and partitionLeaderEpoch in place (not covered by the CRC)."""
    _I64.pack_into(buf, 0, base_offset)
    _I32.pack_into(buf, wire.PLE_OFFSET, leader_epoch)

