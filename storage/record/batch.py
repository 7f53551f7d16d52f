"""Record batch v2 viewed in place, without copying (kafka-format.md §1).

Reading batches from a log buffer (and rewriting their offset and epoch in place) is
:mod:`kafkatier.storage.record.records`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypeVar

from kafkatier.storage.errors import CorruptRecordError, InvalidRecordError, KafkaTierError
from kafkatier.storage.record.compression import decompress
from kafkatier.storage.record.crc import crc32c
from kafkatier.storage.record.record import (
    Record,
    codec_of,
    decode_records,
    parse_control_key,
    parse_end_txn_marker,
)
from kafkatier.storage.wire import (
    ATTR_CONTROL,
    ATTR_DELETE_HORIZON,
    ATTR_LOG_APPEND_TIME,
    ATTR_TRANSACTIONAL,
    BATCH_HEADER,
    BATCH_HEADER_SIZE,
    CRC_START,
    LOG_OVERHEAD,
    NO_SEQUENCE,
    Codec,
    ControlType,
    TimestampType,
    increment_sequence,
)

Buffer = bytes | bytearray | memoryview
_E = TypeVar("_E", bound=KafkaTierError)
_HEADER_FIELDS = (
    "base_offset", "batch_length", "partition_leader_epoch", "magic", "crc", "attributes",
    "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id", "producer_epoch",
    "base_sequence", "records_count",
)  # fmt: skip
"""BATCH_HEADER's fields in order, as RecordBatch attribute names."""


def located(exc: _E, file: str | None, position: int) -> _E:
    """``exc`` again, naming the batch's file and position (an inner position becomes ``at``)."""
    context: dict[str, Any] = {
        k: v for k, v in exc.context.items() if k not in ("file", "position")
    }
    if "position" in exc.context:
        context["at"] = exc.context["position"]
    located_exc: _E = type(exc)(exc.message, file=file, position=position, **context)
    return located_exc


class RecordBatch:
    """A v2 batch viewed in place: the 61-byte header of :mod:`kafkatier.storage.wire`
    (``BATCH_HEADER``) then the records, compressed as one stream when the codec is not NONE.
    The CRC-32C covers bytes [21, end); baseOffset and partitionLeaderEpoch can be rewritten in
    place without touching it. Header fields are plain attributes, unpacked once."""

    __slots__ = (*_HEADER_FIELDS, "_view", "file", "position", "size_in_bytes")
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int
    size_in_bytes: int
    """The whole batch: LOG_OVERHEAD (offset and length) + batch_length."""

    def __init__(self, buffer: Buffer, position: int = 0, *, file: str | None = None) -> None:
        view = memoryview(buffer).cast("B")
        self.position, self.file = position, file
        available = len(view) - position
        if available < BATCH_HEADER_SIZE:
            raise CorruptRecordError(
                "record batch shorter than its header", file=file, position=position
            )
        (
            self.base_offset,
            self.batch_length,
            self.partition_leader_epoch,
            self.magic,
            self.crc,
            self.attributes,
            self.last_offset_delta,
            self.base_timestamp,
            self.max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self.records_count,
        ) = BATCH_HEADER.unpack_from(view, position)
        self.size_in_bytes = size = LOG_OVERHEAD + self.batch_length
        if self.magic != 2:
            raise CorruptRecordError(
                f"magic {self.magic} is not a v2 batch", file=file, position=position
            )
        if size < BATCH_HEADER_SIZE:
            raise CorruptRecordError(
                f"batch size {size} is smaller than the minimum 61", file=file, position=position
            )
        if size > available:
            raise CorruptRecordError(
                f"batch of {size} bytes extends past the buffer end", file=file, position=position
            )
        self._view = view[position : position + size]

    @classmethod
    def of_checked(cls, view: memoryview, fields: list[int], file: str | None) -> RecordBatch:
        """The batch at ``fields[0]`` of ``view`` (a byte view), its header already read and
        checked (``fields``: the position, then BATCH_HEADER's fields, as the C check of
        ``validator.checked_rows`` gives them): the same object as
        ``RecordBatch(view, position)`` without unpacking and checking the header again."""
        batch = cls.__new__(cls)
        (
            position,
            batch.base_offset,
            batch.batch_length,
            batch.partition_leader_epoch,
            batch.magic,
            batch.crc,
            batch.attributes,
            batch.last_offset_delta,
            batch.base_timestamp,
            batch.max_timestamp,
            batch.producer_id,
            batch.producer_epoch,
            batch.base_sequence,
            batch.records_count,
        ) = fields
        batch.position, batch.file = position, file
        batch.size_in_bytes = size = LOG_OVERHEAD + batch.batch_length
        batch._view = view[position : position + size]
        return batch

    def __repr__(self) -> str:
        return (
            f"RecordBatch(base_offset={self.base_offset}, last_offset={self.last_offset}, "
            f"count={self.records_count}, size={self.size_in_bytes}, position={self.position})"
        )

    @property
    def buffer(self) -> memoryview:
        return self._view

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def codec(self) -> Codec:
        return codec_of(self.attributes, self.file, self.position)

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType(1 if self.attributes & ATTR_LOG_APPEND_TIME else 0)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > -1

    @property
    def delete_horizon_ms(self) -> int | None:
        return self.base_timestamp if self.attributes & ATTR_DELETE_HORIZON else None

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return self.base_sequence
        last: int = increment_sequence(self.base_sequence, self.last_offset_delta)
        return last

    def compute_crc(self) -> int:
        return int(crc32c(self._view[CRC_START:]))

    def is_valid(self) -> bool:
        return self.size_in_bytes >= BATCH_HEADER_SIZE and self.crc == self.compute_crc()

    def ensure_valid(self) -> None:
        computed = self.compute_crc()
        if computed != self.crc:
            raise CorruptRecordError(
                f"record batch is corrupt (stored crc = {self.crc}, computed crc = {computed})",
                file=self.file,
                position=self.position,
            )

    def records(self) -> Iterator[Record]:
        """Decoded records; raises InvalidRecordError/CompressionError with file and position."""
        try:
            payload: Buffer = self._view[BATCH_HEADER_SIZE:]
            codec = self.codec
            if codec != Codec.NONE:
                payload = decompress(codec, payload)
            append_time = self.max_timestamp if self.attributes & ATTR_LOG_APPEND_TIME else None
            yield from decode_records(
                payload,
                self.records_count,
                self.base_offset,
                self.base_timestamp,
                append_time,
                self.base_sequence,
            )
        except KafkaTierError as exc:
            raise located(exc, self.file, self.position) from exc

    def control_record(self) -> tuple[ControlType, int]:
        """(type, coordinatorEpoch) of a control batch's record; the epoch is -1 for types that
        are not transaction markers. A control batch emptied by the cleaner gives (UNKNOWN, -1):
        like an unknown type, Kafka ignores it."""
        if not self.is_control:
            raise InvalidRecordError("not a control batch", file=self.file, position=self.position)
        first = next(iter(self.records()), None)
        if first is None:
            return ControlType.UNKNOWN, -1
        try:
            control_type = parse_control_key(first.key)
            if control_type in (ControlType.ABORT, ControlType.COMMIT):
                return control_type, parse_end_txn_marker(first.value)
            return control_type, -1
        except KafkaTierError as exc:
            raise located(exc, self.file, self.position) from exc
