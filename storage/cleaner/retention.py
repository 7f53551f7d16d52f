"""Retention (``cleanup.policy=delete``) and DeleteRecords, with Kafka's semantics (§10).

Kafka's ``UnifiedLog.deleteOldSegments``: whole segments are deleted from the oldest on, first
those wholly below the log start offset (DeleteRecords), then, only when ``cleanup.policy``
contains ``delete``, by ``retention.bytes`` and then by ``retention.ms``. Each rule walks from the
oldest segment and stops at the first that does not qualify; a segment qualifies only if its upper
bound (next segment's base offset, or the log end offset for the last) is at or below the high
watermark; an empty last segment is never deleted; and when every segment would go, a new empty
active segment is rolled first, so the log keeps its end offset.

Deleting, as ``UnifiedLog.deleteSegments``: the segments leave the log's list, their files are
renamed ``.deleted`` oldest first (so a crash at any point leaves a suffix of the log), their
producer snapshots are renamed ``.deleted`` too, and the log start offset moves to the first
remaining segment's base (the leader-epoch cache is truncated from the start, the recovery point
raised). The renamed files are removed after ``file.delete.delay.ms`` by
:class:`~kafkatier.storage.log.delayed_delete.PendingDeletions`. Checkpoints are the log
directory's business (``LogDirectory.checkpoint``); until it runs, the partition's files alone
give the same log start offset on reopen, since the loader takes the first segment's base.

Tiered topics (``remote.storage.enable=true``): this code deletes no segment, and DeleteRecords
only moves the log start offset (in memory, and through ``persist_start`` in the checkpoint).
Local segments may go only once their remote copy is FINISHED and verified, which only the
tiering sidecar knows (tiering/copy/local_retention.py applies ``local.retention.*``); total
retention and the log start offset span the remote log too (tiering/cleaner/retention.py). The
sidecar reads the new log start from ``log-start-offset-checkpoint``, commits it to the remote
manifest, and only then deletes the local segments below it: deleting them here first would
let the log dir's next checkpoint drop the entry (it names only starts above the first
segment) before the remote side ever saw it. Local readers honour the checkpoint meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kafkatier.storage.errors import OffsetOutOfRangeError
from kafkatier.storage.log.log import Log
from kafkatier.storage.log.segment import LogSegment
from kafkatier.storage.producer.snapshot import DELETED_SUFFIX

HIGH_WATERMARK = -1
"""DeleteRecordsRequest.HIGH_WATERMARK: delete everything below the high watermark."""

Predicate = Callable[[LogSegment, LogSegment | None], bool]


@dataclass
class RetentionResult:
    """What one retention run or DeleteRecords did to a partition."""

    log_start_offset: int
    segments_deleted: int = 0
    bytes_deleted: int = 0
    records_deleted: int = 0
    reasons: list[str] = field(default_factory=list)

    def merge(self, other: RetentionResult) -> None:
        self.log_start_offset = other.log_start_offset
        self.segments_deleted += other.segments_deleted
        self.bytes_deleted += other.bytes_deleted
        self.records_deleted += other.records_deleted
        self.reasons += other.reasons


def delete_old_segments(log: Log, *, now_ms: int | None = None) -> RetentionResult:
    """One retention check of ``log`` (Kafka's ``deleteOldSegments``), then removal of the
    ``.deleted`` files whose ``file.delete.delay.ms`` has passed."""
    now = log.clock() if now_ms is None else now_ms
    result = RetentionResult(log.log_start_offset)
    if log.config.remote_storage_enable:  # the tiering sidecar's (module docstring)
        log.pending_deletions.run(now)
        return result
    result.merge(_delete_where(log, _start_offset_breached(log), "log-start-offset", now))
    if log.config.is_delete:
        result.merge(_delete_where(log, _size_breached(log), "retention.bytes", now))
        result.merge(_delete_where(log, _time_breached(log, now), "retention.ms", now))
    log.pending_deletions.run(now)
    return result


def delete_records(
    log: Log,
    offset: int,
    *,
    now_ms: int | None = None,
    persist_start: Callable[[], None] | None = None,
) -> RetentionResult:
    """``kafka-delete-records.sh``: move the log start offset up to ``offset`` (``-1``: the high
    watermark), then delete the segments wholly below it.

    Reads below the new start raise OffsetOutOfRangeError. ``persist_start`` (e.g. the log
    directory's ``checkpoint``) runs between the two steps, so the new start is durable before
    any file goes; Kafka itself checkpoints it only periodically.
    """
    target = log.high_watermark if offset == HIGH_WATERMARK else offset
    if target < 0:
        raise OffsetOutOfRangeError(
            f"cannot delete records below negative offset {offset}", file=str(log.directory)
        )
    maybe_increment_log_start_offset(log, target)
    tiered = log.config.remote_storage_enable
    below_local = tiered and log.remote_start < target < log.log_start_offset
    if below_local:  # into what only the remote copy holds: checkpointed as its start
        log.remote_start = target
    if persist_start is not None:
        persist_start()
    now = log.clock() if now_ms is None else now_ms
    if tiered:  # the tiering sidecar deletes (module docstring)
        return RetentionResult(target if below_local else log.log_start_offset)
    result = _delete_where(log, _start_offset_breached(log), "log-start-offset", now)
    result.log_start_offset = log.log_start_offset
    log.pending_deletions.run(now)
    return result


def maybe_increment_log_start_offset(log: Log, new_start: int) -> bool:
    """Kafka's ``maybeIncrementLogStartOffset``: never beyond the high watermark, never down."""
    if new_start > log.high_watermark:
        raise OffsetOutOfRangeError(
            f"cannot move the log start offset to {new_start}: beyond the high watermark "
            f"{log.high_watermark}",
            file=str(log.directory),
        )
    if new_start <= log.log_start_offset:
        return False
    log.log_start_offset = new_start
    log.recovery_point = max(log.recovery_point, new_start)
    if log.leader_epoch_cache.truncate_from_start(new_start):
        log.leader_epoch_cache.flush()
    log.producer_state.on_log_start_offset_incremented(new_start)
    return True


# ---------------------------------------------------------------------------------- predicates


def _start_offset_breached(log: Log) -> Predicate:
    def breached(segment: LogSegment, following: LogSegment | None) -> bool:
        return following is not None and following.base_offset <= log.log_start_offset

    return breached


def _size_breached(log: Log) -> Predicate:
    """Oldest segments while the log stays at least ``retention.bytes`` without them."""
    retention = log.config.retention_bytes
    size = log.size_in_bytes
    if retention < 0 or size < retention:
        return lambda segment, following: False
    diff = [size - retention]

    def breached(segment: LogSegment, following: LogSegment | None) -> bool:
        if diff[0] - segment.size < 0:
            return False
        diff[0] -= segment.size
        return True

    return breached


def _time_breached(log: Log, now_ms: int) -> Predicate:
    """Segments whose newest record (or, lacking timestamps, file) is older than retention.ms."""
    retention = log.config.retention_ms
    if retention < 0:
        return lambda segment, following: False
    return lambda segment, following: now_ms - segment.largest_timestamp > retention


# ---------------------------------------------------------------------------------- deletion


def deletable_segments(log: Log, predicate: Predicate) -> list[LogSegment]:
    """Kafka's ``deletableSegments``: the oldest segments, up to the first that fails."""
    found: list[LogSegment] = []
    segments = log.segments
    for i, segment in enumerate(segments):
        following = segments[i + 1] if i + 1 < len(segments) else None
        upper = log.log_end_offset if following is None else following.base_offset
        # The predicate sees only segments below the high watermark (it may count sizes).
        if not (log.high_watermark >= upper and predicate(segment, following)):
            break
        if following is None and segment.size == 0:
            break
        found.append(segment)
    return found


def _delete_where(log: Log, predicate: Predicate, reason: str, now_ms: int) -> RetentionResult:
    deletable = deletable_segments(log, predicate)
    result = delete_segments(log, deletable, now_ms=now_ms)
    if result.segments_deleted:
        result.reasons.append(reason)
    return result


def delete_segments(log: Log, segments: list[LogSegment], *, now_ms: int) -> RetentionResult:
    """Take ``segments`` (the oldest ones) out of the log and schedule their files' removal."""
    if not segments:
        return RetentionResult(log.log_start_offset)
    doomed = segments
    if len(segments) == len(log.segments):  # the log must keep a segment: roll a new one first
        rolled = log.roll()
        doomed = [s for s in segments if s.base_offset != rolled.base_offset]
    result = RetentionResult(
        log.log_start_offset,
        segments_deleted=len(doomed),
        bytes_deleted=sum(s.size for s in doomed),
        records_deleted=sum(_records_in(s) for s in doomed),
    )
    gone = {id(s) for s in doomed}
    log.segments[:] = [s for s in log.segments if id(s) not in gone]
    paths: list[Path] = []
    for segment in doomed:  # oldest first: a crash leaves a suffix of the log
        paths += _rename_deleted(segment)
    new_start = log.segments[0].base_offset
    for offset, _ in log.producer_state.snapshot_files():
        if offset < new_start:
            renamed = log.producer_state.delete_snapshot(offset)
            if renamed is not None:
                paths.append(renamed)
    maybe_increment_log_start_offset(log, new_start)
    log.pending_deletions.schedule(paths, now_ms + log.config.file_delete_delay_ms)
    result.log_start_offset = log.log_start_offset
    return result


def _rename_deleted(segment: LogSegment) -> list[Path]:
    segment.change_suffix(DELETED_SUFFIX)
    segment.close_handlers()
    candidates = (
        segment.log_path,
        segment.offset_index.path,
        segment.time_index.path,
        segment.txn_index.path,
    )
    return [path for path in candidates if path.exists()]


def _records_in(segment: LogSegment) -> int:
    return sum(batch.records_count for batch in segment.batches())
