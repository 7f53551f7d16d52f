"""What the sidecar sees of a local partition, read-only, beside the writer that appends to it.

The sidecar never opens a partition with the engine's loader (that recovers and writes); it uses
the data source's read-only view (``storage/log/readonly.py``): ``<base>.log`` segments opened with
``writable=False``, the last stable offset rebuilt from the newest producer snapshot plus a tail
scan, and the recovery point from the log dir's ``recovery-point-offset-checkpoint``.

A segment is *eligible* for upload (Kafka's ``RemoteLogManager.candidateLogSegments``) when it is
not the active (last) segment and its upper bound (the next segment's base offset) is at or
below both the last stable offset and the recovery point: closed, committed or aborted, and
flushed. The producer snapshot at that upper bound and the leader epochs in range go with it.
"""

from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass
from pathlib import Path

from kafkatier.storage.checkpoint.checkpoint_file import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    read_offsets_cached,
)
from kafkatier.storage.checkpoint.leader_epoch import LeaderEpochFileCache
from kafkatier.storage.config.internal_topics import partitions_on_disk
from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.config.topic_files import TopicConfigStore
from kafkatier.storage.errors import ConfigError, StorageError
from kafkatier.storage.log.bounds import scan_bounds
from kafkatier.storage.log.readonly import ReadOnlyPartition
from kafkatier.storage.log.segment import LogSegment
from kafkatier.storage.log.tail_cache import TailCache
from kafkatier.storage.producer.snapshot import snapshot_path
from kafkatier.tiering.metadata.identity import RemotePartition, topic_id_of

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as src:
        while block := src.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class Candidate:
    """A closed segment and the local files that describe it (module docstring)."""

    segment: LogSegment
    next_base: int

    @property
    def base_offset(self) -> int:
        return self.segment.base_offset

    def files(self) -> dict[str, Path]:
        """Object name -> local path, for the files that exist (txnindex is optional)."""
        seg = self.segment
        paths = {
            "log": seg.log_path,
            "index": seg.offset_index.path,
            "timeindex": seg.time_index.path,
            "txnindex": seg.txn_index.path,
            "snapshot": snapshot_path(seg.directory, self.next_base),
        }
        return {kind: path for kind, path in paths.items() if path.exists()}


class LocalPartition:
    """A read-only view of one partition directory of one log dir (module docstring)."""

    def __init__(
        self, log_dir: Path, topic: str, partition: int, remote: RemotePartition | None = None,
        tails: TailCache | None = None,
    ) -> None:  # fmt: skip
        self.log_dir = Path(log_dir)
        self.tails = tails
        """What the last segments said, kept by a caller from pass to pass (the sidecar): each
        pass's last stable offset then frames only what was appended since the last."""
        self.topic = topic
        self.partition = partition
        self.view = ReadOnlyPartition(self.log_dir, topic, partition)
        self.directory = self.view.directory
        self.segments: list[LogSegment] = list(self.view.segments)
        """The segments at construction, oldest first; local retention removes from it."""
        self.config: LogConfig = TopicConfigStore(self.log_dir).get(topic)
        self.remote = remote or RemotePartition.of(topic, partition, self.topic_id())
        """Where this partition's remote data lives: its own topic id's folder unless the
        caller located it (``ManifestStore.locate``) in a store written before topic ids."""

    def close(self) -> None:
        self.view.close()

    def __enter__(self) -> LocalPartition:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def recovery_point(self) -> int:
        try:
            points = read_offsets_cached(self.log_dir / RECOVERY_POINT_CHECKPOINT)
        except (FileNotFoundError, StorageError):
            return 0
        return points.get((self.topic, self.partition), 0)

    def log_start_offset(self) -> int:
        """The partition's log start offset as the writer checkpointed it (DeleteRecords, its
        own retention), 0 without an entry. Deliberately not the first local segment's base:
        local retention moves only the local start, and the log start offset in the manifest
        drives the expiry of remote copies."""
        try:
            starts = read_offsets_cached(self.log_dir / LOG_START_OFFSET_CHECKPOINT)
        except (FileNotFoundError, StorageError):
            return 0
        return starts.get((self.topic, self.partition), 0)

    def first_local_offset(self) -> int:
        """The first offset the local files hold: the first segment's base (the log end
        without one); below it, only the remote copy may hold records."""
        return self.segments[0].base_offset if self.segments else self.log_end_offset()

    def last_stable_offset(self) -> int:
        return scan_bounds(self.view, committed=True, tails=self.tails).last_stable

    def log_end_offset(self) -> int:
        return self.view.log_end_offset()

    def candidates(self) -> list[Candidate]:
        """Eligible segments, oldest first (module docstring)."""
        segs = self.segments
        if len(segs) < 2:
            return []
        bound = min(self.last_stable_offset(), self.recovery_point())
        found: list[Candidate] = []
        for seg, following in itertools.pairwise(segs):
            if following.base_offset > bound:
                break
            found.append(Candidate(seg, following.base_offset))
        return found

    def leader_epochs(self, start: int, end: int) -> list[tuple[int, int]]:
        """Leader-epoch entries covering offsets [start, end) (empty without a checkpoint)."""
        path = self.directory / LEADER_EPOCH_CHECKPOINT
        if not path.exists():
            return []
        return [(e, o) for e, o in LeaderEpochFileCache(path).entries_in_range(start, end)]

    def topic_overrides(self) -> dict[str, str]:
        return TopicConfigStore(self.log_dir).stored(self.topic)

    def recorded_partitions(self) -> int | None:
        """The topic's partition count recorded in the log dir (None: not recorded)."""
        return TopicConfigStore(self.log_dir).recorded_partitions(self.topic, self.topic_id())

    def topic_id(self) -> str:
        return topic_id_of(self.directory)


def local_partitions(log_dirs: list[Path]) -> list[tuple[Path, str, int]]:
    """(log dir, topic, partition) of every live partition directory under ``log_dirs``; a
    partition in two of them is an error, as Kafka's ``LogManager`` refuses to start on one
    ("Duplicate log directories for ..."): which is the partition is not for us to guess."""
    found: list[tuple[Path, str, int]] = []
    where: dict[tuple[str, int], Path] = {}
    for log_dir in log_dirs:
        if not Path(log_dir).is_dir():
            continue
        for topic, partitions in partitions_on_disk(Path(log_dir)).items():
            for partition, directory in partitions.items():
                if (other := where.setdefault((topic, partition), directory)) != directory:
                    raise ConfigError(
                        f"partition {topic}-{partition} is in two log dirs: {other} and "
                        f"{directory} (delete or move one of them)", setting="log.dirs")
                found.append((Path(log_dir), topic, partition))
    return found
