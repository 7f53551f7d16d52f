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
def _skip_headers(buf: U8, p: int, stop: int) -> int:
    """The position after a record's headers, or -1 when they do not fit."""
    headers, p = _varint(buf, p, stop, 5)
    if p < 0 or headers < 0:
        return -1
    for _ in range(headers):
        hk, p = _varint(buf, p, stop, 5)
        if p < 0 or hk < 0 or p + hk > stop:
            return -1
        hv, p = _varint(buf, p + hk, stop, 5)
        if p < 0 or p + max(hv, 0) > stop:
            return -1
        p += max(hv, 0)
    return p


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
        p = _skip_headers(buf, p, stop)
        if p != stop:
            return out, False
        row = out[i]
        row[0], row[1], row[2], row[3] = pos, stop, body, ts
        row[4], row[5], row[6], row[7] = od, kpos, klen, vlen
        pos = stop
    return out, pos == end


@numba.njit(cache=True, nogil=True, inline="always")
def _md5_step(a: np.uint32, b: np.uint32, f: np.uint32, k: np.uint32, w: np.uint32,
              s: np.uint32) -> np.uint32:  # fmt: skip
    x = np.uint32(a + f + k + w)
    return np.uint32(b + np.uint32((x << s) | (x >> np.uint32(32 - s))))


@numba.njit(cache=True, nogil=True)
def _md5_compress(m: npt.NDArray[np.uint32], state: npt.NDArray[np.uint32]) -> None:
    """One 64-byte block, given as 16 little-endian words, folded into ``state``."""
    k, s = _MD5_K, _MD5_S
    a, b, c, d = state[0], state[1], state[2], state[3]
    for i in range(16):
        a, b, c, d = d, _md5_step(a, b, (b & c) | (~b & d), k[i], m[i], s[i]), b, c
    for i in range(16, 32):
        g = (5 * i + 1) % 16
        a, b, c, d = d, _md5_step(a, b, (d & b) | (~d & c), k[i], m[g], s[i]), b, c
    for i in range(32, 48):
        g = (3 * i + 5) % 16
        a, b, c, d = d, _md5_step(a, b, b ^ c ^ d, k[i], m[g], s[i]), b, c
    for i in range(48, 64):
        g = (7 * i) % 16
        a, b, c, d = d, _md5_step(a, b, c ^ (b | ~d), k[i], m[g], s[i]), b, c
    state[0] = np.uint32(state[0] + a)
    state[1] = np.uint32(state[1] + b)
    state[2] = np.uint32(state[2] + c)
    state[3] = np.uint32(state[3] + d)


@numba.njit(cache=True, nogil=True)
def _load_words(buf: U8, pos: int, n: int, m: npt.NDArray[np.uint32]) -> None:
    """Words of ``buf[pos : pos + n]`` (n <= 64) into ``m``, zero-padded."""
    for j in range(16):
        m[j] = 0
    for t in range(n):
        m[t >> 2] |= np.uint32(buf[pos + t]) << np.uint32(8 * (t & 3))


@numba.njit(cache=True, nogil=True)
def md5_into(buf: U8, pos: int, n: int, out: U8, scratch: U8, state: npt.NDArray[np.uint32],
             m: npt.NDArray[np.uint32]) -> None:  # fmt: skip
    """MD5 (RFC 1321) of ``buf[pos : pos + n]`` into ``out`` (16 bytes), using the caller's
    scratch arrays (a 4-word state, 16 message words) so no call allocates."""
    state[0], state[1], state[2], state[3] = 0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476
    full = n // 64
    for b in range(full):
        _load_words(buf, pos + 64 * b, 64, m)
        _md5_compress(m, state)
    rest = n - 64 * full
    _load_words(buf, pos + 64 * full, rest, m)
    m[rest >> 2] |= np.uint32(0x80) << np.uint32(8 * (rest & 3))
    if rest >= 56:
        _md5_compress(m, state)
        for j in range(16):
            m[j] = 0
    bits = np.uint64(n) * np.uint64(8)
    m[14] = np.uint32(bits & np.uint64(0xFFFFFFFF))
    m[15] = np.uint32(bits >> np.uint64(32))
    _md5_compress(m, state)
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
