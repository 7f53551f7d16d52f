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
"""

from __future__ import annotations

from typing import Final

METADATA_TOPIC: Final = "__cluster_metadata"
"""KRaft's metadata log: not a managed topic (module doc)."""

INTERNAL_TOPIC_CONFIGS: Final = {
    "__consumer_offsets": {"cleanup.policy": "compact", "segment.bytes": "104857600"},
    "__transaction_state": {"cleanup.policy": "compact", "segment.bytes": "104857600"},
}
"""The settings Kafka creates each internal topic with, where a log dir stores none."""


def managed_topic(topic: str) -> bool:
    """Whether the log manager opens, cleans and tiers the topic's partitions."""
    return topic != METADATA_TOPIC
