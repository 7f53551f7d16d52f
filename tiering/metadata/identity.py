"""Which incarnation of a partition remote data belongs to, and where in the store it lives.

Kafka keys a topic by its id (KIP-516): a topic deleted and created again under the same name is
another topic, and Kafka's tiered storage puts the id into every remote path so that the old
topic's segments can never be taken for the new one's. kafkatier does the same::

    <topic>-<topicId>/<partition>/manifest.json        topicId: Kafka's Uuid text (22 chars)
    <topic>-<topicId>/<partition>/<base>-<attempt>/...  the segments' objects

Stores written before the id was part of the layout hold ``<topic>-<partition>/``; each such
manifest records the topic id it was written for, and is used where it is (``legacy``), by the
partition with that id only: nothing needs copying. A partition without ``partition.metadata``
(written by Kafka before 2.8) has no id and keeps the name-only place.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kafkatier.storage.checkpoint.checkpoint_file import is_valid_topic_name
from kafkatier.storage.checkpoint.metadata import (
    PARTITION_METADATA_FILE,
    PartitionMetadataFile,
    parse_partition_dir_name,
    partition_dir_name,
    uuid_from_str,
    uuid_to_str,
)

TOPIC_ID_CHARS = 22
"""Length of Kafka's Uuid text (URL-safe base64 of 16 bytes, unpadded)."""


@dataclass(frozen=True, order=True)
class RemotePartition:
    """One partition of one topic incarnation in the remote store (module docstring)."""

    topic: str
    partition: int
    topic_id: str = ""
    """Kafka's topic id, "" for a partition that has none (name-only identity)."""
    legacy: bool = False
    """True: its objects live at ``<topic>-<partition>/`` (the layout before topic ids)."""

    @classmethod
    def of(cls, topic: str, partition: int, topic_id: str) -> RemotePartition:
        """Where a partition with ``topic_id`` keeps new remote data."""
        return cls(topic, partition, topic_id, legacy=not topic_id)

    @property
    def identity(self) -> tuple[str, int, str]:
        """What makes two remote partitions the same: name, number and topic id."""
        return self.topic, self.partition, self.topic_id

    @property
    def prefix(self) -> str:
        """The folder (with a trailing ``/``) holding its manifest and objects."""
        if self.legacy:
            return partition_dir_name(self.topic, self.partition) + "/"
        return f"{topic_folder(self.topic, self.topic_id)}/{self.partition}/"

    def __str__(self) -> str:
        name = f"{self.topic}-{self.partition}"
        return f"{name} (topic id {self.topic_id})" if self.topic_id else name


def topic_id_of(directory: Path) -> str:
    """The topic id in a partition directory's ``partition.metadata`` ("" without one)."""
    path = Path(directory) / PARTITION_METADATA_FILE
    return PartitionMetadataFile(path).read() if path.exists() else ""


def topic_folder(topic: str, topic_id: str) -> str:
    if not is_valid_topic_name(topic):
        raise ValueError(f"illegal Kafka topic name: {topic!r}")
    return f"{topic}-{topic_id}"


def parse_topic_folder(name: str) -> tuple[str, str] | None:
    """(topic, topic id) of a ``<topic>-<topicId>`` folder; None for anything else. The id is
    the last 22 characters (base64 may itself contain ``-``)."""
    if len(name) <= TOPIC_ID_CHARS + 1 or name[-TOPIC_ID_CHARS - 1] != "-":
        return None
    topic, topic_id = name[: -TOPIC_ID_CHARS - 1], name[-TOPIC_ID_CHARS:]
    if parse_partition_dir_name(name) is not None:
        return None  # a legacy partition folder (a 22-digit number is never a partition)
    try:
        canonical = uuid_to_str(uuid_from_str(topic_id))  # what Kafka's Uuid.toString writes
    except ValueError:
        return None
    return (topic, topic_id) if canonical == topic_id and is_valid_topic_name(topic) else None


def parse_partition_folder(name: str) -> int | None:
    """The partition of a ``<partition>`` folder inside a topic folder."""
    if not name.isascii() or not name.isdigit():
        return None
    value = int(name)
    return value if value <= 2**31 - 1 else None
