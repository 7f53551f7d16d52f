"""The topics a server offers: every live ``<topic>-<partition>`` directory of the log dirs, and,
with a remote store, the topics only the store holds (``remote_topics``).

A topic's id is the one its partitions' ``partition.metadata`` holds (Kafka's file, written by
every kafkatier writer and by Kafka 2.8+). A log dir written before topic ids existed (Kafka
2.7 and older) has none; such a topic gets a stable id derived from its name (UUID v5), so
clients that fetch by topic id (Fetch v13+) can still name it. A log dir's listing is kept
while the directory keeps its inode and mtime (:class:`Listings`: a ``stat`` a log dir a lookup,
where listing it again at every request made each one cost what the log dir holds: a Fetch of
one partition took 10.80 ms beside 3,000 others against 0.58 beside 8, ``bench/serve_scale.py``'s
*one at end*, now 0.64 and 0.53): a topic created or deleted changes that mtime, so it appears
or goes without a restart. A topic id read once is
kept while its ``partition.metadata`` keeps its inode and mtime (a ``stat`` per topic, not a
read).
KRaft's ``__cluster_metadata`` is the controller's log, not a topic, and is left out, as Kafka
leaves it out of Metadata.
"""

from __future__ import annotations

import os
import time
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
        self._listings = Listings()
        self._merged: dict[tuple[Path, ...], tuple[list[Listing], dict[str, dict[int, Path]]]] = {}
        self._infos: dict[str, tuple[dict[int, Path], int, TopicInfo]] = {}
        self._counts: dict[tuple[Path, FileVersion, uuid.UUID], int | None] = {}

    def topics(self) -> dict[str, TopicInfo]:
        """Every topic, by name (the caller's dict; the listings and the infos are kept while
        nothing changed, so a lookup costs a ``stat`` a log dir and two a topic, not one a
        partition)."""
        found = self._listed(self.log_dirs)
        if self.remote_only is not None:
            self.remote_only.sync(found)
            mirrored = self._listed((self.remote_only.directory,))
            found = {**mirrored, **found}  # a log dir's topic is never mixed with a mirror
        infos: dict[str, TopicInfo] = {}
        kept: dict[str, tuple[dict[int, Path], int, TopicInfo]] = {}
        for topic, parts in sorted(found.items()):
            topic_id = self.topic_id(topic, parts)
            recorded = self._recorded(topic, parts, topic_id) or 0
            was = self._infos.get(topic)
            if was is not None and (was[0], was[1], was[2].topic_id) == (parts, recorded, topic_id):
                kept[topic] = was
            else:
                count = max(max(parts) + 1, recorded)
                kept[topic] = (parts, recorded, TopicInfo(topic, topic_id, dict(parts),
                                                          topic in INTERNAL_TOPICS, count))
            infos[topic] = kept[topic][2]
        self._infos = kept
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
        """Topic -> partition -> log dir (the first holding it), in partition order; the same
        dict (not to be changed) while no log dir's listing changed."""
        listings = [self._listings.of(log_dir) for log_dir in log_dirs]
        last = self._merged.get(log_dirs)
        if last is not None and all(a is b for a, b in zip(last[0], listings, strict=True)):
            return last[1]
        found: dict[str, dict[int, Path]] = {}
        for log_dir, listing in zip(log_dirs, listings, strict=True):
            for topic, partitions in listing.items():
                parts = found.setdefault(topic, {})
                for partition in partitions:
                    parts.setdefault(partition, log_dir)  # the first log dir's, as before
        found = {topic: dict(sorted(parts.items())) for topic, parts in found.items()}
        self._merged[log_dirs] = (listings, found)
        return found

    def partition_dir(self, topic: str, partition: int) -> Path | None:
        """The log dir holding ``topic``-``partition``, or None if no log dir has it."""
        for log_dir in self.log_dirs:
            if (log_dir / f"{topic}-{partition}").is_dir():
                return log_dir
        return None


    def topic_id(self, topic: str, partitions: dict[int, Path]) -> uuid.UUID:
        """The id in the first readable ``partition.metadata`` of ``partitions`` (in partition
        order, as :meth:`_listed` gives them; module docstring for the fallback and the
        cache)."""
        for partition, log_dir in partitions.items():
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


_NONE: Listing = {}
"""A log dir that is not there (one object, so a merge of listings stays kept)."""
RACY_NS = 1_000_000_000
"""How long after a directory's mtime a listing of it is trusted to hold every change with that
mtime: a file system stamps a directory from a coarse clock (a jiffy, or a second on some), so
an entry made in the same tick as the listing, after it, leaves the mtime as it was; a listing
taken within this of its mtime is taken again at the next lookup (as git treats a "racily
clean" index entry)."""


Listing = dict[str, list[int]]
"""A log dir's live partition numbers by topic."""


class Listings:
    """Each log dir's live partitions by topic (not those of a topic being created), kept while
    its ``stat`` says it has not changed since it was listed."""

    def __init__(self) -> None:
        self._kept: dict[Path, tuple[tuple[int, int], int, Listing]] = {}

    def of(self, log_dir: Path) -> Listing:
        try:
            st = os.stat(log_dir)
        except FileNotFoundError:
            self._kept.pop(log_dir, None)
            return _NONE
        version = (st.st_ino, st.st_mtime_ns)
        kept = self._kept.get(log_dir)
        if kept is not None and kept[0] == version and kept[1] - st.st_mtime_ns > RACY_NS:
            return kept[2]
        listed_at = time.time_ns()
        try:
            found = _partitions_of(log_dir)
        except FileNotFoundError:
            return _NONE
        self._kept[log_dir] = (version, listed_at, found)
        return found


def _partitions_of(log_dir: Path) -> Listing:
    with os.scandir(log_dir) as listing:
        entries = list(listing)
    creating = topics_being_created([e.name for e in entries])
    found: dict[str, list[int]] = {}
    for entry in entries:
        parsed = managed_partition(entry.name)
        if parsed is None or parsed[0] in creating:
            continue
        if entry.is_dir():  # the listing's file type: no stat a partition
            found.setdefault(parsed[0], []).append(parsed[1])
    return found
