"""One v2 record on the wire, and the control-record payloads (kafka-format.md §1.4, §3).

Record layout (every length and count is a zig-zag varint; -1 means null)::

    length          varint   bytes after this field
    attributes      int8     0
    timestampDelta  varlong  timestamp - batch baseTimestamp (may be negative)
    offsetDelta     varint   offset - batch baseOffset
    keyLength, key           varint + bytes
    valueLength, value       varint + bytes
    headersCount    varint   then per header: keyLength varint (>= 0), UTF-8 key,
                             valueLength varint, value

Control batches hold one record whose key is int16 version + int16 type and, for transaction
markers, whose value is int16 version + int32 coordinatorEpoch.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from kafkatier.storage.errors import CompressionError, InvalidRecordError
from kafkatier.storage.record.varint import (
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
)
from kafkatier.storage.wire import (
    ATTR_CODEC_MASK,
    CONTROL_KEY,
    END_TXN_MARKER_VALUE,
    Codec,
    ControlType,
    increment_sequence,
)

Buffer = bytes | bytearray | memoryview
Headers = tuple[tuple[str, bytes | None], ...]


@dataclass(frozen=True, slots=True)
class Record:
    """A decoded record with absolute offset and timestamp (as consumers see them)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()
    sequence: int = -1


def _encode_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        out += b"\x01"  # zig-zag -1
    else:
        out += encode_varint(len(data))
        out += data


def encode_record(
    out: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Headers = (),
) -> int:
    """Append one record to ``out``; returns its size including the length prefix."""
    body = bytearray(b"\x00")  # attributes
    body += encode_varlong(timestamp_delta)
    body += encode_varint(offset_delta)
    _encode_bytes(body, key)
    _encode_bytes(body, value)
    body += encode_varint(len(headers))
    for name, header_value in headers:
        try:
            raw_name = name.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidRecordError(f"header key is not valid UTF-8: {exc}") from None
        _encode_bytes(body, raw_name)
        _encode_bytes(body, header_value)
    prefix = encode_varint(len(body))
    out += prefix
    out += body
    return len(prefix) + len(body)


def _read_bytes(buf: Buffer, pos: int, end: int) -> tuple[bytes | None, int]:
    """A varint length, then that many bytes; any negative length means null (Kafka's
    ``Utils.readBytes``)."""
    b = buf[pos]
    if b < 0x80:  # the one-byte varint, inlined: this runs twice per record
        size, pos = (b >> 1) ^ -(b & 1), pos + 1
    else:
        size, pos = decode_varint(buf, pos)
    if size < 0:
        return None, pos
    stop = pos + size
    if stop > end:
        raise InvalidRecordError(f"field of {size} bytes runs past the record end")
    return bytes(buf[pos:stop]), stop


def _read_headers(buf: Buffer, pos: int, end: int) -> tuple[Headers, int]:
    count, pos = decode_varint(buf, pos)
    if count < 0 or count > end - pos:
        raise InvalidRecordError(f"invalid number of record headers {count}")
    out = []
    for _ in range(count):
        size, pos = decode_varint(buf, pos)
        if size < 0:
            raise InvalidRecordError(f"invalid negative header key size {size}")
        if pos + size > end:
            raise InvalidRecordError(f"header key of {size} bytes runs past the record end")
        name = bytes(buf[pos : pos + size]).decode("utf-8", "replace")  # as Java's new String
        value, pos = _read_bytes(buf, pos + size, end)
        out.append((name, value))
    return tuple(out), pos


def _read_record(
    buf: Buffer, start: int, end: int
) -> tuple[int, int, bytes | None, bytes | None, Headers]:
    """(timestampDelta, offsetDelta, key, value, headers) of the record body in [start, end)."""
    ts_delta, pos = decode_varlong(buf, start + 1)  # + 1: the unused attributes byte
    offset_delta, pos = decode_varint(buf, pos)
    key, pos = _read_bytes(buf, pos, end)
    value, pos = _read_bytes(buf, pos, end)
    if buf[pos] == 0:
        headers: Headers = ()
        pos += 1
    else:
        headers, pos = _read_headers(buf, pos, end)
    if pos != end:
        raise InvalidRecordError(f"invalid record size: read {pos - start} of {end - start} bytes")
    return ts_delta, offset_delta, key, value, headers


def decode_records(
    buf: Buffer,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None,
    base_sequence: int,
) -> Iterator[Record]:
    """Exactly ``count`` records filling ``buf`` (Kafka's ``DefaultRecordBatch.RecordIterator``):
    each record must consume exactly its declared length and no bytes may remain."""
    if count < 0:
        raise InvalidRecordError(f"invalid record count {count}")
    pos, size = 0, len(buf)
    try:
        for index in range(count):
            if pos >= size:
                raise InvalidRecordError(f"batch declares {count} records but holds {index}")
            length, start = decode_varint(buf, pos)
            pos = start + length
            if length < 0 or pos > size:
                raise InvalidRecordError(
                    f"invalid record size: {length} bytes declared, {size - start} remain"
                )
            ts_delta, offset_delta, key, value, headers = _read_record(buf, start, pos)
            yield Record(
                base_offset + offset_delta,
                base_timestamp + ts_delta if log_append_time is None else log_append_time,
                key,
                value,
                headers,
                increment_sequence(base_sequence, offset_delta) if base_sequence >= 0 else -1,
            )
    except IndexError:  # a field read ran off the buffer: Kafka's BufferUnderflowException
        raise InvalidRecordError("invalid record structure: truncated record") from None
    if pos != size:
        raise InvalidRecordError(
            f"incorrect declared batch size: {size - pos} bytes remain after {count} records"
        )


def parse_control_key(key: bytes | None) -> ControlType:
    """``ControlRecordType.parse``: >= 4 bytes, version >= 0, newer versions read as v0."""
    if key is None or len(key) < CONTROL_KEY.size:
        raise InvalidRecordError("control record key shorter than 4 bytes")
    version, type_id = CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise InvalidRecordError(f"invalid control record key version {version}")
    try:
        return ControlType(type_id)
    except ValueError:
        return ControlType.UNKNOWN


def parse_end_txn_marker(value: bytes | None) -> int:
    """``EndTransactionMarker.deserializeValue``: the coordinator epoch."""
    if value is None or len(value) < END_TXN_MARKER_VALUE.size:
        raise InvalidRecordError("end transaction marker value shorter than 6 bytes")
    version, coordinator_epoch = END_TXN_MARKER_VALUE.unpack_from(value)
    if version < 0:
        raise InvalidRecordError(f"invalid end transaction marker version {version}")
    return int(coordinator_epoch)


def codec_of(attributes: int, file: str | None, position: int) -> Codec:
    """The codec in attribute bits 0-2; ids 5-7 are unknown to Kafka (``CompressionType.forId``)."""
    codec_id = attributes & ATTR_CODEC_MASK
    if codec_id > Codec.ZSTD:
        raise CompressionError(
            f"unknown compression codec id {codec_id}", codec=codec_id, file=file, position=position
        )
    return Codec(codec_id)
