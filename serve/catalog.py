"""The topics a server offers: every live ``<topic>-<partition>`` directory of the log dirs, and,
with a remote store, the topics only the store holds (``remote_topics``).

A topic's id is the one its partitions' ``partition.metadata`` holds (Kafka's file, written by
every kafkatier writer and by Kafka 2.8+). A log dir written before topic ids existed (Kafka
2.7 and older) has none; such a topic gets a stable id derived from its name (UUID v5), so
clients that fetch by topic id (Fetch v13+) can still name it. Directories are listed again on
every lookup (a ``listdir`` per log dir): topics the sink creates appear without a restart. A
topic id read once is kept while its ``partition.metadata`` keeps its inode and mtime (a ``stat``
per topic, not a read).
KRaft's ``__cluster_metadata`` is the controller's log, not a topic, and is left out, as Kafka
leaves it out of Metadata.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kafkatier.storage.checkpoint.metadata import (
    PartitionMetadataFile,
    uuid_from_str,
    uuid_to_str,
)
from kafkatier.storage.config.internal_topics import INTERNAL_TOPICS, managed_partition
from kafkatier.storage.config.topic_files import TopicConfigStore
from kafkatier.storage.errors import KafkaTierError
from kafkatier.storage.fsutil import FileVersion, file_version
from kafkatier.storage.log.creation import topics_being_created

if TYPE_CHECKING:
    from kafkatier.serve.remote_topics import RemoteTopics

_NAMESPACE = uuid.UUID("6ba7b811-9dad-11d1-80b4-00c04fd430c8")  # RFC 4122's URL namespace


@dataclass(frozen=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, Path]  # partition -> its log dir
    internal: bool
    count: int
    """Its partition count: the one its file records (``topic_files``) or its highest + 1."""

    def offline(self, partition: int) -> bool:
        """A partition of the topic's count whose directory no log dir holds: listed
        offline, and, as Kafka answers for a replica whose log dir failed, KAFKA_STORAGE_ERROR
        to a read (clients retry it and look at the metadata again)."""
        return 0 <= partition < self.count and partition not in self.partitions


class Catalog:
    """Topics and partitions of ``log_dirs``, read from the directory listing on each call."""

    def __init__(self, log_dirs: tuple[Path, ...], remote_only: RemoteTopics | None = None) -> None:
        self.log_dirs = log_dirs
        self.remote_only = remote_only
        """The topics only the remote store holds, mirrored into a scratch log dir."""
        self._ids: dict[Path, tuple[tuple[int, int], uuid.UUID]] = {}
        self._counts: dict[tuple[Path, FileVersion, uuid.UUID], int | None] = {}

    def topics(self) -> dict[str, TopicInfo]:
        found = self._listed(self.log_dirs)
        if self.remote_only is not None:
            self.remote_only.sync(found)
            for topic, parts in self._listed((self.remote_only.directory,)).items():
                found.setdefault(topic, parts)  # a log dir's topic is never mixed with a mirror
        infos = {}
        for topic, parts in sorted(found.items()):
            topic_id = self.topic_id(topic, parts)
            count = max(max(parts) + 1, self._recorded(topic, parts, topic_id) or 0)
            infos[topic] = TopicInfo(topic, topic_id, dict(sorted(parts.items())),
                                     topic in INTERNAL_TOPICS, count)  # fmt: skip
        return infos

    def _recorded(self, topic: str, parts: dict[int, Path], topic_id: uuid.UUID) -> int | None:
        """The partition count the topic's file records for its id (a partition directory
        moved away is then listed offline, not left out); read again when the file changes
        (a ``stat`` a topic)."""
        store = TopicConfigStore(next(iter(parts.values())))
        path = store.path(topic)
        version = file_version(path)
        if version is None:
            return None
        key = (path, version, topic_id)
        if key not in self._counts:
            self._counts[key] = store.recorded_partitions(topic, uuid_to_str(topic_id.bytes))
        return self._counts[key]

    def _listed(self, log_dirs: tuple[Path, ...]) -> dict[str, dict[int, Path]]:
        found: dict[str, dict[int, Path]] = {}
        for log_dir in log_dirs:
            try:
                with os.scandir(log_dir) as listing:
                    entries = list(listing)
            except FileNotFoundError:
                continue
            creating = topics_being_created([e.name for e in entries])
            for entry in entries:
                parsed = managed_partition(entry.name)
                if parsed is None or parsed[0] in creating:
                    continue
                if entry.is_dir():  # the listing's file type: no stat a partition
                    found.setdefault(parsed[0], {}).setdefault(parsed[1], log_dir)
        return found

    def partition_dir(self, topic: str, partition: int) -> Path | None:
        """The log dir holding ``topic``-``partition``, or None if no log dir has it."""
        for log_dir in self.log_dirs:
            if (log_dir / f"{topic}-{partition}").is_dir():
                return log_dir
        return None


    def topic_id(self, topic: str, partitions: dict[int, Path]) -> uuid.UUID:
        """The id in the first readable ``partition.metadata`` (module docstring for the
        fallback and the cache)."""
        for partition, log_dir in sorted(partitions.items()):
            path = log_dir / f"{topic}-{partition}" / "partition.metadata"
            try:
                stat = path.stat()
                identity = (stat.st_ino, stat.st_mtime_ns)
                cached = self._ids.get(path)
                if cached is not None and cached[0] == identity:
                    return cached[1]
                found = uuid.UUID(bytes=uuid_from_str(PartitionMetadataFile(path).read()))
            except (FileNotFoundError, KafkaTierError):
                continue
            self._ids[path] = (identity, found)
            return found
        return uuid.uuid5(_NAMESPACE, f"kafkatier:{topic}")
