"""Creating a topic's partitions: all of them or none, at the cost of the files they need.

A partition directory is born as ``<topic>-<partition>.<topic id>-delete`` (Kafka's name for a
directory it is deleting, which every reader here ignores and a broker finishing a deletion
removes) holding what a new partition needs before its first append: ``partition.metadata``
(the topic id), ``leader-epoch-checkpoint`` (epoch 0 from offset 0, as a broker writes when it
becomes the leader of a new partition, so the first append has no checkpoint to write) and the
empty first segment (``.log``, and ``.index``/``.timeindex`` of length 0, as a closed empty
segment has them). Then all of it is made durable: for many partitions on a filesystem whose
``syncfs`` is trusted, by one syncfs of the filesystem (``LogDirectory``), else by fsyncs of the
two checkpoint files and each directory from parallel threads (the filesystem commits them
together); then the log dir is fsynced once, and only then are the directories renamed to their
live names (the log dir fsynced once more). So a partition costs its files (and one fsync of its
directory at its first flush, as any log opened), and its :class:`Log` needs no recovery and no
loading: it is known empty.

The first rename commits the creation. After a crash, the next :class:`LogDirectory` open runs
:func:`complete_interrupted_creations`: staged directories of a topic id that some live
partition already carries are renamed in (the creation had committed), the others are removed
(it had not). Readers listing partitions skip a topic with staged directories
(:func:`topics_being_created`), so a crash never shows part of a new topic.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Final, NamedTuple

from kafkatier.storage.checkpoint.leader_epoch import LEADER_EPOCH_CHECKPOINT, LeaderEpochFileCache
from kafkatier.storage.checkpoint.metadata import (
    PARTITION_METADATA_FILE,
    PartitionMetadataFile,
    parse_partition_dir_name,
    partition_dir_name,
    uuid_from_str,
)
from kafkatier.storage.errors import StorageError
from kafkatier.storage.fsutil import MAX_NAME_BYTES, fsync_dir, fsync_file, write_unseen
from kafkatier.storage.wire import segment_file_name

STAGED_SUFFIX: Final = "-delete"
_TOPIC_ID_LENGTH: Final = 22  # Kafka's own -delete directories carry a 32-character hex id
_CREATE_EMPTY: Final = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
TopicPartition = tuple[str, int]


class Staged(NamedTuple):
    """What a staged directory's name says: its topic (only the first characters of a long
    name, ``cut``), partition and topic id."""

    topic: str
    partition: int
    topic_id: str
    cut: bool

    def of(self, topic: str) -> bool:
        """Whether this staged directory may be ``topic``'s."""
        return topic == self.topic or (self.cut and topic.startswith(self.topic))


def staged_dir_name(topic: str, partition: int, topic_id: str) -> str:
    """``<topic>-<partition>.<topic id>-delete``, the topic cut to fit a file name's 255
    bytes, as Kafka cuts its own (``LocalLog.logDeleteDirName``): a 249-character topic name
    is valid."""
    suffix = f"-{partition}.{topic_id}{STAGED_SUFFIX}"
    return topic[: MAX_NAME_BYTES - len(suffix)] + suffix


def parse_staged_dir_name(name: str) -> Staged | None:
    """What a staged partition directory's name says; None for anything else (Kafka's own
    ``-delete`` directories included)."""
    if not name.endswith(STAGED_SUFFIX):
        return None
    live, dot, topic_id = name[: -len(STAGED_SUFFIX)].rpartition(".")
    parsed = parse_partition_dir_name(live) if dot else None
    if parsed is None or len(topic_id) != _TOPIC_ID_LENGTH:
        return None
    try:
        uuid_from_str(topic_id)
    except ValueError:
        return None
    return Staged(parsed[0], parsed[1], topic_id, cut=len(name) == MAX_NAME_BYTES)


def stage_partition(log_dir: Path, tp: TopicPartition, topic_id: str, *, sync: bool = True) -> Path:
    """The staged directory of ``tp`` with its files, durable unless ``sync`` is False (the
    caller then makes the whole filesystem durable before :func:`commit_staged`); returns its
    path."""
    staged = log_dir / staged_dir_name(*tp, topic_id)
    staged.mkdir(exist_ok=True)
    for ext in (".log", ".index", ".timeindex"):
        os.close(os.open(staged / segment_file_name(0, ext), _CREATE_EMPTY, 0o644))
    metadata = PartitionMetadataFile(staged / PARTITION_METADATA_FILE)
    write_unseen(metadata.path, metadata.encode(topic_id), sync=sync)
    epochs = LeaderEpochFileCache.of_new_partition(staged / LEADER_EPOCH_CHECKPOINT)
    write_unseen(epochs.path, epochs.encode(), sync=sync)
    if sync:
        fsync_dir(staged)
    return staged


def sync_staged(staged: Path) -> None:
    """Make a directory staged with ``sync=False`` durable: what :func:`stage_partition` fsyncs."""
    fsync_file(staged / PARTITION_METADATA_FILE)
    fsync_file(staged / LEADER_EPOCH_CHECKPOINT)
    fsync_dir(staged)


def commit_staged(log_dir: Path, staged: dict[TopicPartition, Path]) -> None:
    """Make the staged directories' names durable, rename them live, make that durable."""
    fsync_dir(log_dir)
    for tp, path in staged.items():
        path.rename(log_dir / partition_dir_name(*tp))
    fsync_dir(log_dir)


def complete_interrupted_creations(log_dir: Path) -> None:
    """Finish (some partition already live) or undo (none) every creation a crash interrupted."""
    groups: dict[tuple[str, str], list[tuple[Staged, Path]]] = {}
    for child in log_dir.iterdir():
        parsed = parse_staged_dir_name(child.name)
        if parsed is not None and child.is_dir():
            groups.setdefault((parsed.topic, parsed.topic_id), []).append((parsed, child))
    renamed = False
    for staged in groups.values():
        topic = _live_topic_of(log_dir, staged[0][0])
        for parsed, path in staged:
            live = None if topic is None else log_dir / partition_dir_name(topic, parsed.partition)
            if live is None or live.exists():
                shutil.rmtree(path)
            else:
                path.rename(live)
                renamed = True
    if renamed:
        fsync_dir(log_dir)


def _live_topic_of(log_dir: Path, staged: Staged) -> str | None:
    """The topic whose live partition directory holds the staged one's topic id (the
    creation had committed), or None."""
    for child in log_dir.iterdir():
        parsed = parse_partition_dir_name(child.name)
        if parsed is None or not staged.of(parsed[0]):
            continue
        try:
            if PartitionMetadataFile(child / PARTITION_METADATA_FILE).read() == staged.topic_id:
                return parsed[0]
        except (OSError, StorageError):
            continue
    return None


class Creating:
    """The topics with a staged partition directory in a log dir's listing: ``topic in``."""

    def __init__(self, names: Iterable[str]) -> None:
        self._staged = [s for s in map(parse_staged_dir_name, names) if s is not None]

    def __contains__(self, topic: object) -> bool:
        return isinstance(topic, str) and any(s.of(topic) for s in self._staged)


def topics_being_created(names: Iterable[str]) -> Creating:
    """The topics with a staged partition directory among ``names`` (a log dir's listing)."""
    return Creating(names)


INODES_PER_PARTITION: Final = 6  # its directory and the five files stage_partition writes
BYTES_PER_PARTITION: Final = 3 * 4096  # a directory's block and the two checkpoints'
MEMORY_PER_PARTITION: Final = 8 * 1024
"""An open partition's state in the process that created it, rounded up: the resident growth
of ``create_partitions`` was 5.8-7.3 KB a partition at 1,024 and 4,096 (``bench/
partition_footprint.py``, 2026-11-30), which also measures the two figures above."""


def check_room(log_dir: Path, topic: str, count: int) -> None:
    """Refuse, before anything is written, ``count`` new partitions of ``topic`` that the
    filesystem's free inodes or space, or this machine's available memory, cannot hold (a
    count of 2**31 was killed for memory, a large one can fill the inodes half-way)."""
    if count <= 0:
        return
    fs = os.statvfs(log_dir)
    root = os.geteuid() == 0  # root may use the blocks and inodes kept for it
    inodes, blocks = (fs.f_ffree, fs.f_bfree) if root else (fs.f_favail, fs.f_bavail)
    full = ": No space left on device (ENOSPC)"  # what the kernel would say half-way
    limits = [
        ("inodes", count * INODES_PER_PARTITION, inodes if fs.f_files else None, full),
        ("bytes of disk", count * BYTES_PER_PARTITION, blocks * fs.f_frsize, full),
        ("bytes of memory", count * MEMORY_PER_PARTITION, _available_memory(), ""),
    ]
    for what, needed, free, cause in limits:
        if free is not None and needed > free:
            raise StorageError(
                f"creating {count:,} partitions of topic {topic!r} in {log_dir} needs about "
                f"{needed:,} {what} and {free:,} are free{cause}; fix: free some, or ask "
                "for fewer partitions"
            )


def _available_memory() -> int | None:
    """``MemAvailable`` of ``/proc/meminfo`` in bytes (None where there is none)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None
