"""Compressed batches the rewrite can drop from their headers alone: every record of them has a
later record with the same key (``OffsetMap.superseded`` says so, bit by bit, from the map
build), so Kafka's ``shouldRetainRecord`` keeps none and, when the batch need not stay as an
empty one, the batch goes. Inflating such a batch only to find nothing to keep was most of the
rewrite of an old compacted topic: in ``bench/compaction.py``'s workload (1M records over 100k
keys) 48% of the batches are wholly superseded.

Taken: compressed v2 data batches (neither control nor transactional: no transaction tracking
depends on them, the rule of ``storage.cleaner.compressed``) held whole by the chunk, whose
every offset from baseOffset to baseOffset + lastOffsetDelta is marked. A batch with a gap in
its offsets (cleaned before) has unmarked offsets and is inflated as before, as is a batch
Kafka keeps empty (``chunks.kept_empty``: its producer's last, or the one that ends the cleaned
range). Every marked record was read by the map build, so a batch dropped
here was decoded once, there.

Such batches are dropped where the walk meets them (:func:`skip_superseded`) and inside a run
of batches to inflate (``codec_runs.inflate_runs``, the read-ahead's runs): a run goes on past
them, so that the batches kept around them make one run, one filter call and one recompression
call, not one each. On ``bench/compaction.py``'s workload (lz4), where kept and dropped
batches alternate through the middle of the log, the rewrite filtered 873 runs of about six
batches when each dropped batch ended one, and 312 with this change alone (534 against 1,016
without the read-ahead thread; 111 once the read-ahead's runs also went up to its whole chunk,
``read_ahead.Chunks.run_bytes``); the compaction's medians 0.400-0.410 s against 0.406-0.468 s
in three runs of 9 rounds alternating with the code before (2026-12-01, stop 62). What such a
gap held is counted when the walk passes it (:func:`count_dropped`).
"""

from __future__ import annotations

from typing import Final, NamedTuple

import numba
import numpy as np

from kafkatier.storage.cleaner.kernels.chunks import I64, U8, be, kept_empty, whole_batch
from kafkatier.storage.cleaner.kernels.slots import Bits, all_marked
from kafkatier.storage.wire import ATTR_CODEC_MASK, ATTR_CONTROL, ATTR_TRANSACTIONAL


class Drops(NamedTuple):
    """The rewrite's facts for the batches it drops unread (``ChunkFilter.skip``): the
    superseded bits, the filter's context, the producers' ids and last offsets."""

    sup: Bits
    ctx: I64
    pids: I64
    last_offsets: I64


NO_DROPS: Final = Drops(np.zeros(0, np.uint8), np.zeros(6, np.int64), np.zeros(0, np.int64),
                        np.zeros(0, np.int64))  # fmt: skip
"""No batch dropped (the map build's walks; with no bits marked none qualifies)."""


@numba.njit(cache=True, nogil=True)
def _compressed_size(buf: U8, pos: int) -> int:
    """The size of the compressed data batch at ``pos`` held whole by ``buf``, else 0."""
    size, attrs = whole_batch(buf, pos)
    if not attrs & ATTR_CODEC_MASK or attrs & (ATTR_CONTROL | ATTR_TRANSACTIONAL):
        return 0
    return size


@numba.njit(cache=True, nogil=True)
def droppable_size(sup: Bits, buf: U8, pos: int, ctx: I64, pids: I64, last_offsets: I64) -> int:
    """The size of the batch at ``pos`` if it can be dropped unread (module docstring), else 0.
    ``ctx`` as ``chunks.filter_chunk``'s: its upper bound at 3, ``sup``'s first offset at 5."""
    size = _compressed_size(buf, pos)
    if size == 0 or be(buf, pos + 57, 4) < 0 or kept_empty(buf, pos, ctx, pids, last_offsets):
        return 0  # not one of these, or kept empty: the rewrite's own rules build it then
    base = be(buf, pos, 8)
    return size if all_marked(sup, ctx[5], base, base + be(buf, pos + 23, 4)) else 0


@numba.njit(cache=True, nogil=True)
def skip_superseded(
    sup: Bits, buf: U8, pos: int, ctx: I64, pids: I64, last_offsets: I64, stats: I64
) -> int:  # fmt: skip
    """Drop the droppable batches from ``pos`` on, counted in ``stats`` as read and not
    retained (``chunks.STATS``): where the rest starts."""
    while True:
        size = droppable_size(sup, buf, pos, ctx, pids, last_offsets)
        if size == 0:
            return pos
        stats[0] += be(buf, pos + 57, 4)
        stats[2] += size
        pos += size


@numba.njit(cache=True, nogil=True)
def droppable_gap(
    sup: Bits, buf: U8, start: int, end: int, ctx: I64, pids: I64, last_offsets: I64
) -> bool:  # fmt: skip
    """Whether ``buf[start:end]`` is droppable batches, one after another."""
    while start < end:
        size = droppable_size(sup, buf, start, ctx, pids, last_offsets)
        if size == 0:
            return False
        start += size
    return start == end


@numba.njit(cache=True, nogil=True)
def count_dropped(buf: U8, start: int, end: int, stats: I64) -> None:
    """The batches of ``buf[start:end]`` (dropped inside a run) counted in ``stats`` as
    :func:`skip_superseded` counts them."""
    while start < end:
        size, _ = whole_batch(buf, start)
        if size == 0:
            return
        stats[0] += be(buf, start + 57, 4)
        stats[2] += size
        start += size
