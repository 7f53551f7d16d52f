"""The executor half of the sink: Kafka partitions per row, then record batches, with no shuffle.

Two ``mapInArrow`` passes over the micro-batch, each task (Spark partition) reading its rows in
the same order both times:

1. ``Count`` (over the key, partition and topic columns only): how many rows each task sends to
   each Kafka partition. An explicit ``partition`` wins, a key goes to ``murmur2(key) %
   partitions`` (``storage.partitioner``), keyless rows go round robin from a start that depends
   only on the task and the count of keyless rows before them, so both passes agree whatever
   Arrow batch boundaries Spark picks. Out-of-range partitions and unknown topics fail here,
   before anything is written.
2. ``Encode``: the driver turns the counts into each task's first sequence number per Kafka
   partition (the producer's next sequence + the rows of earlier tasks), so every task encodes
   transactional batches (producer id, epoch, sequences: all under the CRC) independently, with
   base offset 0; the driver appends the tasks' chunks in task order, and only ``Log.append``
   assigns offsets, which the CRC does not cover. Within a Kafka partition, records keep the
   input order (task, then row). Output: rows of whole batches, at most ``CHUNK_BYTES`` each.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kafkatier.sink.schema import SinkSchemaError
from kafkatier.storage.arrow_codec import EncodedBatches, encode_arrow
from kafkatier.storage.partitioner import assign_partitions
from kafkatier.storage.wire import Codec, increment_sequence

CHUNK_BYTES: Final = 4 * 1024 * 1024
FLUSH_BYTES: Final = 1024 * 1024  # rows buffered per Kafka partition before encoding them
COUNT_SCHEMA: Final = "task int, topic string, partition int, records long"
CHUNK_SCHEMA: Final = "task int, topic string, partition int, records long, data binary"
TaskPartition = tuple[int, str, int]


@dataclass(frozen=True)
class TopicPlan:
    """Per topic: its partition count and ``max.message.bytes``."""

    partitions: int
    max_batch_bytes: int


@dataclass(frozen=True)
class EncodePlan:
    """Everything the executors need, shipped with the tasks (a few ints per partition)."""

    fixed_topic: str | None
    topics: Mapping[str, TopicPlan]
    new_topic: TopicPlan | None  # for routed topics not on disk yet; None: they are an error
    codec: Codec
    level: int | None
    producer_id: int
    producer_epoch: int
    write_time_ms: int
    first_sequences: Mapping[TaskPartition, int] | None = None  # set for pass 2

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


class Partitioner:
    """Kafka partitions of a task's rows, batch after batch (the same in both passes)."""

    def __init__(self, plan: EncodePlan, task: int) -> None:
        self.plan = plan
        self.spread: dict[str, int] = {}  # per topic: keyless rows so far, offset by the task
        self.task = task

    def topic_rows(self, batch: pa.RecordBatch) -> Iterator[tuple[str, Any]]:
        """(topic, row indices or None for all rows) for each topic in the batch."""
        if self.plan.fixed_topic is not None:
            yield self.plan.fixed_topic, None
            return
        topics = batch.column("topic")
        if topics.null_count:
            raise SinkSchemaError(
                "column 'topic' is null; fix: fill it, or pass KafkaLogSink(..., topic=...)",
                column="topic",
                row=int(pc.index(topics.is_null(), True).as_py()),
            )
        for name in pc.unique(topics).to_pylist():
            yield name, pc.indices_nonzero(pc.equal(topics, name)).to_numpy()

    def partitions(self, batch: pa.RecordBatch, topic: str) -> np.ndarray[Any, Any]:
        names = batch.schema.names
        count = self.plan.topic(topic).partitions
        start = self.spread.get(topic, self.task)
        keyless = np.ones(batch.num_rows, bool)
        if "key" in names:
            keyless &= batch.column("key").is_null().to_numpy(zero_copy_only=False)
        if "partition" in names:
            keyless &= batch.column("partition").is_null().to_numpy(zero_copy_only=False)
        self.spread[topic] = start + int(keyless.sum())
        if "key" not in names and "partition" not in names:
            return ((start + np.arange(batch.num_rows)) % count).astype(np.int32)
        return assign_partitions(
            batch.column("key") if "key" in names else None,
            count,
            explicit=batch.column("partition") if "partition" in names else None,
            round_robin_start=start,
        )

    def groups(self, batch: pa.RecordBatch) -> Iterator[tuple[str, int, pa.RecordBatch]]:
        """The batch's rows per (topic, partition), each group in input order."""
        for topic, rows in self.topic_rows(batch):
            sub = batch if rows is None else batch.take(rows)
            parts = self.partitions(sub, topic)
            order = np.argsort(parts, kind="stable")
            ordered = parts[order]
            bounds = np.flatnonzero(np.diff(ordered)) + 1
            for idx in np.split(order, bounds):
                if len(idx):
                    yield topic, int(parts[idx[0]]), sub.take(pa.array(idx))


class Count:
    """``mapInArrow`` pass 1: rows per (task, topic, partition)."""

    def __init__(self, plan: EncodePlan) -> None:
        self.plan = plan

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        task = _task_id()
        partitioner = Partitioner(self.plan, task)
        counts: dict[tuple[str, int], int] = {}
        for batch in batches:
            for topic, partition, rows in partitioner.groups(batch):
                counts[(topic, partition)] = counts.get((topic, partition), 0) + rows.num_rows
        keys = sorted(counts)
        yield pa.RecordBatch.from_pydict(
            {
                "task": [task] * len(keys),
                "topic": [t for t, _ in keys],
                "partition": [p for _, p in keys],
                "records": [counts[k] for k in keys],
            },
            schema=pa.schema(
                [("task", pa.int32()), ("topic", pa.string()), ("partition", pa.int32()),
                 ("records", pa.int64())]
            ),
        )  # fmt: skip


class Encode:
    """``mapInArrow`` pass 2: transactional record batches per Kafka partition."""

    def __init__(self, plan: EncodePlan) -> None:
        self.plan = plan

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        task = _task_id()
        partitioner = Partitioner(self.plan, task)
        pending: dict[tuple[str, int], list[pa.RecordBatch]] = {}
        sequences: dict[tuple[str, int], int] = {}
        for batch in batches:
            for topic, partition, rows in partitioner.groups(batch):
                key = (topic, partition)
                group = pending.setdefault(key, [])
                group.append(rows)
                if sum(b.nbytes for b in group) >= FLUSH_BYTES:
                    yield from self._encode(task, key, pending.pop(key), sequences)
        for key, group in sorted(pending.items()):
            yield from self._encode(task, key, group, sequences)

    def _encode(
        self,
        task: int,
        key: tuple[str, int],
        group: list[pa.RecordBatch],
        sequences: dict[tuple[str, int], int],
    ) -> Iterator[pa.RecordBatch]:
        topic, partition = key
        rows = pa.Table.from_batches(group).combine_chunks()
        assert self.plan.first_sequences is not None
        seq = sequences.get(key)
        if seq is None:
            seq = self.plan.first_sequences[(task, topic, partition)]
        encoded = encode_arrow(
            rows,
            codec=self.plan.codec,
            level=self.plan.level,
            producer_id=self.plan.producer_id,
            producer_epoch=self.plan.producer_epoch,
            base_sequence=seq,
            transactional=True,
            timestamp=self.plan.write_time_ms,
            max_batch_bytes=self.plan.topic(topic).max_batch_bytes,
        )
        sequences[key] = increment_sequence(seq, rows.num_rows)
        for data, records in _chunks(encoded):
            yield pa.RecordBatch.from_pydict(
                {"task": [task], "topic": [topic], "partition": [partition],
                 "records": [records], "data": [data]},
                schema=_CHUNK_ARROW,
            )  # fmt: skip


_CHUNK_ARROW: Final = pa.schema(
    [("task", pa.int32()), ("topic", pa.string()), ("partition", pa.int32()),
     ("records", pa.int64()), ("data", pa.binary())]
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


def first_sequences(
    counts: Iterator[Any], next_sequence: Mapping[tuple[str, int], int]
) -> dict[TaskPartition, int]:
    """Each task's first sequence per Kafka partition: the producer's next one plus the rows
    that earlier tasks send to the partition."""
    running = dict(next_sequence)
    result: dict[TaskPartition, int] = {}
    for row in sorted(counts, key=lambda r: (r["task"], r["topic"], r["partition"])):
        tp = (row["topic"], row["partition"])
        seq = running.get(tp, 0)
        result[(row["task"], *tp)] = seq
        running[tp] = increment_sequence(seq, row["records"])
    return result
