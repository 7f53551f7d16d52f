"""Numba kernels for record batch v2 -> Arrow (kafka-format.md §1.1, §1.4).

Output columns are preallocated at upper bounds (a record takes at least 7 bytes, a header at
least 2, key and value bytes never exceed the payload), so one pass parses and copies; the
header outputs, the largest and in most topics never written, are mapped apart (``untouched``)
so that their unused tails never become resident memory. Binary outputs are pairs
``(lengths int32[rows], data uint8[])`` with Kafka's lengths (negative = null): offsets and
validity follow with numpy afterwards, which is cheaper than storing them here. Headers are
``(count int32[records], key lengths, key data, value lengths, value data)``; ``cursors``
holds the running counts (records, key bytes, value bytes, headers, header-key bytes,
header-value bytes).

Errors come back as codes (numba cannot raise the project's typed errors); the caller maps them
to messages with :data:`ERRORS`.
"""

from __future__ import annotations

import mmap
from typing import Any, Final

import numpy as np
from numba import njit

from kafkatier.storage.arrow.encode_kernels import Array, copy_bytes, get_varint
from kafkatier.storage.wire import (
    BATCH_HEADER_SIZE,
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MIN_LEGACY_RECORD_SIZE,
)

ERR_LENGTH, ERR_VARINT, ERR_OVERRUN, ERR_HEADER_COUNT, ERR_HEADER_KEY, ERR_SIZE, ERR_TRAILING = (
    range(1, 8)
)
ERRORS: Final = {
    ERR_LENGTH: "record length is negative or runs past the end of the batch",
    ERR_VARINT: "malformed varint in a record",
    ERR_OVERRUN: "key, value or header runs past the end of its record",
    ERR_HEADER_COUNT: "invalid number of record headers",
    ERR_HEADER_KEY: "invalid negative header key size",
    ERR_SIZE: "record size does not match its declared length",
    ERR_TRAILING: "incorrect declared batch size: bytes remain after the last record",
}
SCAN_SIZE, SCAN_MAGIC, SCAN_SMALL = 1, 2, 3
_MAX_VARINT, _MAX_VARLONG = 5, 10
_K, _V, _H, _HK, _HV = 1, 2, 3, 4, 5  # cursor slots
_OWN_MAPPING_BYTES: Final = 1 << 20  # outputs from this size on are mapped (``untouched``)


@njit(cache=True, nogil=True, inline="always")
def _be_i32(buf: Array, p: int) -> int:
    v = (np.int64(buf[p]) << 24) | (buf[p + 1] << 16) | (buf[p + 2] << 8) | buf[p + 3]
    return int(v - (np.int64(1) << 32) if v >= (np.int64(1) << 31) else v)


@njit(cache=True, nogil=True)
def scan_batches(buf: Array) -> tuple[Array, int, int]:
    """Frame batches back to back (FileLogInputStream.nextBatch); stop at a partial tail.

    Returns (positions, error code or 0, position reached).
    """
    n = len(buf)
    positions = np.empty(n // BATCH_HEADER_SIZE + 1, np.int64)
    p = 0
    nb = 0
    while n - p >= HEADER_SIZE_UP_TO_MAGIC:
        size = _be_i32(buf, p + 8)
        if size < MIN_LEGACY_RECORD_SIZE:
            return positions[:nb], SCAN_SIZE, p
        if p + LOG_OVERHEAD + size > n:
            break
        if buf[p + MAGIC_OFFSET] != 2:
            return positions[:nb], SCAN_MAGIC, p
        if size < BATCH_HEADER_SIZE - LOG_OVERHEAD:
            return positions[:nb], SCAN_SMALL, p
        positions[nb] = p
        nb += 1
        p += LOG_OVERHEAD + size
    return positions[:nb], 0, p


@njit(cache=True, nogil=True, inline="always")
def _take(
    src: Array, p: int, end: int, lengths: Array, data: Array, j: int, c: int, emit: bool
) -> tuple[int, int]:
    """Read one length-prefixed byte field into row ``j`` at byte cursor ``c``.

    Returns (next position or -error, cursor), the cursor advanced only when ``emit``; a skipped
    record's bytes are copied anyway and overwritten by the next one (the outputs have room for
    every record). The length is stored before the copy: after it, it cost a third more.
    """
    n, p = get_varint(src, p, end, _MAX_VARINT)
    lengths[j] = n
    size = max(n, 0)
    if p < 0 or p + size > end:
        return (-ERR_VARINT if p < 0 else -ERR_OVERRUN), c
    copy_bytes(data, c, src, p, size)
    return int(p + size), int(c + size * emit)


@njit(cache=True, nogil=True)
def _take_headers(
    src: Array, p: int, end: int, count: int, hdrs: tuple[Array, ...], cursors: Array, emit: bool
) -> int:
    """Read ``count`` headers; only records that have headers pay for this call."""
    _, hk_len, hk_data, hv_len, hv_data = hdrs
    h, kc, vc = cursors[_H], cursors[_HK], cursors[_HV]
    for _ in range(count):
        p, kc = _take(src, p, end, hk_len, hk_data, h, kc, emit)
        if p >= 0 and hk_len[h] < 0:
            p = -ERR_HEADER_KEY
        if p >= 0:
            p, vc = _take(src, p, end, hv_len, hv_data, h, vc, emit)
        if p < 0:
            return p
        h += 1
    if emit:
        cursors[_H], cursors[_HK], cursors[_HV] = h, kc, vc
    return p


@njit(cache=True, nogil=True, inline="always")
def _record_head(src: Array, p: int, end: int) -> tuple[int, int, int, int]:
    """Length, timestamp delta and offset delta: (record end, ts delta, offset delta, next p)."""
    length, p = get_varint(src, p, end, _MAX_VARINT)
    if p < 0 or length < 1 or p + length > end:
        return 0, 0, 0, -ERR_LENGTH
    rend = p + length
    delta_ts, p = get_varint(src, p + 1, rend, _MAX_VARLONG)  # + 1: record attributes
    if p < 0:
        return 0, 0, 0, -ERR_VARINT
    delta_off, p = get_varint(src, p, rend, _MAX_VARINT)
    return rend, delta_ts, delta_off, (p if p >= 0 else -ERR_VARINT)


@njit(cache=True, nogil=True)
def parse_batches(
    src: Array,
    spans: Array,
    meta: Array,
    bounds: tuple[int, int],
    outs: tuple[Array, Array, Array],
    keys: tuple[Array, Array],
    vals: tuple[Array, Array],
    hdrs: tuple[Array, ...],
    cursors: Array,
) -> tuple[int, int, int]:
    """Parse the records of every batch (DefaultRecord.readFrom); ``spans[b]`` = (start, end)
    of its records in ``src``; ``meta[b]`` = (count, base offset, base timestamp, max
    timestamp, timestamp type). Tuples are unpacked once here: per record, each unpacked
    array costs a reference count update.

    Returns (error code or 0, batch index, record index within the batch).
    """
    o_off, o_ts, o_type = outs
    k_len, k_data = keys
    v_len, v_data = vals
    h_count = hdrs[0]
    j, kc, vc = cursors[0], cursors[_K], cursors[_V]
    for b in range(len(spans)):
        p, end = spans[b, 0], spans[b, 1]
        for r in range(meta[b, 0]):
            rend, delta_ts, delta_off, p = _record_head(src, p, end)
            if p < 0:
                return -p, b, r
            offset = meta[b, 1] + delta_off
            emit = bounds[0] <= offset < bounds[1]
            p, kc = _take(src, p, rend, k_len, k_data, j, kc, emit)
            if p >= 0:
                p, vc = _take(src, p, rend, v_len, v_data, j, vc, emit)
            count, p = get_varint(src, p, rend, _MAX_VARINT) if p >= 0 else (0, p)
            if p >= 0 and (count < 0 or count > rend - p):
                p = -ERR_HEADER_COUNT
            if p >= 0 and count > 0:
                p = _take_headers(src, p, rend, count, hdrs, cursors, emit)
            if p != rend:
                return (-p if p < 0 else ERR_SIZE), b, r
            if emit:
                o_off[j] = offset
                o_ts[j] = meta[b, 3] if meta[b, 4] == 1 else meta[b, 2] + delta_ts
                o_type[j] = meta[b, 4]
                h_count[j] = count
                j += 1
                cursors[0], cursors[_K], cursors[_V] = j, kc, vc
        if p != end:
            return ERR_TRAILING, b, meta[b, 0]
    return 0, -1, -1


def empty_outputs(records: int, payload: int) -> tuple[Any, ...]:
    """Output arrays sized by the upper bounds of ``records`` records in ``payload`` bytes; the
    headers' (five times ``payload``, written only for records that have headers) mapped apart
    (``untouched``), the rest from the heap, whose resident pages they mostly fill anyway (a
    new mapping would have to fault in and zero them again for every chunk)."""

    def binary(rows: int, empty: Any = np.empty) -> tuple[Array, Array]:
        return empty(rows, np.int32), empty(payload, np.uint8)

    outs = (np.empty(records, np.int64), np.empty(records, np.int64), np.empty(records, np.int32))
    headers = payload // 2
    hdrs = (np.empty(records, np.int32), *binary(headers, untouched), *binary(headers, untouched))
    return outs, binary(records), binary(records), hdrs


def untouched(count: int, dtype: Any) -> Array:
    """An uninitialised array whose pages stay out of memory until written: from a mapping of
    its own when large. ``np.empty`` of the same size comes from the C heap once glibc has
    raised its mmap threshold (after the first large free, up to 32 MiB), where the pages of
    earlier outputs are resident already. With the header arrays (never written by a topic
    without headers) from the heap, a Spark worker reading one 1 GiB partition rose 168 MiB
    above its warmed-up memory; mapped apart, 115 MiB (``python bench/read_large.py``)."""
    size = count * np.dtype(dtype).itemsize
    if size < _OWN_MAPPING_BYTES:
        return np.empty(count, dtype)
    return np.frombuffer(mmap.mmap(-1, size), dtype, count)
