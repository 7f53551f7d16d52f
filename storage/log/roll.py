"""When a partition log rolls to a new segment (kafka-format.md §9.2; Kafka's
``UnifiedLog.maybeRoll`` and ``LogSegment.shouldRoll``).

A segment is closed for appends when the next batch would push it past ``segment.bytes``, when
either of its preallocated indexes is full, when the batch's last offset no longer fits the
segment's int32 relative offsets, or once it has waited ``segment.ms`` less its random jitter.
The roll itself (indexes trimmed, producer snapshot, new files) is ``Log.roll``.
"""

from __future__ import annotations

from collections.abc import Callable

from kafkatier.storage import wire
from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.log.segment import LogSegment
from kafkatier.storage.record.batch import RecordBatch


def needs_new_segment(
    active: LogSegment, cfg: LogConfig, chunk_bytes: int, last_offset: int
) -> bool:
    """Whether a batch ending at ``last_offset`` must start a new chunk: appended after
    ``chunk_bytes`` of the current chunk, it would not fit the active segment."""
    return (
        active.size + chunk_bytes > cfg.segment_bytes
        or not active.can_convert_to_relative_offset(last_offset)
    )


def should_roll(
    seg: LogSegment, cfg: LogConfig, clock: Callable[[], int], size: int, first: RecordBatch
) -> bool:
    """Kafka's ``shouldRoll`` for an append of ``size`` bytes starting with ``first``; the clock
    is read only when time decides."""
    if seg.size > cfg.segment_bytes - size:
        return True
    if seg.indexes_full or not seg.can_convert_to_relative_offset(first.last_offset):
        return True
    return seg.size > 0 and time_rolls(seg, cfg, clock, first.max_timestamp)


def time_rolls(seg: LogSegment, cfg: LogConfig, clock: Callable[[], int], timestamp: int) -> bool:
    """Kafka's ``segment.ms`` rule for an append to a segment holding something, whose batch
    has the largest timestamp ``timestamp``: waited longer than ``segment.ms`` less the jitter
    (:func:`time_roll_limit`)."""
    limit = time_roll_limit(seg, cfg, clock)
    return limit is None or timestamp > limit


def time_roll_limit(seg: LogSegment, cfg: LogConfig, clock: Callable[[], int]) -> int | None:
    """The largest timestamp an append to ``seg`` may have without rolling by ``segment.ms``
    less the jitter (said once here: :func:`time_rolls` asks it of one timestamp,
    ``log/committed_all.py`` of a call's worth of batches at once); None where the segment
    rolls whatever the timestamp (it waits by the clock, and has waited long enough). The time
    waited is the timestamp less the segment's first one, or the clock's (independent of it)."""
    allowed = cfg.max_segment_ms - seg.roll_jitter_ms
    waited = seg.time_waited_for_roll(clock, 0)
    based = seg.rolling_based_timestamp
    if based is not None and based >= 0:
        return allowed - waited  # waited(timestamp) = timestamp + waited(0)
    return None if waited > allowed else wire.INT64_MAX
