"""Numba kernels for the Arrow -> record batch v2 encoder (kafka-format.md §1.4, §1.5); their C
build is ``storage/native/kernels.c`` (kafkatier.storage.native says which serves).

The encoder works on numpy views of Arrow buffers. A "binary column" is the triple
``(starts int64[n], data uint8[], lengths int64[n])``: starts index ``data`` absolutely (Arrow
slices keep their original offsets) and a null has length -1, which is also how Kafka writes it.
Headers are ``(list_offsets int64[n+1], key starts, key data, key lengths, value starts, value
data, value lengths)`` over the flattened headers; empty ``list_offsets`` means "no headers".

Record lengths, counts and deltas are zig-zag varints; a 64-bit zig-zag of a value in int32 range
gives the same bytes as the 32-bit one, so one writer serves varint and varlong alike.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

Array = Any  # numpy arrays as seen by numba kernels; numba has no typing stubs

_U7 = np.uint64(7)
_U7F = np.uint64(0x7F)
_U80 = np.uint64(0x80)
_U1 = np.uint64(1)
_U32MASK = np.uint64(0xFFFFFFFF)

ERR_NONE = 0


@njit(cache=True, nogil=True, inline="always")
def zigzag(v: int) -> Any:
    """int64 -> uint64 zig-zag, as ByteUtils.writeVarlong."""
    return np.uint64((v << 1) ^ (v >> 63))


@njit(cache=True, nogil=True, inline="always")
def varint_size(v: int) -> int:
    """Bytes taken by the zig-zag varint/varlong of ``v``."""
    u = zigzag(v)
    n = 1
    while u >= _U80:
        u >>= _U7
        n += 1
    return n


@njit(cache=True, nogil=True, inline="always")
def put_varint(buf: Array, p: int, v: int) -> int:
    """Write the zig-zag varint of ``v`` at ``p``; return the position after it."""
    u = zigzag(v)
    while u >= _U80:
        buf[p] = np.uint8((u & _U7F) | _U80)
        u >>= _U7
        p += 1
    buf[p] = np.uint8(u)
    return p + 1


@njit(cache=True, nogil=True, inline="always")
def get_varint(buf: Array, p: int, end: int, max_bytes: int) -> tuple[int, int]:
    """Read a zig-zag varint (``max_bytes`` 5) or varlong (10) ending before ``end``.

    Returns ``(value, next position)``; the position is -1 when the bytes run out or the
    number is too long. A varint keeps only its low 32 bits, as ByteUtils.readVarint does.
    """
    raw = np.uint64(0)
    shift = np.uint64(0)
    for _ in range(max_bytes):
        if p >= end:
            return 0, -1
        b = np.uint64(buf[p])
        p += 1
        raw |= (b & _U7F) << shift
        if b < _U80:
            if max_bytes == 5:
                raw &= _U32MASK
            return int(np.int64(raw >> _U1) ^ -np.int64(raw & _U1)), p
        shift += _U7
    return 0, -1


@njit(cache=True, nogil=True, inline="always")
def _field_size(lengths: Array, i: int) -> int:
    """A length varint and the bytes; a null (length -1) is the single byte 0x01."""
    n = lengths[i]
    return int(varint_size(n) + max(n, 0))


@njit(cache=True, nogil=True)
def _headers_size(hdr: tuple[Array, ...], i: int) -> int:
    list_off, _, _, hk_len, _, _, hv_len = hdr
    first, last = list_off[i], list_off[i + 1]
    size = varint_size(last - first)
    for h in range(first, last):
        size += _field_size(hk_len, h) + _field_size(hv_len, h)
    return int(size)


@njit(cache=True, nogil=True)
def payload_sizes(
    key: tuple[Array, Array, Array], value: tuple[Array, Array, Array], hdr: tuple[Array, ...]
) -> Array:
    """Per record: bytes of key, value and headers, the parts that do not depend on the batch."""
    k_len, v_len = key[2], value[2]
    has_headers = len(hdr[0]) > 0
    out = np.empty(len(v_len), np.int64)
    for i in range(len(v_len)):
        out[i] = _field_size(k_len, i) + _field_size(v_len, i)
        out[i] += _headers_size(hdr, i) if has_headers else 1
    return out


@njit(cache=True, nogil=True)
def plan_batches(
    payload: Array, ts: Array, max_bytes: int, max_records: int, overhead: int
) -> tuple[Array, Array, Array, Array, int]:
    """Cut records into batches of at most ``max_bytes`` (``overhead`` = header size).

    A record's size depends on its batch (offset and timestamp deltas), so the cut is
    sequential. Returns (first row of each batch + a final n, body length of each record,
    batch sizes, batch max timestamps, row of a record too large for any batch or -1).
    """
    n = len(payload)
    starts = np.empty(n + 1, np.int64)
    sizes = np.empty(n, np.int64)
    max_ts = np.empty(n, np.int64)
    body = np.empty(n, np.int64)
    nb = -1
    first = 0
    for i in range(n):
        b = 1 + varint_size(ts[i] - ts[first]) + varint_size(i - first) + payload[i]
        total = b + varint_size(b)
        if nb < 0 or sizes[nb] + total > max_bytes or i - first >= max_records:
            nb += 1
            first = i
            b = 3 + payload[i]  # attributes, timestamp delta 0, offset delta 0
            total = b + varint_size(b)
            if overhead + total > max_bytes:
                return starts[:0], body, sizes[:0], max_ts[:0], i
            starts[nb] = i
            sizes[nb] = overhead
            max_ts[nb] = ts[i]
        body[i] = b
        sizes[nb] += total
        max_ts[nb] = max(max_ts[nb], ts[i])
    starts[nb + 1] = n
    return starts[: nb + 2], body, sizes[: nb + 1], max_ts[: nb + 1], -1


@njit(cache=True, nogil=True, inline="always")
def copy_bytes(dst: Array, at: int, src: Array, start: int, n: int) -> None:
    """Copy ``n`` >= 0 bytes. Unsigned indices spare numba's negative-index wrap-around, so
    LLVM vectorises the loop; slice assignment or views cost a call or reference counting per
    field, several times the copy itself for short keys and values."""
    a = np.uint64(at)
    s = np.uint64(start)
    for k in range(np.uint64(n)):
        dst[a + k] = src[s + k]


@njit(cache=True, nogil=True, inline="always")
def _put_field(buf: Array, p: int, starts: Array, data: Array, lengths: Array, i: int) -> int:
    """Length varint, then the bytes; a null (length -1) copies nothing."""
    n = lengths[i]
    p = put_varint(buf, p, n)
    n = max(n, 0)
    copy_bytes(buf, p, data, starts[i], n)
    return int(p + n)


@njit(cache=True, nogil=True)
def _put_headers(buf: Array, p: int, hdr: tuple[Array, ...], i: int) -> int:
    list_off, hk_start, hk_data, hk_len, hv_start, hv_data, hv_len = hdr
    first, last = list_off[i], list_off[i + 1]
    p = put_varint(buf, p, last - first)
    for h in range(first, last):
        p = _put_field(buf, p, hk_start, hk_data, hk_len, h)
        p = _put_field(buf, p, hv_start, hv_data, hv_len, h)
    return p


@njit(cache=True, nogil=True)
def write_records(
    buf: Array,
    positions: Array,
    starts: Array,
    body: Array,
    ts: Array,
    key: tuple[Array, Array, Array],
    value: tuple[Array, Array, Array],
    hdr: tuple[Array, ...],
    sizes: Array,
    overhead: int,
) -> int:
    """Write every batch's records after its (separately written) header.

    Tuples are unpacked once, outside the loops: unpacking per record costs a reference
    count update per array, which dominated the run time. Returns the number of batches whose
    records did not end exactly at the planned size (0 unless the planner and writer disagree).
    """
    wrong = 0
    k_start, k_data, k_len = key
    v_start, v_data, v_len = value
    has_headers = len(hdr[0]) > 0
    for b in range(len(starts) - 1):
        p = positions[b] + overhead
        first = starts[b]
        for i in range(first, starts[b + 1]):
            p = put_varint(buf, p, body[i])
            buf[p] = 0  # record attributes: unused
            p = put_varint(buf, p + 1, ts[i] - ts[first])
            p = put_varint(buf, p, i - first)
            p = _put_field(buf, p, k_start, k_data, k_len, i)
            p = _put_field(buf, p, v_start, v_data, v_len, i)
            if has_headers:
                p = _put_headers(buf, p, hdr, i)
            else:
                buf[p] = 0
                p += 1
        if p != positions[b] + sizes[b]:
            wrong += 1
    return wrong


@njit(cache=True, nogil=True)
def gather_rows(buf: Array, positions: Array, width: int) -> Array:
    """Copy ``width`` bytes from each position into one row each (batch headers)."""
    out = np.empty((len(positions), width), np.uint8)
    for b in range(len(positions)):
        for k in range(width):
            out[b, k] = buf[positions[b] + k]
    return out


@njit(cache=True, nogil=True)
def scatter_rows(buf: Array, positions: Array, rows: Array) -> None:
    """Write row b of ``rows`` at ``positions[b]`` (batch headers, rebased offsets)."""
    width = rows.shape[1]
    for b in range(len(positions)):
        for k in range(width):
            buf[positions[b] + k] = rows[b, k]
