"""Which partitions a pass may pass over without opening them: the cost of an idle pass.

A long-running sidecar over thousands of partitions mostly finds nothing to do. After a pass
that left a partition with nothing pending (every closed segment uploaded, no orphan, no error),
this module remembers what that pass saw (:class:`Fingerprint`) and until when the verdict holds
without new data (:func:`next_due_ms`): the first instant at which a segment could pass
``local.retention.ms`` or ``retention.ms``, another owner's unfinished attempt could become an
orphan, or (compacted topics) a compaction lag or the tombstones' ``delete.retention.ms`` could
make cleaning worth a look. Later passes skip the partition while its fingerprint is unchanged
and that instant has not come: no file opened, no request sent.

What the fingerprint covers, and why that is enough:

* the partition directory's modification time: every roll, new producer snapshot, segment
  deletion or re-creation of the topic (a new directory) changes it;
* the partition's entries in the log dir's ``recovery-point-offset-checkpoint`` and
  ``log-start-offset-checkpoint`` (upload eligibility, DeleteRecords);
* the topic's config file (its modification time and size);
* the active segment's size, only where a size limit (``retention.bytes``,
  ``local.retention.bytes``) counts it.

Appends to the active segment alone change none of these and need no pass: the active segment is
never uploaded. What a fingerprint records is observed before the partition is opened, so a
change during the pass shows at the next one; a time stamp less than ``RACY_NS`` old when the
pass ends is not trusted (a second change within the file system's clock tick would keep it).
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from kafkatier.storage.checkpoint.checkpoint_file import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    OffsetCheckpointFile,
)
from kafkatier.storage.config.topic_files import TopicConfigStore
from kafkatier.storage.errors import StorageError
from kafkatier.tiering.metadata.local import LocalPartition
from kafkatier.tiering.metadata.manifest import PartitionManifest, SegmentState

NEVER = 1 << 62
RACY_NS = 1_000_000_000
COMPACTED_RECHECK_MS = 60 * 60 * 1000
"""Longest a quiet compacted partition goes unexamined (its lags are checked sooner)."""

PartitionKey = tuple[Path, str, int]


@dataclass(frozen=True)
class Fingerprint:
    """What a pass saw of a partition without opening it (module docstring)."""

    dir_mtime_ns: int
    recovery_point: int
    log_start: int
    config_stamp: tuple[int, int]
    active_size: int


@dataclass(frozen=True)
class _Verdict:
    fingerprint: Fingerprint
    tiered: bool
    due_ms: int
    active_log: Path | None
    sizes_count: bool


class LogDirCheckpoints:
    """One pass's reading of a log dir's checkpoint files (one read each per pass)."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.recovery = _read(log_dir / RECOVERY_POINT_CHECKPOINT)
        self.starts = _read(log_dir / LOG_START_OFFSET_CHECKPOINT)
        self.stamps: dict[str, tuple[int, int]] = {}
        self._configs = TopicConfigStore(log_dir)

    def config_stamp(self, topic: str) -> tuple[int, int]:
        """The topic config file's (mtime, size), stat'ed once per pass."""
        if topic not in self.stamps:
            self.stamps[topic] = _stamp(self._configs.path(topic))
        return self.stamps[topic]


class QuietPartitions:
    """The verdicts of the last pass per partition (module docstring); thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._verdicts: dict[PartitionKey, _Verdict] = {}

    def skip(self, key: PartitionKey, seen: LogDirCheckpoints, now_ms: int) -> bool | None:
        """None: examine the partition; else skip it (True: it is tiered, False: it is not)."""
        with self._lock:
            verdict = self._verdicts.get(key)
        if verdict is None or now_ms >= verdict.due_ms:
            return None
        found = _fingerprint(key, seen, verdict.active_log, verdict.sizes_count)
        return verdict.tiered if found == verdict.fingerprint else None

    def record(self, key: PartitionKey, seen: LogDirCheckpoints, observed: Fingerprint | None,
               part: LocalPartition, due_ms: int) -> None:  # fmt: skip
        """Remember a partition the pass left with nothing pending, quiet until ``due_ms``;
        ``observed``: :func:`observe` before it was opened (module docstring)."""
        cfg = part.config
        sizes = cfg.retention_bytes >= 0 or cfg.effective_local_retention_bytes >= 0
        active = part.segments[-1] if part.segments else None
        racy = time.time_ns() - RACY_NS
        if observed is None or max(observed.dir_mtime_ns, observed.config_stamp[0]) > racy:
            self.forget(key)
            return
        size = active.size if sizes and active is not None else 0
        verdict = _Verdict(dataclasses.replace(observed, active_size=size),
                           cfg.remote_storage_enable, due_ms,
                           active.log_path if active is not None else None, sizes)  # fmt: skip
        with self._lock:
            self._verdicts[key] = verdict

    def forget(self, key: PartitionKey) -> None:
        with self._lock:
            self._verdicts.pop(key, None)


def next_due_ms(
    part: LocalPartition, manifest: PartitionManifest, grace_ms: int, now_ms: int
) -> int:
    """The first instant at which time alone could give the partition something to do
    (module docstring); ``NEVER`` when only new data can."""
    cfg = part.config
    dues = [NEVER]
    closed = [s.max_timestamp for s in part.segments[:-1]]
    remote = [s.max_timestamp for s in manifest.finished()]
    for limit, stamps in ((cfg.effective_local_retention_ms, closed),
                          (cfg.retention_ms, closed + remote)):  # fmt: skip
        if limit >= 0:
            dues += [ts + limit + 1 for ts in stamps]
    dues += [s.updated_ms + grace_ms for s in manifest.segments
             if s.state is SegmentState.COPY_SEGMENT_STARTED]  # fmt: skip
    if cfg.is_compacted:
        lags = (cfg.min_compaction_lag_ms, cfg.max_compaction_lag_ms, cfg.delete_retention_ms)
        dues.append(now_ms + min([COMPACTED_RECHECK_MS, *(v for v in lags if v > 0)]))
    return min(dues)


def observe(key: PartitionKey, seen: LogDirCheckpoints) -> Fingerprint | None:
    """The fingerprint of a partition about to be opened (its active size filled in later)."""
    return _fingerprint(key, seen, None, False)


def _fingerprint(
    key: PartitionKey, seen: LogDirCheckpoints, active: Path | None, sizes_count: bool
) -> Fingerprint | None:
    log_dir, topic, partition = key
    try:
        mtime = os.stat(log_dir / f"{topic}-{partition}").st_mtime_ns
        size = os.stat(active).st_size if sizes_count and active is not None else 0
    except OSError:  # deleted, or rolled away since: examine it
        return None
    tp = (topic, partition)
    return Fingerprint(mtime, seen.recovery.get(tp, 0), seen.starts.get(tp, 0),
                       seen.config_stamp(topic), size)  # fmt: skip


def _read(path: Path) -> dict[tuple[str, int], int]:
    try:
        return OffsetCheckpointFile(path).read()
    except (FileNotFoundError, StorageError):
        return {}


def _stamp(path: Path) -> tuple[int, int]:
    try:
        st = os.stat(path)
    except OSError:
        return (0, 0)
    return (st.st_mtime_ns, st.st_size)
