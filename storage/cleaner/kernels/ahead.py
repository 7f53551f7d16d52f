"""The read-ahead's kernels (``storage.cleaner.read_ahead``): where a chunk's whole batches end,
and every lz4 and zstd data batch among them inflated in one call, as ``codec_runs.inflate_runs``
inflates a run, so that a thread of its own prepares the next chunk while the walk works on this
one (both release the GIL)."""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from kafkatier.storage.cleaner.kernels.chunks import be, whole_batch
from kafkatier.storage.cleaner.kernels.codec_runs import (
    DCTX,
    META,
    ROOM,
    inflate_batch,
    zstd_dctx,
)
from kafkatier.storage.cleaner.kernels.superseded import droppable_gap, droppable_size
from kafkatier.storage.wire import ATTR_CODEC_MASK, ATTR_CONTROL, ATTR_TRANSACTIONAL, Codec

_ZSTD = int(Codec.ZSTD)
NO_CACHE = np.empty((0, META), np.int64)
""":func:`inflate_chunk`'s ``cached_meta`` where nothing is cached."""
_SMALLEST = 12 + 14  # a legacy message's offset, size and its smallest record (v0)


@numba.njit(cache=True, nogil=True)
def batches_end(chunk: Any) -> int:
    """Where the batches ``chunk`` holds whole end, by their length fields (any magic); 0 when
    the first is not whole (the walk then reads a larger chunk)."""
    pos = 0
    while chunk.shape[0] - pos >= 12:
        size = 12 + be(chunk, pos + 8, 4)
        if size < _SMALLEST or pos + size > chunk.shape[0]:
            break
        pos += size
    return pos


@numba.njit(cache=True, nogil=True)
def holds_zstd(chunk: Any, end: int) -> bool:
    """Whether a zstd data batch is among ``chunk[:end]``'s whole v2 batches."""
    pos = 0
    view = chunk[:end]
    while pos < end:
        size, attrs = whole_batch(view, pos)
        if size == 0:
            return False
        if attrs & ATTR_CODEC_MASK == _ZSTD and not attrs & (ATTR_CONTROL | ATTR_TRANSACTIONAL):
            return True
        pos += size
    return False


@numba.njit(cache=True, nogil=True)
def inflate_chunk(
    chunk: Any, end: int, out: Any, meta: Any, sup: Any, ctx: Any, pids: Any,
    last_offsets: Any, drop: bool, contexts: Any, cached_meta: Any,
) -> tuple[int, int]:  # fmt: skip
    """Every lz4 and zstd data batch among ``chunk[:end]``'s whole v2 batches, inflated into
    ``out`` one after the other as ``inflate_runs`` does, its ``META`` fields in ``meta``, while
    ``out`` has ``ROOM`` and ``meta`` a row (the rest left to the walk); with ``drop``, none that
    the rewrite drops unread (``superseded.droppable_size`` over ``sup``, ``ctx``, ``pids``,
    ``last_offsets``). Stops at the first batch that is not v2. Returns (batches, bytes).
    ``contexts``: the thread's zstd contexts (``zstd_contexts.of_thread``). ``cached_meta``:
    the rows of the batches the map build inflated and kept (``inflated_cache``; empty: none),
    sorted by chunk position: those batches are passed over, the walk takes them from the
    cache as they are."""
    pos = 0
    total = 0
    count = 0
    k = 0
    zstd = contexts[DCTX]
    view = chunk[:end]
    while pos < end and count < meta.shape[0] and out.shape[0] - total >= ROOM:
        size, attrs = whole_batch(view, pos)
        if size == 0:
            break
        data = (attrs & ATTR_CODEC_MASK) != 0 and (attrs & (ATTR_CONTROL | ATTR_TRANSACTIONAL)) == 0
        if data and not (drop and droppable_size(sup, view, pos, ctx, pids, last_offsets)):
            while k < cached_meta.shape[0] and cached_meta[k, 1] < pos:
                k += 1
            if k == cached_meta.shape[0] or cached_meta[k, 1] != pos:
                if zstd == 0 and attrs & ATTR_CODEC_MASK == _ZSTD:
                    zstd = contexts[DCTX] = zstd_dctx()
                got = inflate_batch(view, pos, size, attrs, zstd, out, total, meta[count])
                if got > 0:
                    total += got
                    count += 1
        pos += size
    return count, total


@numba.njit(cache=True, nogil=True)
def run_end(
    meta: Any, row: int, max_bytes: int, chunk: Any, sup: Any, ctx: Any, pids: Any,
    last_offsets: Any,
) -> int:  # fmt: skip
    """The row after the last of the run that starts at ``row`` of ``meta`` (an
    :func:`inflate_chunk`'s): the rows after it while their batches start within ``max_bytes``
    inflated bytes of its start and the chunk holds nothing between one and the next but
    batches the rewrite drops unread (``superseded.droppable_gap``; none without drops: no
    offset is marked)."""
    first = meta[row, 0]
    i = row + 1
    while i < meta.shape[0] and meta[i, 0] - first < max_bytes:
        end = meta[i - 1, 1] + meta[i - 1, 2]
        if meta[i, 1] != end and not droppable_gap(sup, chunk, end, meta[i, 1], ctx, pids,
                                                   last_offsets):  # fmt: skip
            break
        i += 1
    return i
