"""numba kernels for the cleaner's per-record work: no Python runs per record.

``scan_records`` walks a v2 batch's (decompressed) record bytes (kafka-format.md §1.4: length,
attributes, timestampDelta, offsetDelta, key, value, headers; zigzag varints) and returns where
each record's fields sit; ``md5_keys`` hashes key slices as the offset map wants them (the MD5 of
RFC 1321, ``md5``); ``rebuild_records`` writes the retained records again with timestamp
deltas relative to a new base timestamp, copying key, value and headers byte for byte, as Kafka's
``MemoryRecordsBuilder`` re-encodes retained records.
"""

from __future__ import annotations

import numba
import numpy as np
import numpy.typing as npt

from kafkatier.storage.cleaner.kernels.md5 import md5_into

U8 = npt.NDArray[np.uint8]
I64 = npt.NDArray[np.int64]

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


@numba.njit(cache=True, nogil=True)
def md5_keys(buf: U8, positions: I64, lengths: I64) -> U8:
    """(n, 16) MD5 digests of ``buf[positions[i] : positions[i] + lengths[i]]``."""
    out = np.empty((positions.shape[0], 16), np.uint8)
    for i in range(positions.shape[0]):
        md5_into(buf, positions[i], lengths[i], out[i])
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
