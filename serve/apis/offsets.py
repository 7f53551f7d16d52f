"""OffsetCommit (8) and OffsetFetch (9): committed offsets, kept in ``__consumer_offsets``
(``serve/group/offset_store.py``) and fsynced before a commit is acknowledged.

A commit is checked as Kafka's classic coordinator checks it (``coordinator.validate_commit``:
members of the current generation, or a commit outside group management to an Empty group);
then each partition: a topic or partition the log dirs lack is UNKNOWN_TOPIC_OR_PARTITION,
metadata above ``offset.metadata.max.bytes`` is OFFSET_METADATA_TOO_LARGE, the rest is written
as one batch. A fetch of a group or partition with no commit answers offset -1 (no error), as
Kafka does, and so does one of a topic deleted and created again since the commit
(``group/topic_ids.py``); a null topic list asks for every committed partition of the group.
OffsetFetch v8+ asks for several groups at once.
"""

from __future__ import annotations

import datetime
import logging
import time
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

from kafkatier.serve.apis.versions import OFFSET_COMMIT, OFFSET_FETCH
from kafkatier.serve.catalog import TopicInfo
from kafkatier.serve.context import ServeContext
from kafkatier.serve.group.records import OffsetValue
from kafkatier.serve.protocol import build, payload_module
from kafkatier.storage.errors import KafkaTierError

log = logging.getLogger("kafkatier.serve")
NO_THROTTLE = datetime.timedelta(0)
Offsets = list[tuple[str, int, OffsetValue]]


async def offset_commit(ctx: ServeContext, version: int, request: Any) -> Any:
    module = payload_module(OFFSET_COMMIT, version, EntityType.response)
    group_error = ctx.coordinator.validate_commit(
        request.group_id, request.member_id, request.generation_id_or_member_epoch,
        getattr(request, "group_instance_id", None),
    )
    topics = await ctx.blocking(ctx.catalog.topics)
    now = int(time.time() * 1000)
    errors: dict[tuple[str, int], ErrorCode] = {}
    accepted: Offsets = []
    for topic in request.topics:
        for p in topic.partitions:
            error = group_error
            if error is ErrorCode.none:
                error = _partition_error(ctx, topics.get(topic.name), p)
            if error is ErrorCode.none:
                value = OffsetValue(p.committed_offset, getattr(p, "committed_leader_epoch", -1),
                                    p.committed_metadata or "", now)  # fmt: skip
                accepted.append((topic.name, p.partition_index, value))
            errors[(topic.name, p.partition_index)] = error
    ids = {t: str(topics[t].topic_id) for t, _, _ in accepted}
    if accepted and not await _write(ctx, request.group_id, accepted, ids):
        errors.update({(t, p): ErrorCode.unknown_server_error for t, p, _ in accepted})
    answers = tuple(
        build(module.OffsetCommitResponseTopic, name=topic.name, partitions=tuple(
            build(module.OffsetCommitResponsePartition, partition_index=p.partition_index,
                  error_code=errors[(topic.name, p.partition_index)])
            for p in topic.partitions))
        for topic in request.topics
    )  # fmt: skip
    return build(module.OffsetCommitResponse, throttle_time=NO_THROTTLE, topics=answers)


def _partition_error(ctx: ServeContext, info: TopicInfo | None, p: Any) -> ErrorCode:
    if info is None or p.partition_index not in info.partitions:
        return ErrorCode.unknown_topic_or_partition
    metadata = (p.committed_metadata or "").encode()
    if len(metadata) > ctx.config.groups.offset_metadata_max_bytes:
        return ErrorCode.offset_metadata_too_large
    return ErrorCode.none


async def _write(ctx: ServeContext, group: str, offsets: Offsets, ids: dict[str, str]) -> bool:
    try:
        await ctx.blocking(ctx.offsets.commit, group, offsets, ids)
    except (OSError, KafkaTierError) as exc:
        log.error("cannot write the offsets of group %r to %s: %s", group,
                  ctx.config.offsets_dir, exc)  # fmt: skip
        return False
    return True


async def offset_fetch(ctx: ServeContext, version: int, request: Any) -> Any:
    module = payload_module(OFFSET_FETCH, version, EntityType.response)
    now = await ctx.blocking(ctx.catalog.topics)
    ids = {name: str(info.topic_id) for name, info in now.items()}
    if version < 8:
        topics = _fetched(ctx, module, request.group_id, request.topics, ids)
        return build(module.OffsetFetchResponse, throttle_time=NO_THROTTLE, topics=topics,
                     error_code=ErrorCode.none)  # fmt: skip
    groups = tuple(
        build(module.OffsetFetchResponseGroup, group_id=g.group_id,
              topics=_fetched(ctx, module, g.group_id, g.topics, ids),
              error_code=ErrorCode.none)
        for g in request.groups
    )  # fmt: skip
    return build(module.OffsetFetchResponse, throttle_time=NO_THROTTLE, groups=groups)


def _fetched(
    ctx: ServeContext, module: Any, group: str, asked: Any, ids: dict[str, str]
) -> tuple[Any, ...]:
    """Each asked partition's commit (-1: none); every committed one when ``asked`` is None.
    A commit of a topic deleted since (another id now: ``ids``) is none."""
    committed = {tp: value for tp, value in ctx.offsets.committed(group).items()
                 if not ctx.offsets.stale(tp[0], ids.get(tp[0]))}  # fmt: skip
    if asked is None:
        wanted: dict[str, list[int]] = {}
        for topic, partition in sorted(committed):
            wanted.setdefault(topic, []).append(partition)
    else:
        wanted = {t.name: list(t.partition_indexes) for t in asked}
    # the entity names gained a plural in v8
    topic_class = getattr(module, "OffsetFetchResponseTopics", None)
    topic_class = topic_class or module.OffsetFetchResponseTopic
    part_class = getattr(module, "OffsetFetchResponsePartitions", None)
    part_class = part_class or module.OffsetFetchResponsePartition
    none = OffsetValue(-1, -1, "", -1)
    return tuple(
        build(topic_class, name=topic, partitions=tuple(
            build(part_class, partition_index=p, committed_offset=found.offset,
                  committed_leader_epoch=found.leader_epoch, metadata=found.metadata,
                  error_code=ErrorCode.none)
            for p in partitions for found in [committed.get((topic, p), none)]))
        for topic, partitions in wanted.items()
    )  # fmt: skip
