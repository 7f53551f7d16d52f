"""Where each topic's configuration lives: one properties file per topic at the log-dir root.

Kafka keeps topic configs in its metadata log; kafkatier has no cluster, so it stores them beside
the data as ``<log dir>/kafkatier-topic.<topic>.properties``, Java properties with Kafka's names
(``segment.bytes``, ``cleanup.policy``, ``retention.ms`` ...), holding only the settings that differ
from Kafka's defaults. A file (not a directory) keeps the log dir loadable by a Kafka broker, which
only treats directories there as partitions. Every tool that opens the log dir (``produce``, the
Spark sink, ``clean``) resolves a topic's settings the same way: Kafka's defaults, then this file,
then per-run overrides, which :meth:`TopicConfigStore.update` validates and persists.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path

from kafkatier.storage.config.internal_topics import INTERNAL_TOPIC_CONFIGS
from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.fsutil import FileVersion, atomic_write, file_version
from kafkatier.storage.java_properties import format_properties, read_properties

FILE_PREFIX = "kafkatier-topic."
FILE_SUFFIX = ".properties"


class TopicConfigStore:
    """Reads and writes ``kafkatier-topic.<topic>.properties`` files in one log dir."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = Path(log_dir)

    def path(self, topic: str) -> Path:
        return self.log_dir / f"{FILE_PREFIX}{topic}{FILE_SUFFIX}"

    def stored(self, topic: str) -> dict[str, str]:
        """The topic's saved overrides ({} when it has none)."""
        path = self.path(topic)
        return read_properties(path) if path.exists() else {}

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

    def update(self, topic: str, overrides: Mapping[str, str], source: str) -> LogConfig:
        """Validate ``overrides`` on top of the stored settings, then persist them atomically."""
        merged = {**self.stored(topic), **overrides}
        config = LogConfig.from_properties(merged, source=source)
        if overrides:
            text = format_properties(
                config.to_properties(), comment=f"kafkatier topic configuration for {topic}"
            )
            atomic_write(self.path(topic), text.encode("utf-8"))
        return config

    def topics(self) -> list[str]:
        """Topics with a stored configuration file."""
        names = []
        for path in self.log_dir.glob(f"{FILE_PREFIX}*{FILE_SUFFIX}"):
            names.append(path.name[len(FILE_PREFIX) : -len(FILE_SUFFIX)])
        return sorted(names)


@functools.lru_cache(maxsize=len(INTERNAL_TOPIC_CONFIGS))
def _internal(topic: str) -> LogConfig:
    return LogConfig.from_properties(INTERNAL_TOPIC_CONFIGS[topic],
                                     source=f"Kafka's settings for its internal topic {topic}")


@functools.lru_cache(maxsize=1024)
def _parsed(path: str, version: FileVersion | None) -> LogConfig:
    """The settings of ``path`` as of ``version`` (``fsutil.file_version``: every write
    replaces the file, so a new version has a new inode; None: no file). LogConfig is frozen:
    shared safely."""
    stored = read_properties(Path(path)) if version is not None else {}
    return LogConfig.from_properties(stored, source=path)
