"""The executor half of the sink: choose each row's Kafka partition, then encode record batches.

Two ``mapInArrow`` steps around a shuffle (built by :func:`encoded_chunks`):

1. ``assign``: each row gets its Kafka partition (``_kt_partition``): an explicit ``partition``
   wins, a key goes to ``murmur2(key) % partitions`` (``storage.partitioner``), keyless rows are
   spread round robin. Out-of-range partitions and unknown topics fail here, in the shuffle's map
   stage, which Spark finishes before any encoded chunk reaches the driver: a bad batch fails
   before anything is written.
2. ``encode``: after ``repartition`` by (topic, partition) and a sort by the original row order,
   every Kafka partition of the batch lives in exactly one task, so that task numbers its records
   with consecutive sequence numbers starting from the driver's ``next sequence`` for the
   partition. It encodes transactional batches (producer id, epoch, sequences: all under the CRC)
   with base offset 0; only the driver's :meth:`Log.append` assigns offsets, which the CRC does
   not cover. Output: one row per chunk of whole batches of at most ``CHUNK_BYTES``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kafkatier.sink.schema import ORDER_COLUMN, PARTITION_COLUMN, SinkSchemaError
from kafkatier.storage.arrow_codec import EncodedBatches, encode_arrow
from kafkatier.storage.partitioner import assign_partitions
from kafkatier.storage.wire import Codec, increment_sequence

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

CHUNK_BYTES: Final = 4 * 1024 * 1024
CHUNK_SCHEMA: Final = "topic string, partition int, records long, data binary"


@dataclass(frozen=True)
class TopicPlan:
    """Per topic: its partition count, ``max.message.bytes`` and next sequence per partition."""

    partitions: int
    max_batch_bytes: int
    next_sequence: Mapping[int, int]


@dataclass(frozen=True)
class EncodePlan:
    """Everything the executors need, shipped with the tasks (small: a few ints per partition)."""

    fixed_topic: str | None
    topics: Mapping[str, TopicPlan]
    new_topic: TopicPlan | None  # for routed topics not on disk yet; None: they are an error
    codec: Codec
    level: int | None
    producer_id: int
    producer_epoch: int
    write_time_ms: int

    def topic(self, name: str) -> TopicPlan:
        plan = self.topics.get(name, self.new_topic)
        if plan is None:
            raise SinkSchemaError(
                f"column 'topic': unknown topic {name!r} (not in the log dir) and the sink has "
                f"no partitions= for new topics; fix: pass KafkaLogSink(..., partitions=N)",
                column="topic",
                topic=name,
            )
        return plan


def _task_id() -> int:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return ctx.partitionId() if ctx is not None else 0


class Assign:
    """``mapInArrow`` step 1: append ``_kt_partition`` to every batch."""

    def __init__(self, plan: EncodePlan) -> None:
        self.plan = plan

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        spread = _task_id()  # tasks start their keyless round robin at different partitions
        for batch in batches:
            parts = np.empty(batch.num_rows, np.int32)
            for topic, rows in self._topic_rows(batch):
                sub = batch.take(rows) if rows is not None else batch
                parts_t = _assign(sub, self.plan.topic(topic).partitions, spread)
                spread += sub.num_rows
                if rows is None:
                    parts = parts_t
                else:
                    parts[rows.to_numpy()] = parts_t
            yield batch.append_column(PARTITION_COLUMN, pa.array(parts, pa.int32()))

    def _topic_rows(self, batch: pa.RecordBatch) -> Iterator[tuple[str, pa.Array | None]]:
        if self.plan.fixed_topic is not None:
            yield self.plan.fixed_topic, None
            return
        topics = batch.column("topic")
        if topics.null_count:
            row = int(pc.index(topics.is_null(), True).as_py())
            raise SinkSchemaError(
                "column 'topic' is null; fix: fill it, or pass KafkaLogSink(..., topic=...)",
                column="topic",
                row=row,
            )
        for name in pc.unique(topics).to_pylist():
            yield name, pc.indices_nonzero(pc.equal(topics, name))


def _assign(batch: pa.RecordBatch, partitions: int, spread: int) -> np.ndarray[Any, Any]:
    names = batch.schema.names
    if "key" not in names and "partition" not in names:  # all keyless: round robin
        return ((spread + np.arange(batch.num_rows)) % partitions).astype(np.int32)
    return assign_partitions(
        batch.column("key") if "key" in names else None,
        partitions,
        explicit=batch.column("partition") if "partition" in names else None,
        round_robin_start=spread,
    )


class Encode:
    """``mapInArrow`` step 2: record batches per (topic, partition), in row order."""

    def __init__(self, plan: EncodePlan) -> None:
        self.plan = plan
        self.sequences: dict[tuple[str, int], int] = {}

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for topic, partition, rows in self._runs(batch):
                yield from self._encode(topic, partition, rows)

    def _runs(self, batch: pa.RecordBatch) -> Iterator[tuple[str, int, pa.RecordBatch]]:
        """Slices of equal (topic, partition): the sort made them contiguous."""
        parts = batch.column(PARTITION_COLUMN).to_numpy()
        keys = parts.astype(np.int64)
        topics = None
        if self.plan.fixed_topic is None:
            topics = batch.column("topic").to_pylist()
            codes = pc.dictionary_encode(batch.column("topic")).indices.to_numpy()
            keys = keys + codes.astype(np.int64) * (1 << 32)
        bounds = [0, *(np.flatnonzero(np.diff(keys)) + 1).tolist(), batch.num_rows]
        for start, end in itertools.pairwise(bounds):
            if end > start:
                topic = self.plan.fixed_topic if topics is None else topics[start]
                assert topic is not None
                yield topic, int(parts[start]), batch.slice(start, end - start)

    def _encode(self, topic: str, partition: int, rows: pa.RecordBatch) -> Iterator[pa.RecordBatch]:
        tplan = self.plan.topic(topic)
        tp = (topic, partition)
        seq = self.sequences.get(tp, tplan.next_sequence.get(partition, 0))
        encoded = encode_arrow(
            rows,
            codec=self.plan.codec,
            level=self.plan.level,
            producer_id=self.plan.producer_id,
            producer_epoch=self.plan.producer_epoch,
            base_sequence=seq,
            transactional=True,
            timestamp=self.plan.write_time_ms,
            max_batch_bytes=tplan.max_batch_bytes,
        )
        self.sequences[tp] = increment_sequence(seq, rows.num_rows)
        for data, records in _chunks(encoded):
            yield pa.RecordBatch.from_pydict(
                {"topic": [topic], "partition": [partition], "records": [records], "data": [data]},
                schema=_chunk_arrow_schema(),
            )


def _chunk_arrow_schema() -> pa.Schema:
    return pa.schema(
        [("topic", pa.string()), ("partition", pa.int32()), ("records", pa.int64()),
         ("data", pa.binary())]
    )  # fmt: skip


def _chunks(encoded: EncodedBatches) -> Iterator[tuple[bytes, int]]:
    """Whole batches grouped into pieces of at most CHUNK_BYTES (one batch may exceed it)."""
    view = memoryview(encoded.data)
    ends = (encoded.positions + encoded.sizes).tolist()
    counts = encoded.record_counts.tolist()
    start = 0
    records = 0
    for i, end in enumerate(ends):
        if end - start > CHUNK_BYTES and records:
            prev = int(encoded.positions[i])
            yield bytes(view[start:prev]), records
            start, records = prev, 0
        records += counts[i]
    if records:
        yield bytes(view[start : ends[-1]]), records


def encoded_chunks(df: DataFrame, plan: EncodePlan, shuffle_partitions: int) -> DataFrame:
    """The batch as encoded chunks (schema CHUNK_SCHEMA), each Kafka partition in one task."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType, StructField, StructType

    with_order = df.withColumn(ORDER_COLUMN, F.monotonically_increasing_id())
    schema = StructType([*with_order.schema.fields, StructField(PARTITION_COLUMN, IntegerType())])
    assigned = with_order.mapInArrow(Assign(plan), schema)
    group = [PARTITION_COLUMN] if plan.fixed_topic is not None else ["topic", PARTITION_COLUMN]
    shuffled = assigned.repartition(shuffle_partitions, *group).sortWithinPartitions(
        *group, ORDER_COLUMN
    )
    return shuffled.mapInArrow(Encode(plan), CHUNK_SCHEMA)
