"""Where each topic's configuration lives: one properties file per topic at the log-dir root.

Kafka keeps topic configs in its metadata log; kafkatier has no cluster, so it stores them beside
the data as ``<log dir>/kafkatier-topic.<topic>.properties``, Java properties with Kafka's names
(``segment.bytes``, ``cleanup.policy``, ``retention.ms`` ...), holding only the settings that differ
from Kafka's defaults. A file (not a directory) keeps the log dir loadable by a Kafka broker, which
only treats directories there as partitions. Every tool that opens the log dir (``produce``, the
Spark sink, ``clean``) resolves a topic's settings the same way: Kafka's defaults, then this file,
then per-run overrides, which :meth:`TopicConfigStore.update` validates and persists.

A topic's file outlives its partitions when a user deletes the topic by removing its partition
directories (Kafka deletes a topic's configs with it). So the file names, in its comment line, the
id of the topic it was created with (:meth:`TopicConfigStore.stamp`, when the partitions are
created); a stamped file without any partition of its topic on disk is that deleted topic's and is
dropped when the topic is created again (:meth:`TopicConfigStore.drop_stale`), which then starts
from its own settings: a recreated topic kept the old one's ``cleanup.policy``, timestamp type and
retention. A file written before its topic's first partition (settings given ahead) is unstamped,
and kept.

The stamp also records the topic's partition count (``# kafkatier topic configuration for T,
topic id ID, partitions N``), so every topic created gets a file, with no settings when it has no
overrides. Kafka keeps the count in its metadata; without it the count would be read from the
directories alone, and a partition directory gone missing (moved by hand, a partial restore)
would make writers place keys by a smaller count (``LogDirectory.partition_count`` refuses it).
"""

from __future__ import annotations

import functools
import glob
import re
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from kafkatier.storage.checkpoint.metadata import parse_partition_dir_name
from kafkatier.storage.config.internal_topics import INTERNAL_TOPIC_CONFIGS
from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.errors import ConfigError
from kafkatier.storage.fsutil import (
    ATOMIC_NAME_BYTES,
    FileVersion,
    atomic_write,
    file_version,
    fitted_name,
)
from kafkatier.storage.java_properties import format_properties, read_properties

FILE_PREFIX = "kafkatier-topic."
FILE_SUFFIX = ".properties"


class TopicConfigStore:
    """Reads and writes ``kafkatier-topic.<topic>.properties`` files in one log dir."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = Path(log_dir)

    def path(self, topic: str) -> Path:
        """``kafkatier-topic.<topic>.properties``; for a name too long for that (a topic
        name may have 249 characters, a file name 255 bytes with its temporary's suffix), the
        topic's first characters and a hash of the whole name (the first line names it)."""
        name = fitted_name(f"{FILE_PREFIX}{topic}", FILE_SUFFIX, room=ATOMIC_NAME_BYTES)
        return self.log_dir / name

    def stored(self, topic: str) -> dict[str, str]:
        """The topic's saved overrides ({} when it has none)."""
        path = self.path(topic)
        return _read(path) if path.exists() else {}

    def get(self, topic: str) -> LogConfig:
        """Kafka's defaults overlaid with the topic's file; errors name the file and setting.
        Parsed once per version of the file (``_parsed``): a reader opening thousands of
        partitions of a topic validates its settings once, not once per partition. An internal
        topic without a file has the settings Kafka creates it with (``internal_topics``)."""
        path = self.path(topic)
        version = file_version(path)
        if version is None and topic in INTERNAL_TOPIC_CONFIGS:
            return _internal(topic)
        return _parsed(str(path), version)

    def check(self, topic: str, overrides: Mapping[str, str], source: str) -> LogConfig:
        """What :meth:`update` would save, validated (errors as its), nothing written."""
        stored = {} if self._stale(topic) else self.stored(topic)
        config = LogConfig.from_properties({**stored, **overrides}, source=source)
        if stored and overrides:
            _check_turning_off(self.get(topic), config, source)  # get: parsed once a version
        return config

    def update(self, topic: str, overrides: Mapping[str, str], source: str) -> LogConfig:
        """Validate ``overrides`` on top of the stored settings (none where they are a deleted
        topic's: :meth:`drop_stale`), then persist them atomically."""
        stamp = self.drop_stale(topic)
        config = self.check(topic, overrides, source)
        if overrides:
            self._write(topic, config.to_properties(), stamp)
        return config

    def stamp(self, topic: str, topic_id: str, partitions: int | None) -> None:
        """Name ``topic_id`` and the partition count in the topic's file (written now if it
        has none; with no count, only in a file there is): its partitions were created."""
        stamp = _stamp_of(self.path(topic))
        if partitions is None and (stamp is not None or not self.path(topic).exists()):
            return
        if stamp != Stamp(topic_id, partitions):
            self._write(topic, self.stored(topic), Stamp(topic_id, partitions))

    def recorded_partitions(self, topic: str, topic_id: str) -> int | None:
        """The partition count stamped for ``topic_id`` (None: no file, another topic id's
        stamp, or one written before counts were recorded)."""
        stamp = _stamp_of(self.path(topic))
        return stamp.partitions if stamp is not None and stamp.topic_id == topic_id else None

    def drop_stale(self, topic: str) -> Stamp | None:
        """Delete the topic's file if it is a deleted topic's (module doc); the stamp the file
        kept (None: no file, or none stamped)."""
        stamp = _stamp_of(self.path(topic))
        if stamp is not None and not self._on_disk(topic):
            self.path(topic).unlink(missing_ok=True)
            return None
        return stamp

    def _stale(self, topic: str) -> bool:
        """Whether the topic's file is a deleted topic's (stamped, no partition on disk): what
        :meth:`drop_stale` would delete."""
        return _stamp_of(self.path(topic)) is not None and not self._on_disk(topic)

    def _on_disk(self, topic: str) -> bool:
        for path in self.log_dir.glob(f"{glob.escape(topic)}-*"):
            parsed = parse_partition_dir_name(path.name)
            if parsed is not None and parsed[0] == topic and path.is_dir():
                return True
        return False

    def _write(self, topic: str, props: Mapping[str, str], stamp: Stamp | None) -> None:
        comment = f"kafkatier topic configuration for {topic}"
        if stamp is not None:
            comment += f"{_STAMP}{stamp.topic_id}"
            if stamp.partitions is not None:
                comment += f"{_COUNT}{stamp.partitions}"
        atomic_write(self.path(topic), format_properties(props, comment=comment).encode("utf-8"))


class Stamp(NamedTuple):
    """What a topic's file records of the topic its partitions were created as."""

    topic_id: str
    partitions: int | None  # None: stamped before counts were recorded


_STAMP = ", topic id "
_COUNT = ", partitions "
_STAMPED = re.compile(
    re.escape(_STAMP) + r"([A-Za-z0-9_-]{22})(?:" + re.escape(_COUNT) + r"([0-9]{1,10}))?\s*$"
)


def _check_turning_off(before: LogConfig, after: LogConfig, source: str) -> None:
    """Kafka 3.9's rule (``LogConfig.validateTurningOffRemoteStorageWithDelete``): remote
    storage is turned off only with its data deleted, said by remote.log.delete.on.disable."""
    turned_off = before.remote_storage_enable and not after.remote_storage_enable
    if turned_off and not after.remote_log_delete_on_disable:
        raise ConfigError(
            "it is invalid to disable remote storage without deleting remote data: to keep "
            "the remote data read-only, set remote.storage.enable=true and "
            "remote.log.copy.disable=true; to disable remote storage and delete all remote "
            "data, set remote.storage.enable=false and remote.log.delete.on.disable=true",
            setting="remote.storage.enable", value="false", source=source,
        )  # fmt: skip


def _stamp_of(path: Path) -> Stamp | None:
    """The topic id (and count) the file's comment line names, or None."""
    try:
        with path.open("rb") as f:
            first = f.readline().decode("latin-1")
    except FileNotFoundError:
        return None
    found = _STAMPED.search(first) if first.startswith("#") else None
    if found is None:
        return None
    count = found.group(2)
    return Stamp(found.group(1), None if count is None else int(count))


@functools.lru_cache(maxsize=len(INTERNAL_TOPIC_CONFIGS))
def _internal(topic: str) -> LogConfig:
    return LogConfig.from_properties(INTERNAL_TOPIC_CONFIGS[topic],
                                     source=f"Kafka's settings for its internal topic {topic}")


@functools.lru_cache(maxsize=1024)
def _parsed(path: str, version: FileVersion | None) -> LogConfig:
    """The settings of ``path`` as of ``version`` (``fsutil.file_version``: every write
    replaces the file, so a new version has a new inode; None: no file). LogConfig is frozen:
    shared safely."""
    stored = _read(Path(path)) if version is not None else {}
    return LogConfig.from_properties(stored, source=path)


def _read(path: Path) -> dict[str, str]:
    """The settings ``path`` holds; an empty file is refused, never read as Kafka's defaults
    (kafkatier writes a header line in every one: it was emptied or cut short, and defaults
    could delete or compact what the topic's settings kept)."""
    if path.stat().st_size == 0:
        raise ConfigError(
            "the topic's settings file is empty (emptied or cut short: kafkatier writes a "
            "header line in every one); fix: restore its settings, or delete the file for "
            "Kafka's defaults", file=str(path),
        )  # fmt: skip
    return read_properties(path)
