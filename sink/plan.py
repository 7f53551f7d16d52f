"""What the executors are told for one micro-batch: topics, partition counts, sequences, codec.

Computed on the driver from the log dir (partition counts and each partition's producer state)
and shipped inside the ``mapInArrow`` functions (:class:`kafkatier.sink.encode.EncodePlan`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkatier.sink.encode import (
    CHUNK_SCHEMA,
    COUNT_SCHEMA,
    Count,
    Encode,
    EncodePlan,
    TaskPartition,
    TopicPlan,
    first_sequences,
)
from kafkatier.sink.txn import next_sequences, topic_partitions
from kafkatier.storage.config import LogConfig
from kafkatier.storage.log_dir import LogDirectory
from kafkatier.storage.wire import Codec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


PARALLEL_FETCH_TASKS = 1  # toLocalIterator computes one task at a time (prefetch overlaps it with
# the driver consuming the previous one, not with another task)


@dataclass(frozen=True)
class SinkSettings:
    """The sink's constructor choices that shape every batch's plan."""

    topic: str | None
    partitions: int | None
    codec: Codec
    compression_level: int | None


def build_plan(
    logs: LogDirectory, settings: SinkSettings, producer_id: int, epoch: int
) -> tuple[EncodePlan, dict[tuple[str, int], int]]:
    """The plan for the next batch and the producer's next sequence per partition; creates
    the fixed topic's partitions if it is new."""
    topics: dict[str, TopicPlan] = {}
    sequences: dict[tuple[str, int], int] = {}
    wanted = [settings.topic] if settings.topic is not None else sorted(logs.topics())
    for name in wanted:
        count = topic_partitions(logs, name, settings.partitions)
        topics[name] = TopicPlan(count, logs.config_for(name).max_message_bytes)
        for p, seq in next_sequences(logs, name, count, producer_id, epoch).items():
            sequences[(name, p)] = seq
    new_topic = None
    if settings.topic is None and settings.partitions is not None:
        new_topic = TopicPlan(settings.partitions, LogConfig().max_message_bytes)
    level = settings.compression_level
    if level is None and settings.codec != Codec.NONE:
        config = logs.config_for(settings.topic) if settings.topic is not None else LogConfig()
        level = config.compression_level(settings.codec)
    plan = EncodePlan(
        fixed_topic=settings.topic, topics=topics, new_topic=new_topic, codec=settings.codec,
        level=level, producer_id=producer_id, producer_epoch=epoch,
        write_time_ms=int(time.time() * 1000),
    )  # fmt: skip
    return plan, sequences


def encoded_chunks(
    df: DataFrame, plan: EncodePlan, sequences: Mapping[tuple[str, int], int]
) -> tuple[Any, dict[TaskPartition, int]]:
    """Pass 1 (counts, collected: a few rows per task) then pass 2 (the encoded chunks,
    which ``toLocalIterator`` would compute one task at a time: with several tasks, one parallel
    job first persists them to executor disk). The caller unpersists the result."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    narrow = [c for c in ("key", "partition", "topic") if c in df.columns]
    keys = df.select(*narrow) if narrow else df.select(F.lit(0).cast("byte").alias("_kt_row"))
    counts = keys.mapInArrow(Count(plan), COUNT_SCHEMA).collect()
    full = dataclasses.replace(plan, first_sequences=first_sequences(iter(counts), sequences))
    expected = {(r["task"], r["topic"], r["partition"]): r["records"] for r in counts}
    if not expected:
        return None, expected
    encoded = df.mapInArrow(Encode(full), CHUNK_SCHEMA)
    if len({task for task, _, _ in expected}) > PARALLEL_FETCH_TASKS:
        encoded = encoded.persist(StorageLevel.DISK_ONLY)
        encoded.count()
    return encoded, expected
