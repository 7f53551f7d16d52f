"""Kafka's variable-length integers (kafka-format.md §1.5; ``ByteUtils``).

Base-128 groups, least significant first, bit 7 = "more follows". Signed values are zig-zag
mapped first (``(v << 1) ^ (v >> 31)``), so small negative numbers stay short: -1 is ``01``.
A varint is at most 5 bytes and a varlong at most 10; a longer encoding is an error, but (like
Kafka) overflowing bits inside the last allowed byte are masked off rather than rejected.

Decoders take ``(buf, pos)`` and return ``(value, new_pos)`` so the record parser can walk a
buffer without slicing it. They are written for the common one-byte case first because record
parsing calls them several times per record.
"""

from __future__ import annotations

from kafkatier.storage.errors import InvalidRecordError

_INT32_MIN = -(2**31)
_INT32_MAX = 2**31 - 1
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_MASK32 = 0xFFFFFFFF
_MASK64 = 0xFFFFFFFFFFFFFFFF


def _encode_groups(u: int) -> bytes:
    """Base-128 groups of a non-negative ``u``."""
    if u < 0x80:
        return bytes((u,))
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def _decode_groups(
    buf: bytes | bytearray | memoryview, pos: int, max_bytes: int
) -> tuple[int, int]:
    """The raw (unsigned, unmasked) value of up to ``max_bytes`` groups at ``pos``."""
    result = 0
    shift = 0
    try:
        for i in range(max_bytes):
            b = buf[pos + i]
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return result, pos + i + 1
            shift += 7
    except IndexError:
        raise InvalidRecordError("truncated varint", position=pos) from None
    raise InvalidRecordError(f"varint longer than {max_bytes} bytes", position=pos)


def encode_varint(value: int) -> bytes:
    """Zig-zag varint of an int32 (``ByteUtils.writeVarint``)."""
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise InvalidRecordError(f"varint value {value} outside int32")
    return _encode_groups(((value << 1) ^ (value >> 31)) & _MASK32)


def encode_varlong(value: int) -> bytes:
    """Zig-zag varlong of an int64 (``ByteUtils.writeVarlong``)."""
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise InvalidRecordError(f"varlong value {value} outside int64")
    return _encode_groups(((value << 1) ^ (value >> 63)) & _MASK64)


def encode_unsigned_varint(value: int) -> bytes:
    """Unsigned varint of a 32-bit word; negative int32 values are taken as their two's complement,
    as Java's ``writeUnsignedVarint(int)`` does (-1 encodes as ``ff ff ff ff 0f``)."""
    if not _INT32_MIN <= value <= _MASK32:
        raise InvalidRecordError(f"unsigned varint value {value} outside 32 bits")
    return _encode_groups(value & _MASK32)


def decode_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Zig-zag varint at ``pos``; more than 5 bytes raises InvalidRecordError."""
    try:
        b = buf[pos]
    except IndexError:
        raise InvalidRecordError("truncated varint", position=pos) from None
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    u, pos = _decode_groups(buf, pos, 5)
    u &= _MASK32
    return (u >> 1) ^ -(u & 1), pos


def decode_varlong(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Zig-zag varlong at ``pos``; more than 10 bytes raises InvalidRecordError."""
    try:
        b = buf[pos]
    except IndexError:
        raise InvalidRecordError("truncated varlong", position=pos) from None
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    u, pos = _decode_groups(buf, pos, 10)
    u &= _MASK64
    return (u >> 1) ^ -(u & 1), pos


def decode_unsigned_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Unsigned varint at ``pos``, returned as Java's ``readUnsignedVarint`` does: a signed
    int32 (so ``ff ff ff ff 0f`` reads back as -1)."""
    u, pos = _decode_groups(buf, pos, 5)
    u &= _MASK32
    return (u - (1 << 32) if u > _INT32_MAX else u), pos


def size_of_varint(value: int) -> int:
    """Encoded length of ``encode_varint(value)`` without encoding it."""
    u = ((value << 1) ^ (value >> 31)) & _MASK32
    return max(1, (u.bit_length() + 6) // 7)


def size_of_varlong(value: int) -> int:
    """Encoded length of ``encode_varlong(value)`` without encoding it."""
    u = ((value << 1) ^ (value >> 63)) & _MASK64
    return max(1, (u.bit_length() + 6) // 7)
