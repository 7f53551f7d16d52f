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
"""

from __future__ import annotations

import numba

from kafkatier.storage.cleaner.kernels.chunks import I64, U8, be, kept_empty, whole_batch
from kafkatier.storage.cleaner.kernels.slots import Bits, is_superseded
from kafkatier.storage.wire import ATTR_CODEC_MASK, ATTR_CONTROL, ATTR_TRANSACTIONAL


@numba.njit(cache=True, nogil=True)
def _compressed_size(buf: U8, pos: int) -> int:
    """The size of the compressed data batch at ``pos`` held whole by ``buf``, else 0."""
    size, attrs = whole_batch(buf, pos)
    if not attrs & ATTR_CODEC_MASK or attrs & (ATTR_CONTROL | ATTR_TRANSACTIONAL):
        return 0
    return size


@numba.njit(cache=True, nogil=True)
def _all_marked(sup: Bits, sup_start: int, first: int, last: int) -> bool:
    """Whether every offset from ``first`` to ``last`` is marked superseded (none: False)."""
    if last < first:
        return False
    for offset in range(first, last + 1):  # noqa: SIM110 - numba compiles the loop
        if not is_superseded(sup, sup_start, offset):
            return False
    return True


@numba.njit(cache=True, nogil=True)
def droppable_size(sup: Bits, buf: U8, pos: int, ctx: I64, pids: I64, last_offsets: I64) -> int:
    """The size of the batch at ``pos`` if it can be dropped unread (module docstring), else 0.
    ``ctx`` as ``chunks.filter_chunk``'s: its upper bound at 3, ``sup``'s first offset at 5."""
    size = _compressed_size(buf, pos)
    if size == 0 or be(buf, pos + 57, 4) < 0 or kept_empty(buf, pos, ctx, pids, last_offsets):
        return 0  # not one of these, or kept empty: the rewrite's own rules build it then
    base = be(buf, pos, 8)
    return size if _all_marked(sup, ctx[5], base, base + be(buf, pos + 23, 4)) else 0


@numba.njit(cache=True, nogil=True)
def skip_superseded(
    sup: Bits, buf: U8, pos: int, ctx: I64, pids: I64, last_offsets: I64, stats: I64,
    limit: int,
) -> tuple[int, int]:  # fmt: skip
    """Drop the droppable batches from ``pos`` on, counted in ``stats`` as read and not
    retained (``chunks.STATS``), then find where the compressed batches that follow must stop
    to leave the next droppable one out of their inflated run: (where the rest starts, that
    end, or the buffer's length). The search looks ``limit`` stored bytes ahead at most (the
    run's inflated budget: a run ends within it, and the next call looks again from there);
    a droppable batch past it is inflated and filtered like any other, which keeps nothing."""
    while True:
        size = droppable_size(sup, buf, pos, ctx, pids, last_offsets)
        if size == 0:
            break
        stats[0] += be(buf, pos + 57, 4)
        stats[2] += size
        pos += size
    end = pos
    while True:
        size = _compressed_size(buf, end)
        if size == 0 or end - pos >= limit:
            return pos, buf.shape[0]
        if end > pos and droppable_size(sup, buf, end, ctx, pids, last_offsets):
            return pos, end
        end += size
