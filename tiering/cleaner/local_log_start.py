"""The local side of a log start offset moved by total retention or DeleteRecords.

As Kafka's ``UnifiedLog.maybeIncrementLogStartOffset`` followed by
``deleteLogStartOffsetBreachedSegments``, on the files of a partition the sidecar does not own:

1. the log dir's ``recovery-point-offset-checkpoint`` is raised to the new start (first: a
   checkpointed log start above the recovery point would be inconsistent), then its
   ``log-start-offset-checkpoint`` (Kafka checkpoints the log start of every remote-enabled log,
   even below its first local segment); both only ever move up;
2. the partition's ``leader-epoch-checkpoint`` is truncated from the start (the entry covering
   the new start moves up to it);
3. local segments wholly below the new start go, uploaded or not, as local retention deletes
   (``.deleted`` renames, then unlinks, then the producer snapshots below the first segment).

Producer state has nothing on disk to truncate: a loader replays snapshots from the log start,
which drops producers whose last offset lies below it.

A writer process (the Spark sink, a ``LogDirectory``) may rewrite the same checkpoint files at
any moment, each through ``<name>.tmp``. The sidecar must never write that same temporary file,
so it stages its version under a name of its own and renames it over the checkpoint, and only
if the checkpoint did not change since it was read (else it retries). A writer's later
checkpoint can still lower the entry again from its stale memory; each pass raises it back, and
for readers the files decide anyway, since the segments below the start are gone.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kafkatier.storage.checkpoint.checkpoint_file import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    OffsetCheckpointFile,
)
from kafkatier.storage.checkpoint.leader_epoch import LeaderEpochFileCache
from kafkatier.storage.errors import CheckpointError
from kafkatier.storage.log.segment import LogSegment
from kafkatier.tiering.copy.local_retention import delete_local
from kafkatier.tiering.crash import crash_point
from kafkatier.tiering.metadata.local import LEADER_EPOCH_CHECKPOINT, LocalPartition

log = logging.getLogger("kafkatier.tiering")
STAGING_SUFFIX = ".kafkatier-sidecar"
"""Staged checkpoint versions: ``<checkpoint>.<random>.kafkatier-sidecar``."""
RACE_RETRIES = 5
STAGING_GRACE_S = 60.0


@dataclass
class LocalStartMove:
    """What moving a local partition's log start did."""

    log_start_offset: int
    checkpoints_written: int = 0
    segments_deleted: int = 0
    bytes_deleted: int = 0


def align_local_start(part: LocalPartition, log_start: int) -> LocalStartMove:
    """Move ``part``'s log start up to ``log_start`` (module docstring); never down."""
    moved = LocalStartMove(log_start)
    if log_start <= 0 or not part.segments:
        return moved
    end = part.segments[0].base_offset  # cheap bound first; the log end costs a tail scan
    if log_start > end:
        end = part.log_end_offset()
    if log_start > end:  # the local log is behind the remote one (recreated?): leave it be
        log.warning("%s-%d: log start %d is beyond the local log end %d; local files left",
                    part.topic, part.partition, log_start, end)
        return moved
    remove_staged_leftovers(part.log_dir)
    remove_staged_leftovers(part.directory)
    crash_point("before-local-checkpoint")
    tp = (part.topic, part.partition)
    for name in (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT):
        moved.checkpoints_written += _raise_offset(part.log_dir / name, tp, log_start)
    moved.checkpoints_written += _truncate_epochs(part.directory, log_start)
    crash_point("after-local-checkpoint")
    doomed = start_breached(part.segments, log_start)
    moved.segments_deleted = len(doomed)
    moved.bytes_deleted = delete_local(part, doomed)
    return moved


def start_breached(segments: list[LogSegment], log_start: int) -> list[LogSegment]:
    """The oldest segments wholly below ``log_start`` (never the last, the active one)."""
    found: list[LogSegment] = []
    for seg, following in itertools.pairwise(segments):
        if following.base_offset > log_start:
            break
        found.append(seg)
    return found


def _raise_offset(path: Path, tp: tuple[str, int], offset: int) -> int:
    def change(staged: Path) -> bool:
        file = OffsetCheckpointFile(staged)
        offsets = file.read()
        if offsets.get(tp, -1) >= offset:
            return False
        offsets[tp] = offset
        file.write(offsets)
        return True

    return _rewrite(path, change)


def _truncate_epochs(directory: Path, log_start: int) -> int:
    def change(staged: Path) -> bool:
        if not staged.exists():
            return False
        cache = LeaderEpochFileCache(staged)
        if not cache.truncate_from_start(log_start):
            return False
        cache.flush()
        return True

    return _rewrite(directory / LEADER_EPOCH_CHECKPOINT, change)


def _rewrite(path: Path, change: Callable[[Path], bool]) -> int:
    """Apply ``change`` to a private copy of ``path`` and rename it over ``path`` if ``path``
    still holds what was copied; 1 if written, 0 if nothing changed."""
    for _ in range(RACE_RETRIES):
        before = path.read_bytes() if path.exists() else None
        staged = path.with_name(f"{path.name}.{uuid.uuid4().hex[:12]}{STAGING_SUFFIX}")
        try:
            if before is not None:
                staged.write_bytes(before)
            if not change(staged):
                return 0
            now = path.read_bytes() if path.exists() else None
            if now == before:
                os.replace(staged, path)
                return 1
        finally:
            with contextlib.suppress(FileNotFoundError):
                staged.unlink()
    raise CheckpointError("kept changing under the sidecar", file=str(path))


def remove_staged_leftovers(directory: Path, *, older_than_s: float = STAGING_GRACE_S) -> int:
    """Staged copies a killed sidecar left behind (they never replaced anything); younger ones
    may belong to a sidecar still running."""
    removed = 0
    for path in directory.glob(f"*{STAGING_SUFFIX}"):
        with contextlib.suppress(FileNotFoundError):
            if time.time() - path.stat().st_mtime >= older_than_s:
                path.unlink()
                removed += 1
    return removed

