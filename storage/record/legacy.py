"""Legacy message sets, magic 0 and 1, for reading old logs (kafka-format.md §1.10).

Each entry is one message (Kafka's ``LegacyRecord`` behind ``offset`` and ``size``)::

    offset      int64   v1 compressed wrapper: offset of the last inner message
    size        int32   bytes after this field
    crc         uint32  CRC-32 (IEEE) of [magic, end)
    magic       int8    0 or 1
    attributes  int8    codec bits 0-2, v1: timestamp type bit 3
    timestamp   int64   v1 only
    keyLength   int32   -1 = null, then key
    valueLength int32   -1 = null, then value

A compressed message (a "wrapper") holds in its value a compressed message set of inner
entries with the same layout. v1 inner offsets are relative (0..n-1) and made absolute from the
wrapper offset; v0 inner offsets are absolute. A v1 LogAppendTime wrapper's timestamp replaces
its inner messages' timestamps. The shallow entry is what :class:`LegacyBatch` views.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from typing import Final

from kafkatier.storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    KafkaTierError,
)
from kafkatier.storage.record import lz4_frame
from kafkatier.storage.record.compression import decompress
from kafkatier.storage.record.record import Record, codec_of
from kafkatier.storage.wire import (
    ATTR_LOG_APPEND_TIME,
    LOG_OVERHEAD,
    MIN_LEGACY_RECORD_SIZE,
    NO_TIMESTAMP,
    OFFSET_AND_LENGTH,
    Codec,
    TimestampType,
)

Buffer = bytes | bytearray | memoryview
_HEADER: Final = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_TIMESTAMP: Final = struct.Struct(">q")
_LENGTH: Final = struct.Struct(">i")
_CRC_START: Final = 16  # the magic byte
_OVERHEAD: Final = (14, 22)  # LegacyRecord.RECORD_OVERHEAD_V0 / _V1 (from the crc on)

# (offset, magic, attributes, timestamp, key, value) of one message
_Message = tuple[int, int, int, int, bytes | None, bytes | None]


def _nullable(buf: Buffer, pos: int, end: int) -> tuple[bytes | None, int]:
    if pos + 4 > end:
        raise InvalidRecordError("legacy message truncated in a length field")
    (size,) = _LENGTH.unpack_from(buf, pos)
    pos += 4
    if size < 0:
        return None, pos
    if pos + size > end:
        raise InvalidRecordError(f"legacy message field of {size} bytes runs past its end")
    return bytes(buf[pos : pos + size]), pos + size


def _parse_message(buf: Buffer, pos: int) -> tuple[_Message, int]:
    """The message entry at ``pos`` (offset and size first); returns it and the next position.
    Like Kafka, bytes after the value inside the declared size are ignored."""
    offset, size, _crc, magic, attrs = _HEADER.unpack_from(buf, pos)
    end = pos + LOG_OVERHEAD + size
    if magic not in (0, 1) or size < _OVERHEAD[magic]:
        raise InvalidRecordError(f"invalid legacy message (magic {magic}, size {size})")
    field = pos + _HEADER.size
    timestamp = NO_TIMESTAMP
    if magic == 1:
        (timestamp,) = _TIMESTAMP.unpack_from(buf, field)
        field += 8
    key, field = _nullable(buf, field, end)
    value, field = _nullable(buf, field, end)
    return (offset, magic, attrs, timestamp, key, value), end


class LegacyBatch:
    """One shallow magic 0/1 message viewed in place (layout in the module docstring). Offers
    the read API of :class:`~kafkatier.storage.record.records.RecordBatch` with the v2-only fields
    at their "none" values; v0 has no timestamps and reports CREATE_TIME."""

    __slots__ = (
        "_inner",
        "_view",
        "attributes",
        "crc",
        "file",
        "last_offset",
        "magic",
        "max_timestamp",
        "position",
        "size_in_bytes",
    )

    last_offset: int
    crc: int
    magic: int
    attributes: int
    max_timestamp: int
    size_in_bytes: int
    _inner: tuple[Record, ...] | None

    partition_leader_epoch: Final = -1
    producer_id: Final = -1
    producer_epoch: Final = -1
    base_sequence: Final = -1
    last_sequence: Final = -1
    is_transactional: Final = False
    is_control: Final = False
    has_producer_id: Final = False
    delete_horizon_ms: Final = None

    def __init__(self, buffer: Buffer, position: int = 0, *, file: str | None = None) -> None:
        view = memoryview(buffer).cast("B")
        self.position, self.file, self._inner = position, file, None
        if len(view) - position < _HEADER.size:
            raise CorruptRecordError(
                "legacy message shorter than its header", file=file, position=position
            )
        self.last_offset, size, self.crc, self.magic, self.attributes = _HEADER.unpack_from(
            view, position
        )
        self.size_in_bytes = LOG_OVERHEAD + size
        if self.magic not in (0, 1) or size < _OVERHEAD[self.magic]:
            raise CorruptRecordError(
                f"invalid legacy message (magic {self.magic}, size {size})",
                file=file,
                position=position,
            )
        if self.size_in_bytes > len(view) - position:
            raise CorruptRecordError(
                "legacy message extends past the buffer end", file=file, position=position
            )
        self._view = view[position : position + self.size_in_bytes]
        self.max_timestamp = NO_TIMESTAMP
        if self.magic == 1:
            (self.max_timestamp,) = _TIMESTAMP.unpack_from(self._view, _HEADER.size)

    def __repr__(self) -> str:
        return (
            f"LegacyBatch(magic={self.magic}, last_offset={self.last_offset}, "
            f"size={self.size_in_bytes}, position={self.position})"
        )

    @property
    def buffer(self) -> memoryview:
        return self._view

    @property
    def codec(self) -> Codec:
        return codec_of(self.attributes, self.file, self.position)

    @property
    def timestamp_type(self) -> TimestampType:
        log_append = self.magic == 1 and self.attributes & ATTR_LOG_APPEND_TIME
        return TimestampType.LOG_APPEND_TIME if log_append else TimestampType.CREATE_TIME

    @property
    def base_offset(self) -> int:
        """First inner offset (``AbstractLegacyRecordBatch.baseOffset``); decompresses."""
        first: int = self._records()[0].offset
        return first

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def records_count(self) -> int:
        return len(self._records())

    def compute_crc(self) -> int:
        return zlib.crc32(self._view[_CRC_START:])

    def is_valid(self) -> bool:
        return self.size_in_bytes >= LOG_OVERHEAD + MIN_LEGACY_RECORD_SIZE and (
            self.crc == self.compute_crc()
        )

    def ensure_valid(self) -> None:
        computed = self.compute_crc()
        if computed != self.crc:
            raise CorruptRecordError(
                f"record is corrupt (stored crc = {self.crc}, computed crc = {computed})",
                file=self.file,
                position=self.position,
            )

    def records(self) -> Iterator[Record]:
        """The message itself, or a wrapper's inner messages with absolute offsets."""
        return iter(self._records())

    def _records(self) -> tuple[Record, ...]:
        if self._inner is None:
            try:
                self._inner = self._decode()
            except KafkaTierError as exc:
                context = {k: v for k, v in exc.context.items() if k not in ("file", "position")}
                raise type(exc)(
                    exc.message, file=self.file, position=self.position, **context
                ) from exc
        return self._inner

    def _decode(self) -> tuple[Record, ...]:
        (_, _, _, timestamp, key, value), _ = _parse_message(self._view, 0)
        if self.codec == Codec.NONE:
            return (Record(self.last_offset, timestamp, key, value),)
        if value is None:
            raise InvalidRecordError("compressed legacy message set with a null value")
        if self.codec == Codec.LZ4 and self.magic == 0:  # v0 wrote a wrong header checksum
            data = lz4_frame.decompress(value, ignore_header_checksum=True)
        else:
            data = decompress(self.codec, value)
        return self._inner_records(data)

    def _inner_records(self, data: bytes) -> tuple[Record, ...]:
        """``AbstractLegacyRecordBatch.DeepRecordsIterator``."""
        messages: list[_Message] = []
        pos = 0
        while len(data) - pos >= LOG_OVERHEAD:  # a partial entry header ends the set
            _, size = OFFSET_AND_LENGTH.unpack_from(data, pos)
            if size < MIN_LEGACY_RECORD_SIZE or pos + LOG_OVERHEAD + size > len(data):
                raise InvalidRecordError(f"invalid inner message size {size} at {pos}")
            message, pos = _parse_message(data, pos)
            messages.append(message)
        if not messages:
            raise InvalidRecordError("compressed legacy message set with no inner messages")
        base = 0
        if self.magic == 1 and self.last_offset != 0:  # 0: some librdkafka versions
            if self.last_offset < messages[-1][0]:
                raise InvalidRecordError(
                    f"wrapper offset {self.last_offset} is below the last inner offset "
                    f"{messages[-1][0]}"
                )
            base = self.last_offset - messages[-1][0]
        append_time = self.timestamp_type == TimestampType.LOG_APPEND_TIME
        return tuple(
            Record(
                base + offset, self.max_timestamp if append_time and magic == 1 else ts, key, value
            )
            for offset, magic, _, ts, key, value in messages
        )
