"""Partition and log-dir metadata files (kafka-format.md §0, §8.4-§8.6) and Kafka's Uuid text.

* ``<topic>-<partition>/partition.metadata``: the topic id.
* ``meta.properties``: which cluster/node a log dir belongs to.
* ``.kafka_cleanshutdown``: present only after a clean shutdown.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Final

from kafkatier.storage.checkpoint.checkpoint_file import (
    is_valid_topic_name,
    java_lines,
    parse_java_int,
)
from kafkatier.storage.errors import CheckpointError, ConfigError
from kafkatier.storage.fsutil import atomic_write, delete_if_exists
from kafkatier.storage.java_properties import format_properties, read_properties

PARTITION_METADATA_FILE: Final = "partition.metadata"
META_PROPERTIES_FILE: Final = "meta.properties"
CLEAN_SHUTDOWN_FILE: Final = ".kafka_cleanshutdown"
DIR_VARIANT_SUFFIXES: Final = ("-delete", "-future", "-stray")

ZERO_UUID: Final = "AAAAAAAAAAAAAAAAAAAAAA"  # Uuid.ZERO_UUID: "no topic id"
ONE_UUID: Final = "AAAAAAAAAAAAAAAAAAAAAQ"  # Uuid.ONE_UUID: the KRaft metadata topic
_RESERVED_UUIDS: Final = frozenset({ZERO_UUID, ONE_UUID})
_URL_SAFE_BASE64: Final = re.compile(r"[A-Za-z0-9_-]*={0,2}", re.ASCII)
_PARTITION_METADATA_SEPARATOR: Final = re.compile(r":[ \t\n\x0b\f\r]+")


def partition_dir_name(topic: str, partition: int) -> str:
    """``LocalLog.logDirName``: ``<topic>-<partition>``."""
    if not is_valid_topic_name(topic):
        raise ValueError(f"illegal Kafka topic name: {topic!r}")
    if partition < 0:
        raise ValueError(f"partition must be >= 0, got {partition}")
    return f"{topic}-{partition}"


def parse_partition_dir_name(name: str) -> tuple[str, int] | None:
    """(topic, partition) of a live partition dir; None for anything else.

    The partition is the text after the **last** ``-`` (topics may contain dashes). Directories
    being deleted, moved or left stray (``...-delete``, ``-future``, ``-stray``) are not live,
    nor is a number written otherwise than Kafka writes it (``t-01``): every reader and writer
    finds a partition at :func:`partition_dir_name`'s name, so a stray ``t-01`` beside ``t-1``
    was opened as ``t-1`` a second time (a retention pass over it deleted ``t-1``'s segments,
    a ``produce`` counted a partition that is not there).
    """
    if name.endswith(DIR_VARIANT_SUFFIXES):
        return None
    topic, dash, partition = name.rpartition("-")
    if not dash or not topic or not partition.isascii() or not partition.isdigit():
        return None
    value = int(partition)
    return (topic, value) if value <= 2**31 - 1 and str(value) == partition else None


def uuid_to_str(raw: bytes) -> str:
    """``Uuid.toString``: URL-safe base64 of the 16 bytes, without padding (22 chars)."""
    if len(raw) != 16:
        raise ValueError(f"a Uuid has 16 bytes, got {len(raw)}")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def uuid_from_str(text: str) -> bytes:
    """``Uuid.fromString``: the 16 bytes behind the base64 text; ValueError if it is not one."""
    if len(text) > 24:
        raise ValueError(f"too long to be a base64 Uuid: {text[:24]!r}...")
    if not _URL_SAFE_BASE64.fullmatch(text):
        raise ValueError(f"not URL-safe base64: {text!r}")
    try:
        raw = base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"not URL-safe base64: {text!r}") from None
    if len(raw) != 16:
        raise ValueError(f"{text!r} decodes to {len(raw)} bytes, not the 16 of a Uuid")
    return raw


def new_topic_id() -> str:
    """``Uuid.randomUuid``: a version-4 UUID whose text neither starts with ``-`` nor is reserved.

    A leading ``-`` would make the id look like a command-line option.
    """
    while True:
        text = uuid_to_str(uuid.uuid4().bytes)
        if not text.startswith("-") and text not in _RESERVED_UUIDS:
            return text


class PartitionMetadataFile:
    """``partition.metadata``: exactly ``version: 0\\ntopic_id: <uuid>`` with no final newline.

    Kafka reads the first two lines, each split once on ``:`` plus whitespace, accepts any
    version >= 0 and rejects the zero Uuid.
    """

    VERSION: Final = 0

    def __init__(self, path: Path) -> None:
        self.path = path

    def exists(self) -> bool:
        return self.path.exists()

    def write(self, topic_id: str, *, sync: bool = True) -> None:
        atomic_write(self.path, self.encode(topic_id), sync=sync)

    def encode(self, topic_id: str) -> bytes:
        """The file's bytes for ``topic_id`` (checked: a Uuid, not the zero one)."""
        try:
            canonical = uuid_to_str(uuid_from_str(topic_id))
        except ValueError as e:
            raise CheckpointError(str(e), file=str(self.path), topic_id=topic_id) from None
        if canonical == ZERO_UUID:
            raise CheckpointError("the zero Uuid is not a topic id", file=str(self.path))
        return f"version: {self.VERSION}\ntopic_id: {canonical}".encode()

    def read(self) -> str:
        """The topic id; CheckpointError naming the file and line for anything malformed."""
        try:
            lines = java_lines(self.path.read_bytes().decode("utf-8"))
        except UnicodeDecodeError:
            raise CheckpointError("not UTF-8 text", file=str(self.path)) from None
        try:
            version = parse_java_int(self._field(lines, 0, "version"))
        except ValueError:
            version = -1
        if version < 0:
            raise CheckpointError(
                "unrecognised version", file=str(self.path), line=1, content=lines[0]
            )
        try:
            topic_id = uuid_to_str(uuid_from_str(self._field(lines, 1, "topic_id")))
        except ValueError as e:
            raise CheckpointError(str(e), file=str(self.path), line=2, content=lines[1]) from None
        if topic_id == ZERO_UUID:
            raise CheckpointError("zero topic id", file=str(self.path), line=2)
        return topic_id

    def _field(self, lines: list[str], index: int, key: str) -> str:
        line = lines[index] if index < len(lines) else None
        parts = _PARTITION_METADATA_SEPARATOR.split(line, maxsplit=1) if line is not None else []
        if len(parts) != 2 or parts[0] != key:
            raise CheckpointError(
                f"malformed line, expected '{key}: ...'",
                file=str(self.path), line=index + 1, content=line,
            )
        return parts[1]


@dataclass(frozen=True)
class MetaProperties:
    """A log dir's ``meta.properties`` (Java properties text, see java_properties).

    KRaft (``version=1``) requires ``cluster.id`` and ``node.id``; ZooKeeper-era ``version=0``
    files carry an optional ``broker.id`` (read into ``node_id``) and optional ``cluster.id``.
    Either may have a ``directory.id`` (Uuid text). ``version`` is required, as in Kafka.
    """

    version: int
    cluster_id: str | None = None
    node_id: int | None = None
    directory_id: str | None = None

    def __post_init__(self) -> None:
        self._validate("MetaProperties(...)")

    def _validate(self, source: str) -> None:
        if self.version not in (0, 1):
            raise CheckpointError("unknown meta.properties version", file=source,
                                  version=self.version)
        if self.version == 1 and (self.cluster_id is None or self.node_id is None):
            raise CheckpointError("version 1 requires cluster.id and node.id", file=source)
        if self.directory_id is not None:
            try:
                uuid_from_str(self.directory_id)
            except ValueError as e:
                raise CheckpointError(f"bad directory.id: {e}", file=source) from None

    @classmethod
    def new_kraft(
        cls, node_id: int, cluster_id: str | None = None, directory_id: str | None = None
    ) -> MetaProperties:
        """A version-1 file with fresh random ids where none are given (as ``kafka-storage``)."""
        return cls(1, cluster_id or new_topic_id(), node_id, directory_id or new_topic_id())

    @classmethod
    def from_properties(cls, props: Mapping[str, str], *, source: str) -> MetaProperties:
        version_text = props.get("version")
        if version_text is None:  # Kafka's MetaProperties reads it as a required property
            raise CheckpointError("missing version (a broker refuses to start on it)",
                                  file=source)  # fmt: skip
        if version_text not in ("0", "1"):
            raise CheckpointError("unknown meta.properties version", file=source,
                                  version=version_text)
        version = int(version_text)
        id_key = "broker.id" if version == 0 else "node.id"
        node_text = props.get(id_key)
        if node_text is None and version == 1:
            raise CheckpointError(f"missing {id_key}", file=source)
        try:
            node_id = None if node_text is None else parse_java_int(node_text)
        except ValueError:
            raise CheckpointError(f"{id_key} is not a base-10 number", file=source,
                                  value=node_text) from None
        try:
            return cls(version, props.get("cluster.id"), node_id, props.get("directory.id"))
        except CheckpointError as e:
            raise CheckpointError(e.message, **{**e.context, "file": source}) from None

    def to_properties(self) -> dict[str, str]:
        props = {"version": str(self.version)}
        if self.cluster_id is not None:
            props["cluster.id"] = self.cluster_id
        if self.node_id is not None:
            props["broker.id" if self.version == 0 else "node.id"] = str(self.node_id)
        if self.directory_id is not None:
            props["directory.id"] = self.directory_id
        return props

    @classmethod
    def read(cls, path: Path) -> MetaProperties:
        try:
            props = read_properties(path)
        except ConfigError as e:
            raise CheckpointError(e.message, file=str(path), **e.context) from None
        return cls.from_properties(props, source=str(path))

    def write(self, path: Path, *, sync: bool = True, now: datetime | None = None) -> None:
        """Kafka's ``PropertiesUtils.writePropertiesFile``: ``.tmp``, optional fsync, rename."""
        text = format_properties(self.to_properties(), comment="", now=now)
        atomic_write(path, text.encode("utf-8"), sync=sync)


class CleanShutdownFile:
    """``<log dir>/.kafka_cleanshutdown``: JSON ``{"version":0,"brokerEpoch":N}``.

    Only its existence matters to recovery; Kafka deletes it at startup before loading logs so
    that a crash while loading counts as unclean. Brokers before 3.7 wrote it empty.
    """

    VERSION: Final = 0

    def __init__(self, log_dir: Path) -> None:
        self.path = log_dir / CLEAN_SHUTDOWN_FILE

    def mark(self, broker_epoch: int = -1, *, sync: bool = True) -> None:
        body = json.dumps({"version": self.VERSION, "brokerEpoch": broker_epoch},
                          separators=(",", ":"))
        atomic_write(self.path, body.encode("utf-8"), sync=sync)

    def exists(self) -> bool:
        return self.path.exists()

    def remove(self, *, sync: bool = True) -> bool:
        removed: bool = delete_if_exists(self.path, sync=sync)
        return removed

    def broker_epoch(self) -> int | None:
        """The recorded broker epoch; None when absent or unreadable (e.g. an old empty file)."""
        try:
            content = json.loads(self.path.read_bytes())
            epoch = content["brokerEpoch"]
        except (OSError, ValueError, TypeError, KeyError):
            return None
        return epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else None
