"""What the executors are told for one micro-batch (topics, partition counts, codec, how many
tasks); the pieces they send back are :mod:`kafkatier.sink.pieces`'.

The plan is computed on the driver from the log dir and shipped with the encode job's tasks
(:class:`kafkatier.sink.encode.EncodePlan`: as JSON to the JVM encoder of
:mod:`kafkatier.sink.jvm`, or inside the Python encoder's ``mapInArrow`` function); the producer's
next sequence per partition stays on the driver, which assigns sequences as it appends
(:mod:`kafkatier.sink.stage`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from kafkatier.sink.encode import EncodePlan, TopicPlan
from kafkatier.sink.schema import SinkSchemaError
from kafkatier.sink.txn import next_sequences, topic_partitions
from kafkatier.storage.arrow.record_rules import RecordRules
from kafkatier.storage.config.internal_topics import not_producible
from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.wire import Codec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


@dataclass(frozen=True)
class SinkSettings:
    """The sink's constructor choices that shape every batch's plan."""

    topic: str | None
    partitions: int | None
    codec: Codec
    compression_level: int | None


def build_plan(
    logs: LogDirectory, settings: SinkSettings, producer_id: int, epoch: int
) -> EncodePlan:
    """The plan for the next batch. A new fixed topic's partitions are not created here but
    once the encode job has accepted the batch's rows (``KafkaLogSink``): a batch refused for
    a row's partition left the new topic's empty partitions behind."""
    topics: dict[str, TopicPlan] = {}
    now = int(time.time() * 1000)
    wanted = ([settings.topic] if settings.topic is not None else
              sorted(t for t in logs.topics() if not_producible(t) is None))  # fmt: skip
    routed = settings.topic is None  # partitions= is then the count of the topics it creates
    for name in wanted:
        count = topic_partitions(logs, name, None if routed else settings.partitions,
                                 create=False)  # fmt: skip
        config = logs.config_for(name)
        topics[name] = TopicPlan(count, config.max_batch_bytes, RecordRules.of(config, now))
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
        write_time_ms=now,
    )  # fmt: skip
    return plan


def producer_sequences(logs: LogDirectory, plan: EncodePlan) -> dict[tuple[str, int], int]:
    """The producer's next sequence in each partition of the plan's topics (a partition of a
    topic the batch routes to for the first time starts at 0)."""
    sequences: dict[tuple[str, int], int] = {}
    for name, topic in plan.topics.items():
        found = next_sequences(logs, name, topic.partitions, plan.producer_id, plan.producer_epoch)
        for p, seq in found.items():
            sequences[(name, p)] = seq
    return sequences


_INT_MAX: Final = (1 << 31) - 1  # Spark's default spark.dynamicAllocation.maxExecutors
BATCH_BYTES: Final = 16 * 1024  # a Kafka producer's default batch.size
OPEN_BATCH_MOST: Final = 64 * 1024  # the most room an open batch starts with (open_batch_bytes)
_ALLOCATION_KEYS: Final = ("spark.dynamicAllocation.enabled",
                           "spark.dynamicAllocation.maxExecutors", "spark.executor.cores")


class TaskLimit:
    """How many tasks the encode job may use, by ``coalesce`` (no shuffle), as Spark's JDBC
    writer applies its ``numPartitions``: ``max_tasks`` if given (0: as the rows come), else
    as many as Spark runs at once (:func:`task_limit`) and no more than the batch's size is
    worth (:func:`tasks_for_size`). Every task writes a record batch for
    each Kafka partition it has rows for, and the driver parses and appends each one: a
    micro-batch of a 64-partition Kafka source into a 1,024-partition topic made up to 65,536
    batches, where two cores run two tasks at a time anyway. The session's allocation
    settings are read once per SparkContext (reading its whole conf over py4j took ~14 ms a
    batch, ad hoc); ``defaultParallelism`` every batch."""

    def __init__(self, max_tasks: int | None) -> None:
        if max_tasks is not None and max_tasks < 0:
            raise SinkSchemaError(f"max_tasks must be 0 (no limit) or more, got {max_tasks}",
                                  max_tasks=max_tasks)  # fmt: skip
        self.max_tasks = max_tasks
        self._conf: tuple[Any, dict[str, str]] | None = None

    def for_frame(self, df: DataFrame, partitions: int = 1) -> tuple[int, int]:
        """The tasks for ``df`` (the DataFrame the job runs) into topics of ``partitions``
        partitions in all: at most as many as Spark runs at once, and no more than
        :func:`tasks_for_size` finds worth their record batches; and the room each task's
        open batches start with (:func:`open_batch_bytes`)."""
        if self.max_tasks == 0:
            return 0, 0
        size = size_estimate(df)
        if self.max_tasks is not None:
            return self.max_tasks, open_batch_bytes(size, self.max_tasks, partitions)
        limit = self._parallelism(df)
        if size is None:
            return limit, 0
        worth = tasks_for_size(size, partitions)
        tasks = worth if limit == 0 else min(limit, worth)
        return tasks, open_batch_bytes(size, tasks, partitions)

    def _parallelism(self, df: DataFrame) -> int:
        try:
            sc = df.sparkSession.sparkContext
        except Exception:  # Spark Connect: no SparkContext to ask
            return 0
        if self._conf is None or self._conf[0] is not sc:
            conf = sc.getConf()
            found = {k: conf.get(k) for k in _ALLOCATION_KEYS}
            self._conf = (sc, {k: v for k, v in found.items() if v is not None})
        return task_limit(self._conf[1], int(sc.defaultParallelism))


def size_estimate(df: DataFrame) -> int | None:
    """Spark's estimate of ``df``'s bytes (its optimizer's plan statistics: a cached frame's
    in-memory size, a file scan's file sizes; ``spark.sql.defaultSizeInBytes``, so no bound,
    where a source does not say), None where it cannot be asked (Spark Connect). The plan is
    the one the JVM encoder's job then runs, optimized once for both (the Python encoder's
    ``coalesce`` and ``mapInArrow`` make a new plan, optimized again)."""
    try:
        stats = df._jdf.queryExecution().optimizedPlan().stats()
        return int(str(stats.sizeInBytes()))  # a BigInt, or an int as py4j converts it
    except Exception:
        return None


def tasks_for_size(size: int, partitions: int) -> int:
    """The tasks worth their record batches for ``size`` bytes into ``partitions`` Kafka
    partitions: each task writes a batch for every partition it has rows for, and the driver
    checks and appends each one, so a task should bring
    each partition about a Kafka producer's ``batch.size`` (:data:`BATCH_BYTES`). A
    5,000-row micro-batch into 1,024 partitions is then one task, not one per core, and the
    driver appends 1,024 batches instead of 2,048; 200,000 rows (23 MB) still take two."""
    return max(1, -(-size // (max(partitions, 1) * BATCH_BYTES)))


def open_batch_bytes(size: int | None, tasks: int, partitions: int) -> int:
    """The room a task's open batch of a partition starts with: that batch's share of
    ``size`` (Spark's estimate of the micro-batch's bytes) over the tasks and partitions and a
    quarter more (partitions get more or fewer rows), at most :data:`OPEN_BATCH_MOST` (the
    encoder also keeps it within its open-batch budget); 0, the encoder's 1 KiB, where nothing
    is known. Why: an open batch grew from 1 KiB by doubling, so at 1,024 partitions each
    task's 1,024 batches of about 12 KiB were reallocated and copied four times each: the
    encode job took 14-38 ms a 200,000-row micro-batch more than at 8 partitions; 1-8 ms more
    with this room (ad hoc phase timers, 2026-11-29)."""
    if size is None or tasks <= 0 or partitions <= 0:
        return 0
    share = size // (tasks * partitions)
    return min(share + share // 4 + 1024, OPEN_BATCH_MOST)


def task_limit(conf: Mapping[str, str], default_parallelism: int) -> int:
    """The tasks Spark can run at once: ``defaultParallelism`` (``spark.default.parallelism``
    or the executors' cores, asked every batch: executors come and go); with dynamic
    allocation, what ``maxExecutors`` executors of ``spark.executor.cores`` could run (0, no
    limit, when that is unbounded, its default), so the encode job never keeps the cluster
    from growing."""
    if conf.get("spark.dynamicAllocation.enabled", "false").strip().lower() != "true":
        return default_parallelism
    most = int(conf.get("spark.dynamicAllocation.maxExecutors", str(_INT_MAX)))
    if most >= _INT_MAX:
        return 0
    return max(most * int(conf.get("spark.executor.cores", "1")), default_parallelism)
