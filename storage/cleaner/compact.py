"""Key compaction of one partition: Kafka's ``LogCleaner`` (kafka-format.md §11).

One pass: choose the cleanable range (``choose``), map every key of the dirty section to
its latest offset in a fixed-size map (``build_map``), then rewrite the whole log up to the
map's end, clean head and dirty tail alike, group by group (``group_segments``), keeping what
``filter`` retains, each group swapped in crash-safely by the segment store. When the
dirty section has more keys than the map holds, further passes follow while the log stays
eligible, each starting after the previous map's latest offset. The returned ``end_offset`` is
the new cleaner-offset-checkpoint value; writing that checkpoint is the caller's business.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from kafkatier.storage import collector
from kafkatier.storage.cleaner import fast as cleaner_fast
from kafkatier.storage.cleaner import read_ahead
from kafkatier.storage.cleaner.build_map import build_offset_map
from kafkatier.storage.cleaner.choose import LogToClean, cleanable
from kafkatier.storage.cleaner.chunk import ChunkFilter, walk_segment, with_compressed
from kafkatier.storage.cleaner.filter import FilterContext, FilterStats, filter_batch
from kafkatier.storage.cleaner.group_writer import GroupWriter
from kafkatier.storage.cleaner.inflated_cache import InflatedCache
from kafkatier.storage.cleaner.kernels.offset_map import MURMUR3, OffsetMap
from kafkatier.storage.cleaner.legacy import legacy_delete_horizon
from kafkatier.storage.cleaner.read_ahead import Chunks
from kafkatier.storage.cleaner.segment_store import (
    CleanedSegment,
    LocalSegmentStore,
    SegmentInfo,
    SegmentStore,
)
from kafkatier.storage.cleaner.txn import CleanedTransactionMetadata
from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.log.log import Log
from kafkatier.storage.log.segment import AnyBatch
from kafkatier.storage.wire import INT32_MAX

MAX_DEDUPE_BUFFER = 2**31 - 1  # Kafka caps one cleaner thread's map at Int.MaxValue bytes
MAX_PASSES = 10_000

__all__ = ["CompactionResult", "compact_log", "group_segments"]


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """What one :func:`compact_log` call did; ``end_offset`` is the new cleaner checkpoint."""

    cleaned: bool
    end_offset: int
    bytes_before: int
    bytes_after: int
    records_removed: int
    tombstones_kept: int
    tombstones_dropped: int
    passes: int
    dirty_ratio: float
    records_read: int = 0
    segments_before: int = 0
    segments_after: int = 0
    index_seconds: float = field(default=0.0, compare=False)
    """Time the map builds took (Kafka's ``CleanerStats.elapsedIndexSecs``, which its cleaner
    logs as "Indexed ... in ... seconds")."""
    elapsed_seconds: float = field(default=0.0, compare=False)
    """Time the whole compaction took (Kafka's ``elapsedSecs``): map builds, rewrites, swaps and
    the replaced segments' removal. Neither time counts when results are compared (a cleaning's
    outcome is the same however long it took)."""


def group_segments(
    infos: Sequence[SegmentInfo], max_size: int, max_index_size: int, first_uncleanable: int
) -> list[list[SegmentInfo]]:
    """Kafka's ``groupSegmentsBySize``: consecutive segments whose log bytes, offset-index bytes
    and time-index bytes each stay within the limits and whose offsets fit one segment (not
    asked of an empty segment, which adds no offsets: as Kafka, so none is left on its own)."""
    groups: list[list[SegmentInfo]] = []
    i = 0
    while i < len(infos):
        group = [infos[i]]
        log_size, index_size, time_size = (
            infos[i].size, infos[i].offset_index_bytes, infos[i].time_index_bytes
        )  # fmt: skip
        i += 1
        while i < len(infos):
            nxt = infos[i]
            last = infos[i + 1].base_offset - 1 if i + 1 < len(infos) else first_uncleanable - 1
            if (
                log_size + nxt.size > max_size
                or index_size + nxt.offset_index_bytes > max_index_size
                or time_size + nxt.time_index_bytes > max_index_size
                or (nxt.size > 0 and last - group[0].base_offset > INT32_MAX)
            ):
                break
            group.append(nxt)
            log_size += nxt.size
            index_size += nxt.offset_index_bytes
            time_size += nxt.time_index_bytes
            i += 1
        groups.append(group)
    return groups


@dataclass
class _Round:
    """One cleaning pass's shared facts."""

    store: SegmentStore
    offset_map: OffsetMap
    now_ms: int
    config: LogConfig
    last_records: dict[int, tuple[int | None, int]]
    upper_bound: int
    stats: FilterStats
    chunk_bytes: int
    legacy_horizon: int = 0
    """Kafka's ``legacyDeleteHorizonMs`` (``legacy``)."""
    cache: InflatedCache | None = None
    """The batches the map build inflated, for the rewrite (``inflated_cache``)."""


def _filter_into(batch: AnyBatch, ctx: FilterContext, writer: GroupWriter) -> bool:
    out = filter_batch(batch, ctx)
    if out is not None:
        writer.add(out)
    return False


def _add_chunk_stats(stats: FilterStats, chunks: ChunkFilter) -> None:
    read, retained, bytes_read, kept, dropped = chunks.stats.tolist()
    stats.records_read += read
    stats.records_retained += retained
    stats.bytes_read += bytes_read
    stats.bytes_written += chunks.bytes_written
    stats.tombstones_kept += kept
    stats.tombstones_dropped += dropped


def _clean_group(
    rnd: _Round, group: Sequence[SegmentInfo], txn: CleanedTransactionMetadata
) -> None:
    """Kafka's ``cleanSegments``: one ``.cleaned`` segment from the group, then the swap.
    ``txn`` spans the whole pass (a transaction's data and marker may be in different groups);
    only the txn index that retained ABORT markers go to is the group's."""
    store = rnd.store
    cleaned = store.create_cleaned(group[0].base_offset)
    try:
        _write_group(rnd, group, txn, cleaned)
    except BaseException:
        cleaned.discard()  # a full disk or a bad batch: the log stays as it was, nothing left
        raise
    store.replace_segments(cleaned, [g.base_offset for g in group], group[-1].last_modified_ms)


def _write_group(
    rnd: _Round, group: Sequence[SegmentInfo], txn: CleanedTransactionMetadata,
    cleaned: CleanedSegment,
) -> None:  # fmt: skip
    """The group's retained batches written into ``cleaned`` (not yet swapped in)."""
    store = rnd.store
    txn.on_retained_abort = cleaned.append_aborted_txn
    ctx = FilterContext(rnd.offset_map, rnd.now_ms, rnd.config.delete_retention_ms, txn,
                        rnd.last_records, rnd.upper_bound, rnd.stats)  # fmt: skip
    chunks = None
    if cleaner_fast.ENABLED:
        facts = (rnd.now_ms, rnd.config.delete_retention_ms, rnd.upper_bound)
        chunks = ChunkFilter(rnd.offset_map, facts, rnd.last_records, rnd.chunk_bytes)
    with GroupWriter(cleaned, rnd.chunk_bytes, read_ahead.ENABLED) as writer:
        if chunks is not None:
            chunks.add, chunks.hand_over = writer.add_many, writer.hand_over
        for i, info in enumerate(group):
            upper = (
                group[i + 1].base_offset if i + 1 < len(group) else store.read_next_offset(
                    info.base_offset)
            )  # fmt: skip
            txn.add_aborted(store.aborted_txns(info.base_offset, upper))
            ctx.retain_legacy_deletes = info.last_modified_ms > rnd.legacy_horizon
            if chunks is None:
                for batch in store.read_batches(info.base_offset):
                    _filter_into(batch, ctx, writer)
            else:
                drops = chunks.drops()
                with Chunks(store, info, drops, cache=rnd.cache) as reads:
                    plain = with_compressed(chunks, chunks.inflated, rnd.chunk_bytes, reads,
                                            chunks.skip, drops)  # fmt: skip
                    walk_segment(reads, -1, plain, lambda b: _filter_into(b, ctx, writer))
        writer.flush()
    if chunks is not None:
        chunks.bytes_written += writer.deflated_bytes
        _add_chunk_stats(rnd.stats, chunks)


def _clean_pass(rnd: _Round, ltc: LogToClean) -> int:
    """Map the dirty section, rewrite [log start, end) group by group; returns ``end``."""
    cfg = rnd.config
    infos = rnd.store.segment_infos()
    rnd.legacy_horizon = legacy_delete_horizon(infos, ltc.first_dirty, cfg.delete_retention_ms)
    budget = min(cfg.dedupe_buffer_size, MAX_DEDUPE_BUFFER)
    rnd.cache = InflatedCache(budget, rnd.offset_map, read_ahead.room(rnd.store))
    try:
        began = time.perf_counter()
        build_offset_map(rnd.store, rnd.offset_map, ltc.first_dirty, ltc.first_uncleanable,
                         rnd.cache)  # fmt: skip
        rnd.stats.index_seconds += time.perf_counter() - began
        end = rnd.offset_map.latest_offset + 1
        to_clean = [info for info in infos if info.base_offset < end]
        txn = CleanedTransactionMetadata()
        for group in group_segments(
            to_clean, cfg.segment_bytes, cfg.segment_index_bytes, ltc.first_uncleanable
        ):
            _clean_group(rnd, group, txn)
    finally:
        rnd.cache.close()
        rnd.cache = None
    return end


def _active_producers(log: Log) -> dict[int, tuple[int | None, int]]:
    """Kafka's ``lastRecordsOfActiveProducers``: each producer's last data offset and epoch."""
    out: dict[int, tuple[int | None, int]] = {}
    for pid, entry in log.producer_state.producers.items():
        last = entry.last_data_offset
        out[pid] = (last if last >= 0 else None, entry.producer_epoch)
    return out


def compact_log(log: Log, *, now_ms: int, first_dirty_offset: int | None) -> CompactionResult:
    """Clean ``log`` if it is cleanable (§11.1), in as many passes as its map budget needs."""
    began = time.perf_counter()
    ltc = cleanable(log, first_dirty_offset, now_ms)
    before = log.size_in_bytes
    segments_before = len(log.segments)
    if not ltc.eligible:
        return CompactionResult(False, ltc.first_dirty, before, before, 0, 0, 0, 0,
                                ltc.cleanable_ratio, segments_before=segments_before,
                                segments_after=segments_before)  # fmt: skip
    cfg = log.config
    store = LocalSegmentStore(log, io_buffer_size=max(cfg.io_buffer_size // 2, 1 << 16))
    offset_map = OffsetMap(min(cfg.dedupe_buffer_size, MAX_DEDUPE_BUFFER),
                           cfg.dedupe_buffer_load_factor, MURMUR3)  # fmt: skip
    stats = FilterStats()
    ratio = ltc.cleanable_ratio
    passes, end = 0, ltc.first_dirty
    while ltc.eligible and passes < MAX_PASSES:
        rnd = _Round(store, offset_map, now_ms, cfg, _active_producers(log),
                     ltc.first_uncleanable, stats, store.io_buffer_size)  # fmt: skip
        with collector.paused():  # a chunk's batches and infos: many small objects
            new_end = _clean_pass(rnd, ltc)
        store.finish()
        passes += 1
        if new_end <= end:
            break
        end = new_end
        ltc = cleanable(log, end, now_ms)
    return CompactionResult(
        cleaned=True,
        end_offset=end,
        bytes_before=before,
        bytes_after=log.size_in_bytes,
        records_removed=stats.records_read - stats.records_retained,
        tombstones_kept=stats.tombstones_kept,
        tombstones_dropped=stats.tombstones_dropped,
        passes=passes,
        dirty_ratio=ratio,
        records_read=stats.records_read,
        segments_before=segments_before,
        segments_after=len(log.segments),
        index_seconds=stats.index_seconds,
        elapsed_seconds=time.perf_counter() - began,
    )
