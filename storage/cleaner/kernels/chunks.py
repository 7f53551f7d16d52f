"""The cleaner's two passes over a whole read chunk in one numba call (``storage.cleaner.chunk``).

Both walk the v2 batches of a chunk (kafka-format.md §1) and handle every *plain* batch (magic 2,
codec none, neither control nor transactional, records that scan) themselves; they stop at the
first other batch, or at a batch the chunk does not hold whole, and return its position so the
Python path (``storage.cleaner.build_map`` / ``storage.cleaner.filter``) takes it with its full
rules and errors. A plain
batch needs no transaction tracking (a non-transactional batch only advances the aborted-txn queue,
which the next transactional or control batch advances as far), so the decisions are the Python
path's: ``map_batch`` and ``select_batch`` per batch, and a rebuild as
``storage.cleaner.fast.rebuild`` writes it (Kafka's ``MemoryRecordsBuilder``), CRC-32C included.
"""

from __future__ import annotations

import numba
import numpy as np
import numpy.typing as npt

from kafkatier.storage.cleaner.kernels.batches import map_batch, select_batch
from kafkatier.storage.cleaner.kernels.records import TS_DELTA, rebuild_records, scan_records
from kafkatier.storage.cleaner.kernels.slots import Bits, Table, all_marked
from kafkatier.storage.wire import (
    ATTR_CODEC_MASK,
    ATTR_CONTROL,
    ATTR_DELETE_HORIZON,
    ATTR_LOG_APPEND_TIME,
    ATTR_TRANSACTIONAL,
    BATCH_HEADER_SIZE,
    CRC_OFFSET,
    CRC_START,
    LOG_OVERHEAD,
)

U8 = npt.NDArray[np.uint8]
I64 = npt.NDArray[np.int64]
STATS = 5  # filter_chunk's counters: records read, retained, bytes read, tombstones kept, dropped
INFO = 4  # filter_chunk's rows per written batch: position, size, last offset, max timestamp


def _crc_tables() -> npt.NDArray[np.uint32]:
    """Slicing-by-8 tables of the reflected Castagnoli polynomial: row 0 the byte table, row k
    the CRC of a byte followed by k zero bytes."""
    tables = np.zeros((8, 256), np.uint32)
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        tables[0, i] = c
    for k in range(1, 8):
        for i in range(256):
            prev = int(tables[k - 1, i])
            tables[k, i] = (prev >> 8) ^ int(tables[0, prev & 0xFF])
    return tables


_CRC_TABLES = _crc_tables()


@numba.njit(cache=True, nogil=True)
def crc32c(buf: U8, start: int, end: int) -> int:
    """CRC-32C (Castagnoli) of ``buf[start:end]``, as the v2 batch CRC; eight bytes a step."""
    t = _CRC_TABLES
    c = np.int64(0xFFFFFFFF)
    i = start
    while i + 8 <= end:
        w = c ^ (np.int64(buf[i]) | (np.int64(buf[i + 1]) << 8) | (np.int64(buf[i + 2]) << 16)
                 | (np.int64(buf[i + 3]) << 24))  # fmt: skip
        c = np.int64(t[7, w & 0xFF]) ^ np.int64(t[6, (w >> 8) & 0xFF])
        c ^= np.int64(t[5, (w >> 16) & 0xFF]) ^ np.int64(t[4, w >> 24])
        c ^= np.int64(t[3, buf[i + 4]]) ^ np.int64(t[2, buf[i + 5]])
        c ^= np.int64(t[1, buf[i + 6]]) ^ np.int64(t[0, buf[i + 7]])
        i += 8
    for j in range(i, end):
        c = np.int64(t[0, (c ^ np.int64(buf[j])) & 0xFF]) ^ (c >> 8)
    return int(c ^ 0xFFFFFFFF)


@numba.njit(cache=True, nogil=True, inline="always")
def be(buf: U8, pos: int, n: int) -> int:
    """Signed big-endian int of ``n`` bytes at ``pos``."""
    v = 0
    for i in range(n):
        v = (v << 8) | int(buf[pos + i])
    if v >= 1 << (8 * n - 1):
        v -= 1 << (8 * n)
    return v


@numba.njit(cache=True, nogil=True, inline="always")
def put_be(buf: U8, pos: int, n: int, value: int) -> None:
    for i in range(n):
        buf[pos + n - 1 - i] = np.uint8((value >> (8 * i)) & 0xFF)


@numba.njit(cache=True, nogil=True)
def whole_batch(buf: U8, pos: int) -> tuple[int, int]:
    """(size, attributes) of the v2 batch at ``pos`` that ``buf`` holds whole; size 0 when
    there is none (too short, not magic 2, a length below the header's or past the end)."""
    if buf.shape[0] - pos < BATCH_HEADER_SIZE or buf[pos + 16] != 2:
        return 0, 0
    size = LOG_OVERHEAD + be(buf, pos + 8, 4)
    if size < BATCH_HEADER_SIZE or pos + size > buf.shape[0]:
        return 0, 0
    return size, be(buf, pos + 21, 2)


@numba.njit(cache=True, nogil=True)
def plain_batch_size(buf: U8, pos: int) -> int:
    """The size of the plain batch at ``pos``, or 0 when it is not plain or not all there."""
    size, attrs = whole_batch(buf, pos)
    if attrs & (ATTR_CODEC_MASK | ATTR_CONTROL | ATTR_TRANSACTIONAL) or be(buf, pos + 57, 4) < 0:
        return 0
    return size


@numba.njit(cache=True, nogil=True)
def map_chunk(
    table: Table, buf: U8, pos: int, start: int, size: int, limit: int, latest: int, digest: int,
    sup: Bits, sup_start: int,
) -> tuple[int, bool, int, int]:  # fmt: skip
    """Map the plain batches from ``pos``: (where it stopped, map full, size, latest offset).
    A full map stops at the batch that did not fit, the latest offset then its last record put
    (as Python)."""
    while True:
        n = plain_batch_size(buf, pos)
        if n == 0:
            return pos, False, size, latest
        payload = buf[pos + BATCH_HEADER_SIZE : pos + n]
        rows, ok = scan_records(payload, be(buf, pos + 57, 4))
        if not ok:
            return pos, False, size, latest
        base = be(buf, pos, 8)
        complete, size, last_put = map_batch(table, payload, rows, base, start, size, limit,
                                             digest, sup, sup_start)  # fmt: skip
        if not complete:
            return pos, True, size, max(latest, last_put)
        last = base + be(buf, pos + 23, 4)
        if last >= start:
            latest = last
        pos += n


@numba.njit(cache=True, nogil=True)
def _is_last_of_producer(pid: int, last: int, pids: I64, last_offsets: I64) -> bool:
    """A data batch is its producer's last (``lastRecordsOfActiveProducers``); ``pids``
    sorted, holding only producers whose last data offset is known."""
    i = np.searchsorted(pids, pid)
    return bool(i < pids.shape[0] and pids[i] == pid and last_offsets[i] == last)


@numba.njit(cache=True, nogil=True)
def kept_empty(buf: U8, pos: int, ctx: I64, pids: I64, last_offsets: I64) -> bool:
    """Whether the data batch at ``pos``, none of its records retained, stays as an empty
    batch (Kafka's ``BatchRetention.RETAIN_EMPTY``): its producer's last, or the batch that
    ends the cleaned range (``ctx[3]``, the upper bound)."""
    last = be(buf, pos, 8) + be(buf, pos + 23, 4)
    pid = be(buf, pos + 43, 8)
    return last + 1 == ctx[3] or (pid > -1 and _is_last_of_producer(pid, last, pids, last_offsets))


@numba.njit(cache=True, nogil=True)
def _write_rebuilt(
    buf: U8, pos: int, payload: U8, rows: I64, kept: I64, horizon: int, out: U8, at: int
) -> tuple[int, int]:  # fmt: skip
    """The batch at ``pos`` with only ``kept`` records into ``out[at:]``, header as
    ``storage.cleaner.fast.rebuild`` assembles it; (bytes written, max timestamp). ``horizon``
    < 0: none."""
    attrs = be(buf, pos + 21, 2)
    log_append = attrs & ATTR_LOG_APPEND_TIME != 0
    max_ts = be(buf, pos + 35, 8)
    if log_append:
        stamps = np.full(kept.shape[0], max_ts, np.int64)
    else:
        stamps = be(buf, pos + 27, 8) + rows[kept, TS_DELTA]
        max_ts = max(stamps.max(), -1)
    base_ts = horizon if horizon >= 0 else stamps[0]
    body = rebuild_records(payload, rows, kept, stamps - base_ts)
    size = BATCH_HEADER_SIZE + body.shape[0]
    out[at : at + 17] = buf[pos : pos + 17]  # base offset, (length), leader epoch, magic
    put_be(out, at + 8, 4, size - LOG_OVERHEAD)
    new_attrs = (attrs & ATTR_LOG_APPEND_TIME) | (ATTR_DELETE_HORIZON if horizon >= 0 else 0)
    put_be(out, at + 21, 2, new_attrs)
    out[at + 23 : at + 27] = buf[pos + 23 : pos + 27]  # last offset delta
    put_be(out, at + 27, 8, base_ts)
    put_be(out, at + 35, 8, max_ts)
    out[at + 43 : at + 57] = buf[pos + 43 : pos + 57]  # producer id, epoch, base sequence
    put_be(out, at + 57, 4, kept.shape[0])
    out[at + BATCH_HEADER_SIZE : at + size] = body
    put_be(out, at + CRC_OFFSET, 4, crc32c(out, at + CRC_START, at + size))
    return size, max_ts


@numba.njit(cache=True, nogil=True)
def _filter_one(
    table: Table, sup: Bits, buf: U8, pos: int, n: int, ctx: I64, pids: I64, last_offsets: I64,
    out: U8, at: int, stats: I64,
) -> tuple[bool, int, int]:  # fmt: skip
    """One plain batch: (handled, bytes written to ``out[at:]``, max timestamp written).
    ``ctx`` = (map latest offset, now, delete retention, upper bound, digest, ``sup``'s first
    offset)."""
    count = be(buf, pos + 57, 4)
    payload = buf[pos + BATCH_HEADER_SIZE : pos + n]
    rows, ok = scan_records(payload, count)
    if not ok:
        return False, 0, 0
    base = be(buf, pos, 8)
    retain_empty = kept_empty(buf, pos, ctx, pids, last_offsets)
    has_horizon = be(buf, pos + 21, 2) & ATTR_DELETE_HORIZON != 0
    horizon = be(buf, pos + 27, 8) if has_horizon else -1
    retain_deletes = not has_horizon or ctx[1] < horizon
    kept, expired, tombstones = select_batch(table, payload, rows, base, ctx[0], retain_deletes,
                                             ctx[4], sup, ctx[5])  # fmt: skip
    if kept.shape[0] == 0 and retain_empty:
        return False, 0, 0  # a 61-byte empty batch: the Python path builds it
    stats[0] += count
    stats[1] += kept.shape[0]
    stats[2] += n
    stats[3] += tombstones
    stats[4] += expired
    if kept.shape[0] == 0:
        return True, 0, 0
    needs_horizon = tombstones > 0 and not has_horizon
    if kept.shape[0] == count and not needs_horizon:
        out[at : at + n] = buf[pos : pos + n]
        return True, n, be(buf, pos + 35, 8)
    new_horizon = ctx[1] + ctx[2] if needs_horizon else horizon
    size, max_ts = _write_rebuilt(buf, pos, payload, rows, kept, new_horizon, out, at)
    return True, size, max_ts


@numba.njit(cache=True, nogil=True)
def filter_chunk(
    table: Table, sup: Bits, buf: U8, pos: int, ctx: I64, pids: I64, last_offsets: I64, out: U8,
    infos: I64, stats: I64,
) -> tuple[int, int, int]:  # fmt: skip
    """Filter the plain batches from ``pos`` into ``out``, one ``infos`` row per batch written:
    (where it stopped, bytes in ``out``, rows in ``infos``). Stops early when ``out`` or
    ``infos`` might not hold the next batch (the caller flushes and calls again)."""
    at = written = 0
    while True:
        n = plain_batch_size(buf, pos)
        if n == 0 or written == infos.shape[0]:
            return pos, at, written
        count = be(buf, pos + 57, 4)
        if at + n + 10 * count + 64 > out.shape[0]:  # ts deltas grow to at most 10 bytes
            return pos, at, written
        base = be(buf, pos, 8)
        if all_marked(sup, ctx[5], base, base + be(buf, pos + 23, 4)) and not kept_empty(
            buf, pos, ctx, pids, last_offsets
        ):  # every record superseded: none kept, none scanned (clean_filter.c says why)
            stats[0] += count
            stats[2] += n
            pos += n
            continue
        handled, size, max_ts = _filter_one(table, sup, buf, pos, n, ctx, pids, last_offsets, out,
                                            at, stats)  # fmt: skip
        if not handled:
            return pos, at, written
        if size:
            infos[written, 0], infos[written, 1] = at, size
            infos[written, 2], infos[written, 3] = be(buf, pos, 8) + be(buf, pos + 23, 4), max_ts
            written += 1
            at += size
        pos += n
