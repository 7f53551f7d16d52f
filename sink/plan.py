"""What the executors are told for one micro-batch (topics, partition counts, codec), and the
encoded pieces they send back.

The plan is computed on the driver from the log dir and shipped with the encode job's tasks
(:class:`kafkatier.sink.encode.EncodePlan`: as JSON to the JVM encoder of
:mod:`kafkatier.sink.jvm`, or inside the Python encoder's ``mapInArrow`` function); the producer's
next sequence per partition stays on the driver, which assigns sequences as it appends
(:mod:`kafkatier.sink.stage`).
"""

from __future__ import annotations

import struct
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kafkatier.sink.encode import CHUNK_ARROW, CHUNK_SCHEMA, Encode, EncodePlan, TopicPlan
from kafkatier.sink.jvm import JvmEncoder, input_error
from kafkatier.sink.schema import SinkSchemaError
from kafkatier.sink.stage import StagingPlace
from kafkatier.sink.txn import next_sequences, topic_partitions
from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.errors import CorruptRecordError
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
    """The plan for the next batch; creates the fixed topic's partitions if it is new."""
    topics: dict[str, TopicPlan] = {}
    wanted = [settings.topic] if settings.topic is not None else sorted(logs.topics())
    for name in wanted:
        count = topic_partitions(logs, name, settings.partitions)
        topics[name] = TopicPlan(count, logs.config_for(name).max_batch_bytes)
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

    def for_frame(self, df: DataFrame, partitions: int = 1) -> int:
        """The tasks for ``df`` (the DataFrame the job runs) into topics of ``partitions``
        partitions in all: at most as many as Spark runs at once, and no more than
        :func:`tasks_for_size` finds worth their record batches."""
        if self.max_tasks is not None:
            return self.max_tasks
        limit = self._parallelism(df)
        size = size_estimate(df)
        if size is None:
            return limit
        worth = tasks_for_size(size, partitions)
        return worth if limit == 0 else min(limit, worth)

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


class PartitionSpans(NamedTuple):
    """Where one Kafka partition's encoded batches are (provisional sequences, base offsets 0):
    (path, position, length) spans in the staging files, in task order (a tuple: one is built
    per partition and batch)."""

    topic: str
    partition: int
    records: int
    spans: list[tuple[str, int, int]]


def encoded_spans(
    df: DataFrame, plan: EncodePlan, place: StagingPlace, jvm: JvmEncoder | None = None
) -> list[PartitionSpans]:
    """The micro-batch encoded by one parallel job: the JVM encoder's (:mod:`kafkatier.sink.jvm`)
    when given, else a ``mapInArrow`` of Python workers; where its batches are, by partition.

    Staged (``plan.staging_dir``): the job writes the staging files and returns where each piece
    is (a few small rows per task: the JVM encoder's packed in one array a task and handed over
    with no DataFrame around the job, :func:`unpack_pieces`, about 30 ms less a micro-batch
    than the pieces' DataFrame collected as Arrow; the Python encoder's collected as Arrow).
    Fetched: the job persists the pieces to executor disk, and ``toLocalIterator`` brings them
    one task at a time into one staging file the driver writes at ``place``; the driver checks
    them against the job's own summary."""
    try:
        if jvm is not None and plan.staging_dir is not None:
            return _by_partition(unpack_pieces(jvm.encode_staged(df, plan, place.file("pieces"))))
        if jvm is not None:
            encoded = jvm.encode(df, plan)  # coalesces its rows to plan.max_tasks itself
        else:
            rows = df.coalesce(plan.max_tasks) if plan.max_tasks else df
            encoded = rows.mapInArrow(Encode(plan), CHUNK_SCHEMA)
        if plan.staging_dir is not None:
            return _by_partition(encoded.toArrow())
        return _by_partition(_fetched(encoded, place.file("driver.kbatches")))
    except Exception as exc:
        mapped = input_error(exc)  # bad input found by the JVM encoder: the sink's own error
        if mapped is None:
            raise
        raise mapped from None


_SPAN_SCHEMA: Final = pa.schema([field for field in CHUNK_ARROW if field.name != "data"])
_SPAN_FIELDS: Final = tuple(_SPAN_SCHEMA.names)
_ORDER: Final = [("topic", "ascending"), ("partition", "ascending"), ("task", "ascending"),
                 ("row", "ascending")]  # fmt: skip


_PACKED_ROW: Final = np.dtype([("task", "<i4"), ("topic", "<i4"), ("partition", "<i4"),
                               ("path", "<i4"), ("records", "<i8"), ("position", "<i8"),
                               ("length", "<i8")])  # fmt: skip


def unpack_pieces(packed: bytes) -> pa.Table:
    """The staged pieces' rows as the JVM encoder packed them (``PieceRows.java``: each task's
    names, then a fixed row a piece), as the columns :func:`_by_partition` takes."""
    view = memoryview(packed)
    try:
        (tasks,), at, tables = struct.unpack_from("<i", view), 4, []
        for _ in range(tasks):
            (size,) = struct.unpack_from("<i", view, at)
            tables.append(_unpack_task(view[at + 4 : at + 4 + size]))
            at += 4 + size
    except (struct.error, ValueError, IndexError) as exc:
        raise CorruptRecordError(
            f"the JVM encoder's pieces are malformed ({exc}) in {len(packed)} bytes",
            file="<staged>",
        ) from None
    return pa.concat_tables(tables) if tables else _SPAN_SCHEMA.empty_table()


def _unpack_task(view: memoryview) -> pa.Table:
    """One task's packed rows."""
    (count,), at = struct.unpack_from("<i", view), 4
    names = []
    for _ in range(count):
        (size,) = struct.unpack_from("<i", view, at)
        names.append(bytes(view[at + 4 : at + 4 + size]).decode())
        at += 4 + size
    (n,) = struct.unpack_from("<i", view, at)
    rows = np.frombuffer(view, _PACKED_ROW, n, at + 4)
    strings = pa.array(names, pa.string())
    columns = {
        "task": pa.array(rows["task"]), "topic": strings.take(pa.array(rows["topic"])),
        "partition": pa.array(rows["partition"]), "records": pa.array(rows["records"]),
        "path": strings.take(pa.array(rows["path"])), "position": pa.array(rows["position"]),
        "length": pa.array(rows["length"]),
    }  # fmt: skip
    return pa.table(columns).cast(_SPAN_SCHEMA)


def _by_partition(table: pa.Table) -> list[PartitionSpans]:
    """The staged rows (collected as Arrow columns: a ``collect()`` of Rows cost Python's
    unpickling of one Row per piece) grouped by partition, each group in task order, each
    task's pieces in the order it wrote them: partitions are independent logs, so only the
    order within each one matters. Arrow sorts; one loop over the sorted columns groups (one
    object a piece cost 9 us a piece at 1,024 partitions, ad hoc phase timers)."""
    if tuple(table.column_names[: len(_SPAN_FIELDS)]) != _SPAN_FIELDS:
        names = table.column_names
        raise CorruptRecordError(f"staged pieces have columns {names}", file="<staged>")
    rows = table.select(list(_SPAN_FIELDS)).append_column("row", pa.array(range(len(table))))
    ordered = rows.take(pc.sort_indices(rows, sort_keys=_ORDER))
    columns = [ordered.column(name).to_pylist() for name in _SPAN_FIELDS[1:]]
    groups: list[PartitionSpans] = []
    key: tuple[str, int] | None = None
    spans: list[tuple[str, int, int]] = []
    records = 0
    for topic, partition, count, path, position, length in zip(*columns, strict=True):
        if key != (topic, partition):
            if key is not None:
                groups.append(PartitionSpans(*key, records, spans))
            key, spans, records = (topic, partition), [], 0
        spans.append((path, position, length))
        records += count
    if key is not None:
        groups.append(PartitionSpans(*key, records, spans))
    return groups


def _fetched(encoded: DataFrame, path: Path) -> pa.Table:
    """The pieces fetched one task at a time into the staging file ``path``, as the staged
    rows' columns (``_SPAN_FIELDS``)."""
    from pyspark import StorageLevel

    encoded = encoded.persist(StorageLevel.DISK_ONLY)
    spans: list[tuple[int, str, int, int, str, int, int]] = []
    try:
        summary = encoded.drop("data").collect()  # also computes every task, in parallel
        with open(path, "wb") as out:
            for row in encoded.toLocalIterator(prefetchPartitions=True):
                want = summary[len(spans)] if len(spans) < len(summary) else None
                if want is None or (want["topic"], want["partition"], want["records"]) != (
                    row["topic"], row["partition"], row["records"]
                ):  # fmt: skip
                    raise CorruptRecordError(
                        "the encoded micro-batch changed between its two reads; fix: make the "
                        "input deterministic (e.g. df.persist() before the sink)",
                        file="<fetched>",
                    )
                position = out.tell()
                out.write(row["data"])
                spans.append((row["task"], row["topic"], row["partition"], row["records"],
                              str(path), position, out.tell() - position))  # fmt: skip
        if len(spans) != len(summary):
            raise CorruptRecordError("encoded pieces missing on fetch", file="<fetched>")
        columns = [list(column) for column in zip(*spans, strict=True)]
        return pa.table(columns or [[] for _ in _SPAN_FIELDS], schema=_SPAN_SCHEMA)
    finally:
        encoded.unpersist()
