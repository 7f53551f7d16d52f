"""Leader epochs as this server reports them: each partition's ``leader-epoch-checkpoint``.

Every batch carries the leader epoch it was appended in (the sink and ``kafkatier produce`` stamp
their log's epoch; a Kafka-written log carries its brokers'), and the checkpoint says where each
epoch began. Clients that see a leader epoch in Metadata use it (KIP-320): they send it back as
``current_leader_epoch`` in Fetch and ListOffsets, and they validate a position (after a leader
change, or when resuming from a committed offset with its epoch) with OffsetForLeaderEpoch,
which detects a log that was truncated under them. So the answers follow Kafka's
``LeaderEpochFileCache.endOffsetFor`` and its fencing: a ``current_leader_epoch`` above this
partition's is UNKNOWN_LEADER_EPOCH (the client knows a newer leader), below it
FENCED_LEADER_EPOCH (the client's metadata is stale), -1 is not checked.

A partition without a checkpoint, or with an empty one (no data yet; a log Kafka wrote before
epochs, magic 0 and 1), has one epoch, 0, from its start: a Kafka broker's partition always has a
leader epoch, and librdkafka sends 0 as ``current_leader_epoch`` even when Metadata said -1. The
parsed checkpoint is kept per file identity (inode, size,
mtime), so a fetch costs one ``stat`` a partition; writers replace the file by rename.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path

from kio.schema.errors import ErrorCode

from kafkatier.storage.checkpoint.leader_epoch import (
    LEADER_EPOCH_CHECKPOINT,
    UNDEFINED_EPOCH,
    LeaderEpochFileCache,
)
from kafkatier.storage.errors import KafkaTierError
from kafkatier.storage.fsutil import FileVersion, file_version

MAX_CACHED = 8192
FIRST_EPOCH = 0


class EpochCaches:
    """Parsed ``leader-epoch-checkpoint`` files by partition directory (module docstring)."""

    def __init__(self) -> None:
        self._cached: OrderedDict[Path, tuple[FileVersion, LeaderEpochFileCache | None]]
        self._cached = OrderedDict()
        self._lock = threading.Lock()

    def cache(self, log_dir: Path, topic: str, partition: int) -> LeaderEpochFileCache | None:
        """The partition's epochs now, or None without a readable checkpoint."""
        path = log_dir / f"{topic}-{partition}" / LEADER_EPOCH_CHECKPOINT
        try:
            key = file_version(path)
        except OSError:  # a partition directory we may not read: no epoch either
            key = None
        if key is None:
            return None
        with self._lock:
            found = self._cached.get(path)
            if found is not None and found[0] == key:
                self._cached.move_to_end(path)
                return found[1]
        try:
            parsed: LeaderEpochFileCache | None = LeaderEpochFileCache(path)
        except (OSError, KafkaTierError):
            parsed = None  # replaced or half-written under us: no epoch this time
        with self._lock:
            self._cached[path] = (key, parsed)
            while len(self._cached) > MAX_CACHED:
                self._cached.popitem(last=False)
        return parsed

    def _epochs(self, log_dir: Path, topic: str, partition: int) -> LeaderEpochFileCache | None:
        """The checkpoint's epochs, or None for the one epoch 0 (module docstring)."""
        found = self.cache(log_dir, topic, partition)
        return None if found is None or found.latest_epoch is None else found

    def current(self, log_dir: Path, topic: str, partition: int) -> int:
        """The partition's leader epoch: its latest."""
        found = self._epochs(log_dir, topic, partition)
        latest = None if found is None else found.latest_epoch
        return FIRST_EPOCH if latest is None else latest

    def for_offset(self, log_dir: Path, topic: str, partition: int, offset: int) -> int:
        """The epoch ``offset`` was written in (-1 for no offset, or one below every epoch)."""
        found = self._epochs(log_dir, topic, partition)
        if offset < 0:
            return UNDEFINED_EPOCH
        epoch = FIRST_EPOCH if found is None else found.epoch_for_offset(offset)
        return UNDEFINED_EPOCH if epoch is None else epoch

    def fencing(self, log_dir: Path, topic: str, partition: int, current_leader_epoch: int) -> (
        ErrorCode
    ):
        """Kafka's check of a request's ``current_leader_epoch`` against the partition's."""
        if current_leader_epoch == UNDEFINED_EPOCH:
            return ErrorCode.none
        mine = self.current(log_dir, topic, partition)
        if current_leader_epoch > mine:
            return ErrorCode.unknown_leader_epoch
        if current_leader_epoch < mine:
            return ErrorCode.fenced_leader_epoch
        return ErrorCode.none

    def end_offset_for(
        self, log_dir: Path, topic: str, partition: int, epoch: int, log_end: int
    ) -> tuple[int, int]:
        """(epoch, end offset) as Kafka's ``UnifiedLog.endOffsetForEpoch``: (-1, -1) for an
        epoch above every known one (or -1)."""
        found = self._epochs(log_dir, topic, partition)
        if found is None:
            return (FIRST_EPOCH, log_end) if epoch == FIRST_EPOCH else (UNDEFINED_EPOCH, -1)
        found_epoch, offset = found.end_offset_for(epoch, log_end)
        return (UNDEFINED_EPOCH, -1) if offset == -1 else (found_epoch, offset)
