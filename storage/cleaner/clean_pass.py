"""One cleaning pass over a log directory: retention, then compaction, per partition.

What ``kafkatier clean`` runs. A broker does the same work in two background threads (the
retention check every ``log.retention.check.interval.ms`` and the log cleaner); kafkatier runs
them once, in that order per partition, so data about to expire is not compacted first. The
cleaner's progress (the first dirty offset) is kept in the log dir's ``cleaner-offset-checkpoint``
through :attr:`LogDirectory.cleaner_offsets`; the checkpoints are written at the end of the pass.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from kafkatier.storage.cleaner.retention import delete_old_segments
from kafkatier.storage.errors import KafkaTierError, LogWriteError
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.log import Log


class CompactionOutcome(Protocol):
    """What the pass needs from the cleaner's ``CompactionResult``."""

    @property
    def cleaned(self) -> bool: ...

    @property
    def end_offset(self) -> int: ...

    @property
    def records_removed(self) -> int: ...

    @property
    def tombstones_kept(self) -> int: ...

    @property
    def tombstones_dropped(self) -> int: ...


class Compactor(Protocol):
    """``kafkatier.storage.cleaner.compact.compact_log``."""

    def __call__(self, log: Log, *, now_ms: int, first_dirty_offset: int) -> CompactionOutcome: ...


COMPACTION_OFF = "off"  # cleanup.policy without compact
COMPACTION_DONE = "cleaned"
COMPACTION_NOT_NEEDED = "not needed"  # below min.cleanable.dirty.ratio, lag not reached, ...
COMPACTION_UNAVAILABLE = "not available"  # the cleaner module is missing


@dataclass
class PartitionSummary:
    """One partition's pass: sizes, what went, and where the log now starts."""

    topic: str
    partition: int
    cleanup_policy: str
    bytes_before: int
    bytes_after: int
    segments_deleted: int
    records_removed: int
    tombstones_kept: int
    tombstones_dropped: int
    log_start_before: int
    log_start_after: int
    compaction: str
    error: str | None = None  # the partition could not be cleaned (the pass went on)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def uncleanable(cls, log: Log, error: Exception) -> PartitionSummary:
        """A partition the pass left as it was, with the error that stopped it."""
        size, start = log.size_in_bytes, log.log_start_offset
        return cls(log.topic, log.partition, ",".join(log.config.cleanup_policy), size, size, 0,
                   0, 0, 0, start, start, "error", str(error))  # fmt: skip


def clean_partition(
    log_dir: LogDirectory, log: Log, *, now_ms: int, compactor: Compactor | None
) -> PartitionSummary:
    tp = (log.topic, log.partition)
    bytes_before, start_before = log.size_in_bytes, log.log_start_offset
    retention = delete_old_segments(log, now_ms=now_ms)
    summary = PartitionSummary(
        log.topic, log.partition, ",".join(log.config.cleanup_policy), bytes_before, 0,
        retention.segments_deleted, retention.records_deleted, 0, 0, start_before, 0,
        COMPACTION_OFF,
    )  # fmt: skip
    if log.config.is_compacted:
        if compactor is None:
            summary.compaction = COMPACTION_UNAVAILABLE
        else:
            result = compactor(
                log, now_ms=now_ms, first_dirty_offset=log_dir.first_dirty_offset(tp)
            )
            if result.cleaned:
                log_dir.cleaner_offsets[tp] = result.end_offset
            summary.compaction = COMPACTION_DONE if result.cleaned else COMPACTION_NOT_NEEDED
            summary.records_removed += result.records_removed
            summary.tombstones_kept = result.tombstones_kept
            summary.tombstones_dropped = result.tombstones_dropped
    log.pending_deletions.run(now_ms)
    summary.bytes_after = log.size_in_bytes
    summary.log_start_after = log.log_start_offset
    return summary


def clean_log_dir(
    log_dir: LogDirectory,
    *,
    now_ms: int,
    compactor: Compactor | None,
    topics: Iterable[str] | None = None,
) -> list[PartitionSummary]:
    """Retention and compaction over every partition (or those of ``topics``), then the
    checkpoints (recovery points, log start offsets, cleaner offsets).

    A partition that fails on its content (a corrupt batch, a bad snapshot) is left as it was
    and the pass goes on with the others, as Kafka's cleaner marks such a partition
    uncleanable and goes on; a write the filesystem refuses (:class:`LogWriteError`: a full
    disk) ends the pass, as Kafka takes such a log dir offline."""
    wanted = None if topics is None else set(topics)
    summaries = []
    for tp, log in sorted(log_dir.logs.items()):
        if wanted is not None and tp[0] not in wanted:
            continue
        try:
            summaries.append(clean_partition(log_dir, log, now_ms=now_ms, compactor=compactor))
        except LogWriteError:
            raise
        except KafkaTierError as exc:  # its log stays consistent (compact.py, retention.py)
            summaries.append(PartitionSummary.uncleanable(log, exc))
    log_dir.checkpoint()
    return summaries


def total(summaries: Iterable[PartitionSummary]) -> dict[str, int]:
    """Sums over partitions, for the pass's last summary line."""
    fields = ("bytes_before", "bytes_after", "segments_deleted", "records_removed",
              "tombstones_kept", "tombstones_dropped")  # fmt: skip
    rows = list(summaries)
    out = {"partitions": len(rows)}
    for name in fields:
        out[name] = sum(getattr(row, name) for row in rows)
    return out
