"""OffsetForLeaderEpoch (key 23): where a leader epoch ended, so a consumer can validate its
position (KIP-320) after a leader change or when resuming from a committed offset with its
epoch. Per partition, after Kafka's fencing check of ``current_leader_epoch``: the largest
epoch at or below the one asked for and the offset where it ended (the log end for the latest
epoch), or -1 / -1 for an epoch the partition does not know (serve/epochs.py).
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

from kafkatier.serve import partition_view
from kafkatier.serve.apis.versions import OFFSET_FOR_LEADER_EPOCH
from kafkatier.serve.catalog import TopicInfo
from kafkatier.serve.context import ServeContext
from kafkatier.serve.partition_view import Sources
from kafkatier.serve.protocol import build, payload_module


async def handle(ctx: ServeContext, version: int, request: Any) -> Any:
    module = payload_module(OFFSET_FOR_LEADER_EPOCH, version, EntityType.response)
    topics = await ctx.blocking(ctx.catalog.topics)
    results = []
    for topic in request.topics:
        info = topics.get(topic.topic)
        parts = []
        for p in topic.partitions:
            error, epoch, end = await ctx.blocking(_end_offset, info, p.partition,
                                                   p.current_leader_epoch, p.leader_epoch,
                                                   ctx.sources)  # fmt: skip
            parts.append(build(module.EpochEndOffset, error_code=error, partition=p.partition,
                               leader_epoch=epoch, end_offset=end))  # fmt: skip
        results.append(build(module.OffsetForLeaderTopicResult, topic=topic.topic,
                             partitions=tuple(parts)))  # fmt: skip
    return build(module.OffsetForLeaderEpochResponse, throttle_time=datetime.timedelta(0),
                 topics=tuple(results))  # fmt: skip


def _end_offset(info: TopicInfo | None, partition: int, current: int, epoch: int,
                sources: Sources) -> tuple[ErrorCode, int, int]:  # fmt: skip
    """(error, epoch, end offset) of one partition (blocking: reads its files)."""
    log_dir: Path | None = None if info is None else info.partitions.get(partition)
    if log_dir is None or info is None:
        return ErrorCode.unknown_topic_or_partition, -1, -1
    fenced = sources.epochs.fencing(log_dir, info.name, partition, current)
    if fenced != ErrorCode.none:
        return fenced, -1, -1
    log_end = partition_view.bounds(log_dir, info.name, partition, sources).high_watermark
    found, end = sources.epochs.end_offset_for(log_dir, info.name, partition, epoch, log_end)
    return ErrorCode.none, found, end
