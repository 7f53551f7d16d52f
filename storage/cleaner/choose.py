"""Whether and how much of a compacted partition to clean (Kafka's ``LogToClean`` and
``LogCleanerManager.cleanableOffsets``, kafka-format.md §11.1).

The log splits at ``first_dirty`` (the cleaner-offset-checkpoint) into a clean head and a dirty
tail; the dirty tail is cleanable up to ``first_uncleanable``: never at or beyond the last stable
offset, never in the active segment, never in a segment younger than ``min.compaction.lag.ms``,
rounded down to a segment boundary. The dirty ratio is cleanable bytes over clean + cleanable.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkatier.storage.log.log import Log
from kafkatier.storage.log.segment import LogSegment


@dataclass(frozen=True, slots=True)
class LogToClean:
    """The facts Kafka's cleaner manager computes for one log."""

    first_dirty: int
    first_uncleanable: int
    clean_bytes: int
    cleanable_bytes: int
    need_compaction_now: bool
    min_cleanable_ratio: float

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        total = self.total_bytes
        return self.cleanable_bytes / total if total else 0.0

    @property
    def eligible(self) -> bool:
        """Kafka's filter in ``grabFilthiestCompactedLog``."""
        return (
            self.need_compaction_now and self.cleanable_bytes > 0
        ) or self.cleanable_ratio > self.min_cleanable_ratio


def _first_batch_timestamp(segment: LogSegment) -> int:
    """Kafka's ``getFirstBatchTimestamp``: the first batch's max timestamp (-1 when empty)."""
    first = next(iter(segment.scan_headers()), None)
    if first is None:
        return -1
    batch = next(segment.batches(0, end=first.size), None)
    return -1 if batch is None else batch.max_timestamp


def _dirty_non_active(log: Log, first_dirty: int) -> list[LogSegment]:
    return [s for s in log.segments_from(first_dirty) if s is not log.active_segment]


def resolve_first_dirty(log: Log, checkpoint: int | None) -> int:
    """The checkpoint, or the log start offset when absent or outside [logStart, LEO]."""
    if checkpoint is None or not log.log_start_offset <= checkpoint <= log.log_end_offset:
        return log.log_start_offset
    return checkpoint


def first_uncleanable_offset(log: Log, first_dirty: int, now_ms: int) -> int:
    """min(LSO, active base, first segment inside the min compaction lag), >= first dirty."""
    candidates = [log.last_stable_offset, log.active_segment.base_offset]
    lag = log.config.min_compaction_lag_ms
    if lag > 0:
        for segment in _dirty_non_active(log, first_dirty):
            if segment.largest_timestamp > now_ms - lag:
                candidates.append(segment.base_offset)
                break
    return max(min(candidates), first_dirty)


def need_compaction_now(log: Log, first_dirty: int, now_ms: int) -> bool:
    """The earliest first-batch timestamp of a dirty non-active segment is older than
    ``max.compaction.lag.ms``."""
    stamps = [
        t for s in _dirty_non_active(log, first_dirty) if (t := _first_batch_timestamp(s)) > 0
    ]
    earliest = min(stamps, default=2**63 - 1)
    return earliest < now_ms - max(log.config.max_compaction_lag_ms, 0)


def cleanable(log: Log, first_dirty_offset: int | None, now_ms: int) -> LogToClean:
    """§11.1 for ``log`` with the given cleaner checkpoint (None: none recorded)."""
    first_dirty = resolve_first_dirty(log, first_dirty_offset)
    uncleanable = first_uncleanable_offset(log, first_dirty, now_ms)
    active = log.active_segment
    segments = log.segments
    # The first segment overlapping [uncleanable, active base), else the active one.
    holder = next(
        (s for s in log.segments_from(uncleanable) if s.base_offset < active.base_offset), active
    )
    first_uncleanable = holder.base_offset
    upper = max(first_dirty, first_uncleanable)
    clean = sum(s.size for s in segments if s.base_offset < first_dirty)
    dirty = sum(s.size for s in _overlapping(log, first_dirty, upper))
    return LogToClean(
        first_dirty=first_dirty,
        first_uncleanable=first_uncleanable,
        clean_bytes=clean,
        cleanable_bytes=dirty,
        need_compaction_now=need_compaction_now(log, first_dirty, now_ms),
        min_cleanable_ratio=log.config.min_cleanable_dirty_ratio,
    )


def _overlapping(log: Log, start: int, end: int) -> list[LogSegment]:
    """Kafka's ``logSegments(from, to)``: segments holding offsets in [start, end)."""
    if start >= end:
        return []
    return [s for s in log.segments_from(start) if s.base_offset < end]
