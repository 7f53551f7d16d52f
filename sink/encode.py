"""The executor half of the sink: Kafka partitions per row, then record batches, with no shuffle.

One ``mapInArrow`` pass over the micro-batch (``Encode``). Per row: an explicit ``partition``
wins, a key goes to ``murmur2(key) % partitions`` (``storage.partitioner``), keyless rows go
round robin from a start that depends on the task. Out-of-range partitions and unknown topics
fail here, before anything is written. Each task encodes transactional record batches per Kafka
partition (producer id and epoch, compression, CRC) with base offset 0 and provisional base
sequences: the driver, appending the tasks' output in task order, gives the batches their real
sequences and offsets (:mod:`kafkatier.sink.stage`). Within a Kafka partition, records keep the
input order (task, then row). Output: one row per piece of whole batches (at most
``CHUNK_BYTES``, one batch may exceed it), either the bytes themselves (``data``) or where the
task wrote them in its staging file (``path``, ``position``, ``length``).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import IO, Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kafkatier.sink.schema import SinkSchemaError, executor_error
from kafkatier.sink.stage import task_file
from kafkatier.storage.arrow.codec import encode_arrow
from kafkatier.storage.arrow.encode import EncodedBatches
from kafkatier.storage.arrow.numpy_views import int_values
from kafkatier.storage.arrow.record_rules import NO_RULES, RecordRules
from kafkatier.storage.errors import InvalidRecordError
from kafkatier.storage.partitioner import assign_partitions, keyless_rows
from kafkatier.storage.wire import Codec

CHUNK_BYTES: Final = 4 * 1024 * 1024
FLUSH_BYTES: Final = 512 * 1024  # rows buffered per Kafka partition before encoding them
COALESCE_BYTES: Final = 8 * 1024 * 1024  # Spark's Arrow batches (10k rows) grouped this far
CHUNK_SCHEMA: Final = (
    "task int, topic string, partition int, records long, path string, position long, "
    "length long, data binary"
)
CHUNK_ARROW: Final = pa.schema(
    [("task", pa.int32()), ("topic", pa.string()), ("partition", pa.int32()),
     ("records", pa.int64()),
     ("path", pa.string()), ("position", pa.int64()), ("length", pa.int64()),
     ("data", pa.binary())]
)  # fmt: skip
PROVISIONAL_SEQUENCE: Final = 0


@dataclass(frozen=True)
class TopicPlan:
    """Per topic: its partition count, ``max.message.bytes`` and the rules its records must
    meet (``record_rules``: a key where it is compacted, the timestamp window)."""

    partitions: int
    max_batch_bytes: int
    rules: RecordRules = NO_RULES


@dataclass(frozen=True)
class EncodePlan:
    """Everything the executors need, shipped with the tasks (a few ints per topic)."""

    fixed_topic: str | None
    topics: Mapping[str, TopicPlan]
    new_topic: TopicPlan | None  # for routed topics not on disk yet; None: they are an error
    codec: Codec
    level: int | None
    producer_id: int
    producer_epoch: int
    write_time_ms: int
    staging_dir: str | None = None  # None: the encoded bytes go back inline
    staging_prefix: str = ""  # the staging files' name prefix in staging_dir
    max_tasks: int = 0  # the job's tasks at most (sink.plan.TaskLimit); 0: as the rows come
    open_batch_bytes: int = 0  # room an open batch starts with (sink.plan.open_batch_bytes)

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


def _task_ids() -> tuple[int, int]:
    """(Spark partition, unique task attempt id) of the running task."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return (ctx.partitionId(), ctx.taskAttemptId()) if ctx is not None else (0, 0)


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
            yield name, int_values(pc.indices_nonzero(pc.equal(topics, name)))

    def partitions(self, batch: pa.RecordBatch, topic: str) -> np.ndarray[Any, Any]:
        names = batch.schema.names
        keys = batch.column("key") if "key" in names else None
        explicit = batch.column("partition") if "partition" in names else None
        start = self.spread.get(topic, self.task)
        self.spread[topic] = start + keyless_rows(keys, explicit, batch.num_rows)
        return assign_partitions(keys, self.plan.topic(topic).partitions, explicit=explicit,
                                 round_robin_start=start, rows=batch.num_rows)  # fmt: skip

    def groups(self, batch: pa.RecordBatch) -> Iterator[tuple[str, int, pa.RecordBatch]]:
        """The batch's rows per (topic, partition), each group in input order."""
        for topic, rows in self.topic_rows(batch):
            sub = batch if rows is None else batch.take(rows)
            parts = self.partitions(sub, topic)
            order = np.argsort(parts, kind="stable")
            ordered = parts[order]
            grouped = sub.take(pa.array(order))  # one gather, then zero-copy slices
            bounds = [0, *(np.flatnonzero(np.diff(ordered)) + 1).tolist(), len(order)]
            for start, end in itertools.pairwise(bounds):
                if end > start:
                    yield topic, int(ordered[start]), grouped.slice(start, end - start)


def coalesce(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Spark's small Arrow batches grouped into batches of about COALESCE_BYTES: the per-batch
    work (partitioning, grouping, takes) is paid a few times per task, and with a few Kafka
    partitions each one's share of a batch is encoded at once, without a further copy."""
    pending: list[pa.RecordBatch] = []
    size = 0
    for batch in batches:
        pending.append(batch)
        size += batch.nbytes
        if size >= COALESCE_BYTES:
            yield from pa.Table.from_batches(pending).combine_chunks().to_batches()
            pending, size = [], 0
    if pending:
        yield from pa.Table.from_batches(pending).combine_chunks().to_batches()


class Encode:
    """The ``mapInArrow`` function: transactional record batches per Kafka partition."""

    def __init__(self, plan: EncodePlan) -> None:
        self.plan = plan
        self.out: IO[bytes] | None = None
        self.path = ""
        self.written = 0
        self.task = 0

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        task, attempt = _task_ids()
        if self.plan.staging_dir is not None:
            path = task_file(self.plan.staging_dir, self.plan.staging_prefix, task, attempt)
            self.path, self.out = str(path), open(path, "wb")  # noqa: SIM115
        try:
            self.task = task
            yield from self._encode_all(batches, task)
            if self.out is not None:  # the sink's write-ahead log: synced while others encode
                self.out.flush()
                os.fsync(self.out.fileno())
        finally:
            if self.out is not None:
                self.out.close()

    def _encode_all(self, batches: Iterator[pa.RecordBatch], task: int) -> Iterator[pa.RecordBatch]:
        partitioner = Partitioner(self.plan, task)
        pending: dict[tuple[str, int], list[pa.RecordBatch]] = {}
        for batch in coalesce(batches):
            for topic, partition, rows in partitioner.groups(batch):
                key = (topic, partition)
                group = pending.setdefault(key, [])
                group.append(rows)
                if sum(b.nbytes for b in group) >= FLUSH_BYTES:
                    yield from self._encode(key, pending.pop(key))
        for key, group in sorted(pending.items()):
            yield from self._encode(key, group)

    def _encode(
        self, key: tuple[str, int], group: list[pa.RecordBatch]
    ) -> Iterator[pa.RecordBatch]:
        topic, partition = key
        rows = pa.Table.from_batches(group).combine_chunks()
        try:
            self.plan.topic(topic).rules.check(rows, topic)
        except InvalidRecordError as exc:
            raise executor_error(exc) from None
        encoded = encode_arrow(
            rows,
            codec=self.plan.codec,
            level=self.plan.level,
            producer_id=self.plan.producer_id,
            producer_epoch=self.plan.producer_epoch,
            base_sequence=PROVISIONAL_SEQUENCE,
            transactional=True,
            timestamp=self.plan.write_time_ms,
            max_batch_bytes=self.plan.topic(topic).max_batch_bytes,
        )
        if self.out is not None:
            self.out.write(memoryview(encoded.data)[: _end(encoded)])
        where: tuple[str | None, int | None, int | None, bytes | None]
        for start, end, records in _chunks(encoded):
            if self.out is not None:
                where = (self.path, self.written + start, end - start, None)
            else:
                where = (None, None, None, bytes(memoryview(encoded.data)[start:end]))
            values = (self.task, topic, partition, records, *where)
            yield pa.RecordBatch.from_pylist(
                [dict(zip(CHUNK_ARROW.names, values, strict=True))], schema=CHUNK_ARROW
            )
        if self.out is not None:
            self.written += _end(encoded)


def _end(encoded: EncodedBatches) -> int:
    return int(encoded.positions[-1] + encoded.sizes[-1]) if len(encoded) else 0


def _chunks(encoded: EncodedBatches) -> Iterator[tuple[int, int, int]]:
    """(start, end, records) of whole batches grouped into pieces of at most CHUNK_BYTES (one
    batch may exceed it)."""
    ends = (encoded.positions + encoded.sizes).tolist()
    counts = encoded.record_counts.tolist()
    start = 0
    records = 0
    for i, end in enumerate(ends):
        if end - start > CHUNK_BYTES and records:
            prev = int(encoded.positions[i])
            yield start, prev, records
            start, records = prev, 0
        records += counts[i]
    if records:
        yield start, ends[-1], records
