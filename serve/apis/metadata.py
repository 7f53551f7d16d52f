"""Metadata (key 3): one broker (this server, node id 0, at its advertised listener), the
controller and leader of every partition, and the topics of the log dirs with their ids.

A request for all topics (null list, or an empty one in v0) gets every topic; a named topic the
log dirs lack gets UNKNOWN_TOPIC_OR_PARTITION (nothing is ever auto-created); a topic asked for
by id (v10+) is looked up by id. Each partition's leader epoch is its latest in
``leader-epoch-checkpoint`` (0 without one; see epochs.py).
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

from kafkatier.serve.apis.authorized import CLUSTER, NOT_ASKED, TOPIC, operations
from kafkatier.serve.apis.versions import METADATA
from kafkatier.serve.catalog import TopicInfo
from kafkatier.serve.context import CLIENT, NODE_ID, ServeContext
from kafkatier.serve.protocol import build, payload_module


async def handle(ctx: ServeContext, version: int, request: Any) -> Any:
    module = payload_module(METADATA, version, EntityType.response)
    topics = await ctx.blocking(ctx.catalog.topics)
    asked = _asked(request, topics, version)
    epochs = await ctx.blocking(_epochs, ctx, topics, asked)
    listener = ctx.advertised_for(CLIENT.get().listener)
    broker = build(module.MetadataResponseBroker, node_id=NODE_ID, host=listener.host,
                   port=listener.port, rack=None)  # fmt: skip
    allowed = operations(request, "include_topic_authorized_operations", TOPIC)
    return build(
        module.MetadataResponse, throttle_time=datetime.timedelta(0), brokers=(broker,),
        cluster_id=ctx.cluster_id, controller_id=NODE_ID,
        topics=tuple(_topic(module, topics, one, epochs, allowed) for one in asked),
        cluster_authorized_operations=operations(
            request, "include_cluster_authorized_operations", CLUSTER),
    )


def _asked(request: Any, topics: dict[str, TopicInfo], version: int) -> list[tuple[Any, Any]]:
    """The (name, id) pairs to answer: the request's, or every topic's."""
    if request.topics is None or (version == 0 and not request.topics):
        return [(info.name, info.topic_id) for info in topics.values()]
    return [(t.name, getattr(t, "topic_id", None)) for t in request.topics]


def _epochs(ctx: ServeContext, topics: dict[str, TopicInfo],
            asked: list[tuple[Any, Any]]) -> dict[tuple[str, int], int]:  # fmt: skip
    """The leader epoch of every partition of the topics asked for (reads files: blocking)."""
    found: dict[tuple[str, int], int] = {}
    for name, topic_id in asked:
        info = topics.get(name) if name else _by_id(topics, topic_id)
        if info is None:
            continue
        for index, log_dir in info.partitions.items():
            found[(info.name, index)] = ctx.sources.epochs.current(log_dir, info.name, index)
    return found


def _topic(module: Any, topics: dict[str, TopicInfo], asked: tuple[Any, Any],
           epochs: dict[tuple[str, int], int], allowed: int) -> Any:  # fmt: skip
    name, topic_id = asked
    info = topics.get(name) if name else _by_id(topics, topic_id)
    if info is None:
        error = ErrorCode.unknown_topic_or_partition if name else ErrorCode.unknown_topic_id
        return build(module.MetadataResponseTopic, error_code=error, name=name,
                     topic_id=topic_id, partitions=(),
                     topic_authorized_operations=NOT_ASKED)  # fmt: skip
    partitions = tuple(_partition(module, info, index, epochs)
                       for index in range(info.count))
    return build(module.MetadataResponseTopic, error_code=ErrorCode.none, name=info.name,
                 topic_id=info.topic_id, is_internal=info.internal, partitions=partitions,
                 topic_authorized_operations=allowed)  # fmt: skip


def _partition(module: Any, info: TopicInfo, index: int,
               epochs: dict[tuple[str, int], int]) -> Any:  # fmt: skip
    """One partition of the topic; one below its count whose directory no log dir holds (a
    damaged or half-copied log dir, a directory moved away) is listed offline, as a broker
    lists a partition whose log dir failed: left out, it made clients take the topic for a
    smaller one, and the partitions past the gap were never read."""
    if index not in info.partitions:
        return build(module.MetadataResponsePartition,
                     error_code=ErrorCode.leader_not_available, partition_index=index,
                     leader_id=-1, leader_epoch=-1, replica_nodes=(NODE_ID,), isr_nodes=(),
                     offline_replicas=(NODE_ID,))  # fmt: skip
    return build(module.MetadataResponsePartition, error_code=ErrorCode.none,
                 partition_index=index, leader_id=NODE_ID, leader_epoch=epochs[(info.name, index)],
                 replica_nodes=(NODE_ID,), isr_nodes=(NODE_ID,), offline_replicas=())  # fmt: skip


def _by_id(topics: dict[str, TopicInfo], topic_id: Any) -> TopicInfo | None:
    return next((info for info in topics.values() if info.topic_id == topic_id), None)
