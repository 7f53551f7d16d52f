"""Topics only the remote store holds, served as a log dir would serve them with no segment left.

A topic whose log dir is gone (another machine, a wiped disk, a new container beside the
bucket) still has its remote copy, and Kafka's tiered storage serves such data to any consumer.
So does this server: every :data:`REFRESH_S` seconds (at most; when the catalog is asked) it
lists the store's topics that no log dir holds (one delimiter LIST of the root, one per such
topic folder, a GET of each of their partitions' manifests, and of the producer snapshot of a
partition whose remote end moved) and mirrors each into a
private scratch log dir outside the real ones: a partition directory holding only its
``partition.metadata`` (the remote topic id), ``leader-epoch-checkpoint`` (its segments'
leader epochs) and the producer snapshot of its last remote segment, and the scratch dir's
``log-start-offset-checkpoint`` at the remote end offset.
Every read path then sees what it sees for a local partition whose segments local retention all
deleted: no local batch, a log start lowered to the remote one, fetches, offsets by time and
aborted transactions read from the store. Nothing is written to the real log dirs.

A topic any log dir holds is never mirrored (its own directories say which incarnation it is).
A topic the store holds under several topic ids (deleted and created again) is not served, with
a warning naming them: there is no log dir to say which one is meant. A store that cannot be
listed keeps the last mirror and logs one warning per refresh.
"""

from __future__ import annotations

import logging
import math
import shutil
import tempfile
import threading
import time
import weakref
from collections.abc import Collection
from pathlib import Path

from kafkatier.storage.checkpoint.checkpoint_file import (
    LOG_START_OFFSET_CHECKPOINT,
    OffsetCheckpointFile,
)
from kafkatier.storage.checkpoint.leader_epoch import LEADER_EPOCH_CHECKPOINT, LeaderEpochFileCache
from kafkatier.storage.checkpoint.metadata import PartitionMetadataFile, partition_dir_name
from kafkatier.storage.fsutil import atomic_write
from kafkatier.storage.producer.snapshot import SNAPSHOT_SUFFIX
from kafkatier.storage.wire import segment_file_name
from kafkatier.tiering.errors import TopicIdMismatchError
from kafkatier.tiering.metadata.manifest import object_key
from kafkatier.tiering.metadata.manifest_store import ManifestCache, ManifestStore
from kafkatier.tiering.read.incarnation import choose
from kafkatier.tiering.store.object_store import ObjectStore

REFRESH_S = 30.0
log = logging.getLogger("kafkatier.serve")

Mirrored = tuple[str, int, tuple[tuple[int, int], ...]]
"""A mirrored partition: (topic id, remote end offset, leader epochs as (epoch, start))."""


class RemoteTopics:
    """The scratch log dir mirroring the remote-only topics (module docstring)."""

    def __init__(self, store: ObjectStore, refresh_s: float = REFRESH_S) -> None:
        self.store = store
        self.refresh_s = refresh_s
        self.directory = Path(tempfile.mkdtemp(prefix="kafkatier-serve-remote-"))
        weakref.finalize(self, shutil.rmtree, self.directory, True)  # gone with the server
        self._lock = threading.Lock()
        self._synced = -math.inf
        self._mirrored: dict[tuple[str, int], Mirrored] = {}

    def sync(self, local_topics: Collection[str]) -> None:
        """Mirror the remote-only topics again if the last time is :attr:`refresh_s` old; one
        caller does it, the others go on with the mirror as it is."""
        if time.monotonic() - self._synced < self.refresh_s:
            return
        if not self._lock.acquire(blocking=False):
            return
        try:
            wanted, snapshots = self._wanted(set(local_topics))
            if wanted != self._mirrored:
                self._write(wanted, snapshots)
        except Exception as exc:  # the store is away: keep the last mirror
            log.warning("remote store %s: cannot list the topics only it holds: %s: %s",
                        self.store.url, type(exc).__name__, exc)  # fmt: skip
        finally:
            self._synced = time.monotonic()
            self._lock.release()

    def _wanted(
        self, local_topics: set[str]
    ) -> tuple[dict[tuple[str, int], Mirrored], dict[tuple[str, int], bytes]]:
        """The partitions to mirror, and the producer snapshots of those whose entry changed."""
        manifests = ManifestStore(self.store, cache=ManifestCache())  # listing reads them once
        remote = manifests.partitions(exclude_topics=local_topics)
        wanted: dict[tuple[str, int], Mirrored] = {}
        snapshots: dict[tuple[str, int], bytes] = {}
        for topic in sorted({rp.topic for rp in remote}):
            try:
                chosen = choose(remote, topic, hint="serve it from a log dir that holds it")
            except TopicIdMismatchError as exc:
                log.warning("remote-only topic %s not served: %s", topic, exc)
                continue
            for rp in chosen:
                manifest = manifests.load(rp)[0]
                if finished := manifest.finished():
                    epochs = tuple(e for segment in finished for e in segment.leader_epochs)
                    entry = (rp.topic_id, manifest.highest_offset + 1, epochs)
                    key = (topic, rp.partition)
                    wanted[key] = entry
                    last = finished[-1]
                    if self._mirrored.get(key) != entry and "snapshot" in last.files:
                        snapshots[key] = self.store.get_bytes(object_key(rp, last, "snapshot"))
        return wanted, snapshots

    def _write(
        self, wanted: dict[tuple[str, int], Mirrored], snapshots: dict[tuple[str, int], bytes]
    ) -> None:
        """The scratch dir as ``wanted`` says: gone partitions first, then the changed ones,
        then the log starts (each file replaced whole, so a reader sees one or the other)."""
        for topic, partition in set(self._mirrored) - set(wanted):
            shutil.rmtree(self.directory / partition_dir_name(topic, partition), True)
        for (topic, partition), entry in wanted.items():
            if self._mirrored.get((topic, partition)) != entry:
                _mirror_partition(self.directory / partition_dir_name(topic, partition), entry,
                                  snapshots.get((topic, partition)))  # fmt: skip
        starts = {key: end for key, (_, end, _) in sorted(wanted.items())}
        OffsetCheckpointFile(self.directory / LOG_START_OFFSET_CHECKPOINT).write(starts,
                                                                               sync=False)
        self._mirrored = wanted


def _mirror_partition(directory: Path, entry: Mirrored, snapshot: bytes | None) -> None:
    """The partition's files: topic id, leader epochs, and the producer snapshot uploaded with
    its last remote segment (taken at the remote end: the transactions still open there keep
    the last stable offset below them, as on the log dir that wrote it)."""
    topic_id, end, epochs = entry
    directory.mkdir(exist_ok=True)
    for old in directory.glob("*" + SNAPSHOT_SUFFIX):
        old.unlink(missing_ok=True)
    if snapshot is not None:
        atomic_write(directory / segment_file_name(end, SNAPSHOT_SUFFIX), snapshot, sync=False)
    if topic_id:  # a manifest of the layout before topic ids: the catalog derives one
        PartitionMetadataFile(directory / "partition.metadata").write(topic_id, sync=False)
    staged = directory / (LEADER_EPOCH_CHECKPOINT + ".new")  # replaced whole: see _write
    staged.unlink(missing_ok=True)
    cache = LeaderEpochFileCache(staged)
    cache.assign_all(epochs)
    cache.flush(sync=False)  # written even with no entry: a partition of epoch 0
    staged.replace(directory / LEADER_EPOCH_CHECKPOINT)
