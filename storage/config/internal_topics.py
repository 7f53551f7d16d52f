"""Kafka's internal topics, as a broker's log dir holds them: what kafkatier's commands do with a
copy of one.

* ``__cluster_metadata``: KRaft's metadata log (``KafkaRaftServer.MetadataTopic``). Not a topic
  the log manager manages: Kafka's ``LogManager`` skips its directory when it loads a log dir,
  and the Raft layer cleans it by snapshots, not by ``retention.ms``. kafkatier's commands that
  open a log dir (``clean``, the sidecar, ``serve``, the sink) skip it the same way;
  ``verify`` and ``dump`` still read it.
* ``__consumer_offsets`` and ``__transaction_state``: created by the broker with
  ``cleanup.policy=compact`` (and 100 MiB segments: ``offsets.topic.segment.bytes``,
  ``transaction.state.log.segment.bytes``), settings a cluster keeps in its metadata log and a
  copied log dir therefore lacks. Without a ``kafkatier-topic.<topic>.properties`` file they get
  these, not the defaults of a user topic (whose 7-day ``retention.ms`` deleted every committed
  offset of a copied broker's log dir).

:func:`managed_partition` and :func:`partitions_on_disk` say which directories of a log dir are
the partitions those commands work on.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

from kafkatier.storage.checkpoint.metadata import parse_partition_dir_name

METADATA_TOPIC: Final = "__cluster_metadata"
"""KRaft's metadata log: not a managed topic (module doc)."""

INTERNAL_TOPIC_CONFIGS: Final = {
    "__consumer_offsets": {"cleanup.policy": "compact", "segment.bytes": "104857600"},
    "__transaction_state": {"cleanup.policy": "compact", "segment.bytes": "104857600"},
}
"""The settings Kafka creates each internal topic with, where a log dir stores none."""
INTERNAL_TOPICS: Final = frozenset(INTERNAL_TOPIC_CONFIGS)
"""The topics Kafka's metadata marks internal (``isInternal``)."""


def not_producible(topic: str) -> str | None:
    """Why a producer may not append to ``topic`` (None: it may): Kafka's brokers refuse
    clients' appends to internal topics ("Cannot append to internal topic"); only the group and
    transaction coordinators, and KRaft's controller, write them."""
    if topic in INTERNAL_TOPICS or topic == METADATA_TOPIC:
        return f"cannot append to internal topic {topic} (Kafka's brokers refuse producers too)"
    return None


def matches_pattern(pattern: re.Pattern[str], topic: str) -> bool:
    """Whether a ``subscribePattern`` takes ``topic``, as Spark's Kafka source decides (its
    ``SubscribePatternStrategy``): the pattern found anywhere in the name (``findFirstIn``, not
    a whole-name match: ``orders`` takes ``orders-eu``), and never an internal topic (Kafka's
    ``listTopics`` leaves them out: ``.*`` read ``__consumer_offsets``' records)."""
    return topic not in INTERNAL_TOPICS and pattern.search(topic) is not None


def managed_topic(topic: str) -> bool:
    """Whether the log manager opens, cleans and tiers the topic's partitions."""
    return topic != METADATA_TOPIC


def managed_partition(name: str) -> tuple[str, int] | None:
    """(topic, partition) of a directory name that is a live partition of a managed topic;
    None for anything else (``parse_partition_dir_name``'s rules, KRaft's metadata log)."""
    parsed = parse_partition_dir_name(name)
    return parsed if parsed is not None and managed_topic(parsed[0]) else None


def partitions_on_disk(log_dir: Path) -> dict[str, dict[int, Path]]:
    """Topic -> partition -> directory of the managed partitions in ``log_dir``, in name order."""
    found: dict[str, dict[int, Path]] = {}
    for child in sorted(log_dir.iterdir()):
        parsed = managed_partition(child.name) if child.is_dir() else None
        if parsed is not None:
            found.setdefault(parsed[0], {})[parsed[1]] = child
    return found
