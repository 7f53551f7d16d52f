"""numba kernels for the cleaner's per-record work: no Python runs per record.

``scan_records`` walks a v2 batch's (decompressed) record bytes (kafka-format.md §1.4: length,
attributes, timestampDelta, offsetDelta, key, value, headers; zigzag varints) and returns where
each record's fields sit; ``md5_keys`` hashes key slices as the offset map wants them (the MD5 of
RFC 1321); ``rebuild_records`` writes the retained records again with timestamp deltas relative
to a new base timestamp, copying key, value and headers byte for byte, as Kafka's
``MemoryRecordsBuilder`` re-encodes retained records.
"""

from __future__ import annotations

import math

import numba
import numpy as np
import numpy.typing as npt

U8 = npt.NDArray[np.uint8]
I64 = npt.NDArray[np.int64]

_MD5_K = np.array([int(abs(math.sin(i + 1)) * 2**32) & 0xFFFFFFFF for i in range(64)], np.uint32)
_MD5_S = np.array(
    [7, 12, 17, 22] * 4 + [5, 9, 14, 20] * 4 + [4, 11, 16, 23] * 4 + [6, 10, 15, 21] * 4, np.uint32
)
FIELDS = 8  # scan_records' columns, below
REC_START, REC_END, BODY, TS_DELTA, OFF_DELTA, KEY_POS, KEY_LEN, VALUE_LEN = range(FIELDS)


@numba.njit(cache=True, nogil=True)
def _varint(buf: U8, pos: int, end: int, max_bytes: int) -> tuple[int, int]:
    """Zigzag varint/varlong at ``pos``: (value, next position); next = -1 when malformed."""
    result = 0
    shift = 0
    for i in range(max_bytes):
        if pos + i >= end:
            return 0, -1
        b = int(buf[pos + i])
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos + i + 1
        shift += 7
    return 0, -1


@numba.njit(cache=True, nogil=True)
def scan_records(buf: U8, count: int) -> tuple[I64, bool]:
    """(count, 8) int64 rows: record start, end, body (key length) position, timestamp delta,
    offset delta, key position, key length (-1 null), value length (-1 null); False when the
    bytes are not exactly ``count`` well-formed records (the slow reader then says why)."""
    out = np.zeros((count, FIELDS), np.int64)
    pos = 0
    end = buf.shape[0]
    for i in range(count):
        length, start = _varint(buf, pos, end, 5)
        if start < 0 or length < 0 or start + length > end:
            return out, False
        stop = start + length
        ts, p = _varint(buf, start + 1, stop, 10)
        if p < 0:
            return out, False
        od, p = _varint(buf, p, stop, 5)
        if p < 0:
            return out, False
        body = p
        klen, p = _varint(buf, p, stop, 5)
        if p < 0 or p + max(klen, 0) > stop:
            return out, False
        kpos = p
        p += max(klen, 0)
        vlen, p = _varint(buf, p, stop, 5)
        if p < 0 or p + max(vlen, 0) > stop:
            return out, False
        p += max(vlen, 0)
        headers, p = _varint(buf, p, stop, 5)
        if p < 0 or headers < 0:
            return out, False
        for _ in range(headers):
            hk, p = _varint(buf, p, stop, 5)
            if p < 0 or hk < 0 or p + hk > stop:
                return out, False
            hv, p = _varint(buf, p + hk, stop, 5)
            if p < 0 or p + max(hv, 0) > stop:
                return out, False
            p += max(hv, 0)
        if p != stop:
            return out, False
        row = out[i]
        row[0], row[1], row[2], row[3] = pos, stop, body, ts
        row[4], row[5], row[6], row[7] = od, kpos, klen, vlen
        pos = stop
    return out, pos == end


@numba.njit(cache=True, nogil=True)
def _rotl(x: np.uint32, c: np.uint32) -> np.uint32:
    return np.uint32((x << c) | (x >> np.uint32(32 - c)))


@numba.njit(cache=True, nogil=True)
def _md5_block(block: U8, state: npt.NDArray[np.uint32], k: npt.NDArray[np.uint32],
               s: npt.NDArray[np.uint32], m: npt.NDArray[np.uint32]) -> None:  # fmt: skip
    for j in range(16):
        m[j] = (np.uint32(block[4 * j]) | (np.uint32(block[4 * j + 1]) << np.uint32(8))
                | (np.uint32(block[4 * j + 2]) << np.uint32(16))
                | (np.uint32(block[4 * j + 3]) << np.uint32(24)))  # fmt: skip
    a, b, c, d = state[0], state[1], state[2], state[3]
    for i in range(64):
        if i < 16:
            f = (b & c) | (~b & d)
            g = i
        elif i < 32:
            f = (d & b) | (~d & c)
            g = (5 * i + 1) % 16
        elif i < 48:
            f = b ^ c ^ d
            g = (3 * i + 5) % 16
        else:
            f = c ^ (b | ~d)
            g = (7 * i) % 16
        f = np.uint32(f + a + k[i] + m[g])
        a = d
        d = c
        c = b
        b = np.uint32(b + _rotl(f, s[i]))
    state[0] = np.uint32(state[0] + a)
    state[1] = np.uint32(state[1] + b)
    state[2] = np.uint32(state[2] + c)
    state[3] = np.uint32(state[3] + d)


@numba.njit(cache=True, nogil=True)
def md5_into(buf: U8, pos: int, n: int, out: U8, scratch: U8, state: npt.NDArray[np.uint32],
             m: npt.NDArray[np.uint32]) -> None:  # fmt: skip
    """MD5 of ``buf[pos : pos + n]`` into ``out`` (16 bytes), using the caller's scratch arrays
    (a 64-byte block, a 4-word state, 16 message words) so no call allocates."""
    k, s, block = _MD5_K, _MD5_S, scratch
    state[0], state[1], state[2], state[3] = 0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476
    full = n // 64
    for b in range(full):
        block[:] = buf[pos + 64 * b : pos + 64 * b + 64]
        _md5_block(block, state, k, s, m)
    rest = n - 64 * full
    block[:] = 0
    block[:rest] = buf[pos + 64 * full : pos + n]
    block[rest] = 0x80
    if rest >= 56:
        _md5_block(block, state, k, s, m)
        block[:] = 0
    bits = np.uint64(n) * np.uint64(8)
    for j in range(8):
        block[56 + j] = np.uint8((bits >> np.uint64(8 * j)) & np.uint64(0xFF))
    _md5_block(block, state, k, s, m)
    for j in range(4):
        for t in range(4):
            out[4 * j + t] = np.uint8((state[j] >> np.uint32(8 * t)) & np.uint32(0xFF))


@numba.njit(cache=True, nogil=True)
def md5_keys(buf: U8, positions: I64, lengths: I64) -> U8:
    """(n, 16) MD5 digests of ``buf[positions[i] : positions[i] + lengths[i]]``."""
    out = np.empty((positions.shape[0], 16), np.uint8)
    scratch = np.empty(64, np.uint8)
    state = np.empty(4, np.uint32)
    m = np.empty(16, np.uint32)
    for i in range(positions.shape[0]):
        md5_into(buf, positions[i], lengths[i], out[i], scratch, state, m)
    return out


@numba.njit(cache=True, nogil=True)
def _put_varint(out: U8, pos: int, value: int) -> int:
    u = np.uint64((value << 1) ^ (value >> 63))
    while u >= np.uint64(0x80):
        out[pos] = np.uint8((u & np.uint64(0x7F)) | np.uint64(0x80))
        u >>= np.uint64(7)
        pos += 1
    out[pos] = np.uint8(u)
    return pos + 1


@numba.njit(cache=True, nogil=True)
def rebuild_records(buf: U8, rows: I64, keep: I64, ts_deltas: I64) -> U8:
    """The records ``rows[keep]`` again: attributes 0, the given timestamp deltas, their offset
    deltas, and key/value/headers bytes copied as they were."""
    size = 0
    for i in keep:
        size += 31 + rows[i, 1] - rows[i, 2]  # length 5 + attributes 1 + ts 10 + offset 5
    out = np.empty(size, np.uint8)
    scratch = np.empty(16, np.uint8)
    pos = 0
    for j in range(keep.shape[0]):
        i = keep[j]
        head = 1
        scratch[0] = 0
        head = _put_varint(scratch, head, ts_deltas[j])
        head = _put_varint(scratch, head, rows[i, 4])
        tail = rows[i, 1] - rows[i, 2]
        pos = _put_varint(out, pos, head + tail)
        out[pos : pos + head] = scratch[:head]
        pos += head
        out[pos : pos + tail] = buf[rows[i, 2] : rows[i, 1]]
        pos += tail
    return out[:pos]
