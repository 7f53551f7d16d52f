"""ListOffsets (key 2), per partition: earliest (-2: the log start, remote segments included),
latest (-1: the high watermark, or the last stable offset for read_committed), the record with
the largest timestamp (-3, v7+), earliest-local (-4, v8+: the first local offset, KIP-405),
latest-tiered (-5, v9+: the highest offset in the remote store, -1 when none, KIP-1005) and by
timestamp (the first record at or after it, through the time indexes, remote ones first; offset
-1 when every record is older). A record found by timestamp (or the largest one) at or past the
last fetchable offset (the last stable offset for read_committed, else the high watermark) is
not an answer, as in Kafka's ``Partition.fetchOffsetForTimestamp``: offset -1. Each answer
carries the leader epoch of the offset found (the latest epoch for "latest", as Kafka); a request's
``current_leader_epoch`` (v4+) is checked as Kafka checks it (epochs.py).
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

from kafkatier.serve import partition_view
from kafkatier.serve.apis.versions import LIST_OFFSETS
from kafkatier.serve.catalog import TopicInfo
from kafkatier.serve.context import ServeContext
from kafkatier.serve.faults import read_or_error
from kafkatier.serve.partition_view import Sources
from kafkatier.serve.protocol import build, payload_module

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5


async def handle(ctx: ServeContext, version: int, request: Any) -> Any:
    module = payload_module(LIST_OFFSETS, version, EntityType.response)
    topics = await ctx.blocking(ctx.catalog.topics)
    committed = getattr(request, "isolation_level", 0) == 1
    twice = _duplicates(request) if version >= 1 else set()
    answers = []
    for topic in request.topics:
        info = topics.get(topic.name)
        parts = []
        for p in topic.partitions:
            current = getattr(p, "current_leader_epoch", -1)
            if (topic.name, p.partition_index) in twice:  # Kafka answers each copy so (v1+)
                error, offset, timestamp, epoch = ErrorCode.invalid_request, -1, -1, -1
            else:
                found = await ctx.blocking(_lookup, info, p.partition_index, p.timestamp,
                                           committed, ctx.sources, current)  # fmt: skip
                error, offset, timestamp, epoch = found
            parts.append(build(module.ListOffsetsPartitionResponse,
                               partition_index=p.partition_index, error_code=error,
                               timestamp=timestamp, offset=offset, leader_epoch=epoch))  # fmt: skip
        answers.append(build(module.ListOffsetsTopicResponse, name=topic.name,
                             partitions=tuple(parts)))  # fmt: skip
    return build(module.ListOffsetsResponse, throttle_time=datetime.timedelta(0),
                 topics=tuple(answers))  # fmt: skip


def _duplicates(request: Any) -> set[tuple[str, int]]:
    """The partitions a request names more than once (``ListOffsetsRequest.duplicatePartitions``:
    a broker answers every copy INVALID_REQUEST)."""
    seen: set[tuple[str, int]] = set()
    twice: set[tuple[str, int]] = set()
    for topic in request.topics:
        for p in topic.partitions:
            key = (topic.name, p.partition_index)
            (twice if key in seen else seen).add(key)
    return twice


def _lookup(
    info: TopicInfo | None, partition: int, timestamp: int, committed: bool, sources: Sources,
    current_epoch: int,
) -> tuple[ErrorCode, int, int, int]:
    """(error, offset, timestamp, leader epoch) of one partition's query."""
    log_dir: Path | None = None if info is None else info.partitions.get(partition)
    if log_dir is None or info is None:
        offline = info is not None and info.offline(partition)
        error = ErrorCode.kafka_storage_error if offline else ErrorCode.unknown_topic_or_partition
        return error, -1, -1, -1
    fenced = sources.epochs.fencing(log_dir, info.name, partition, current_epoch)
    if fenced != ErrorCode.none:
        return fenced, -1, -1, -1
    found = read_or_error(_find, log_dir, info.name, partition, timestamp, committed, sources)
    if isinstance(found, ErrorCode):
        return found, -1, -1, -1
    error, offset, found_ts = found
    if timestamp == LATEST:
        epoch = sources.epochs.current(log_dir, info.name, partition)
    else:
        epoch = sources.epochs.for_offset(log_dir, info.name, partition, offset)
    return error, offset, found_ts, epoch


def _find(log_dir: Path, topic: str, partition: int, timestamp: int, committed: bool,
          sources: Sources) -> tuple[ErrorCode, int, int]:  # fmt: skip
    """(error, offset, timestamp) of one partition's query."""
    if timestamp in (LATEST, EARLIEST):
        bounds = partition_view.bounds(log_dir, topic, partition, sources)
        offset = bounds.latest(committed) if timestamp == LATEST else bounds.log_start
        return ErrorCode.none, offset, -1
    if timestamp in (EARLIEST_LOCAL, LATEST_TIERED):
        lookup = (partition_view.local_log_start if timestamp == EARLIEST_LOCAL
                  else partition_view.highest_tiered)  # fmt: skip
        return ErrorCode.none, lookup(log_dir, topic, partition, sources), -1
    if timestamp == MAX_TIMESTAMP:
        found = partition_view.max_timestamp(log_dir, topic, partition, sources)
    elif timestamp < 0:
        return ErrorCode.unsupported_version, -1, -1  # -6 and below: queries of v11+
    else:
        found = partition_view.offset_for_timestamp(log_dir, topic, partition, timestamp,
                                                    sources)  # fmt: skip
    if found is None:
        return ErrorCode.none, -1, -1
    bounds = partition_view.bounds(log_dir, topic, partition, sources)
    if found[0] >= bounds.latest(committed):  # Kafka's: only below the last fetchable offset
        return ErrorCode.none, -1, -1
    return ErrorCode.none, found[0], found[1]
