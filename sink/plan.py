"""What the executors are told for one micro-batch (topics, partition counts, codec), and the
encoded pieces they send back.

The plan is computed on the driver from the log dir and shipped with the encode job's tasks
(:class:`kafkatier.sink.encode.EncodePlan`: as JSON to the JVM encoder of
:mod:`kafkatier.sink.jvm`, or inside the Python encoder's ``mapInArrow`` function); the producer's
next sequence per partition stays on the driver, which assigns sequences as it appends
(:mod:`kafkatier.sink.stage`).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, NamedTuple

import pyarrow as pa

from kafkatier.sink.encode import CHUNK_BYTES, CHUNK_SCHEMA, Encode, EncodePlan, TopicPlan
from kafkatier.sink.jvm import JvmEncoder, input_error
from kafkatier.sink.stage import StagingFiles
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
) -> tuple[EncodePlan, dict[tuple[str, int], int]]:
    """The plan for the next batch and the producer's next sequence per partition; creates
    the fixed topic's partitions if it is new."""
    topics: dict[str, TopicPlan] = {}
    sequences: dict[tuple[str, int], int] = {}
    wanted = [settings.topic] if settings.topic is not None else sorted(logs.topics())
    for name in wanted:
        count = topic_partitions(logs, name, settings.partitions)
        topics[name] = TopicPlan(count, logs.config_for(name).max_batch_bytes)
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


@dataclass(frozen=True)
class Piece:
    """Whole encoded batches for one Kafka partition (provisional sequences, base offset 0)."""

    topic: str
    partition: int
    records: int
    data: bytearray
    source: str  # the staging file, or "<fetched>", for error messages


def encoded_pieces(
    df: DataFrame, plan: EncodePlan, jvm: JvmEncoder | None = None
) -> Iterator[Piece]:
    """The micro-batch encoded by one parallel job, piece by piece (each partition's in task
    order; staged ones partition by partition): the JVM encoder's (:mod:`kafkatier.sink.jvm`)
    when given, else a ``mapInArrow`` of Python workers.

    Staged (``plan.staging_dir``): the job returns where each piece is (a few small rows per
    task, collected as Arrow) and the driver reads the pieces from the staging files one at a time.
    Fetched: the job persists the pieces to executor disk, and ``toLocalIterator`` brings them
    one task at a time; the driver checks them against the job's own summary."""
    encoded = jvm.encode(df, plan) if jvm is not None else df.mapInArrow(Encode(plan), CHUNK_SCHEMA)
    try:
        if plan.staging_dir is not None:
            yield from _staged(encoded.toArrow())  # columns, not a Python Row per piece
        else:
            yield from _fetched(encoded)
    except Exception as exc:
        mapped = input_error(exc)  # bad input found by the JVM encoder: the sink's own error
        if mapped is None:
            raise
        raise mapped from None


_SPAN_FIELDS: Final = ("task", "topic", "partition", "records", "path", "position", "length")


class _Span(NamedTuple):
    """Where one task wrote one piece (a staged row of ``CHUNK_SCHEMA``, without ``data``)."""

    task: int
    topic: str
    partition: int
    records: int
    path: str
    position: int
    length: int


def _spans(table: pa.Table) -> list[_Span]:
    """The staged rows as spans, by partition and then task order (a stable sort keeps each
    task's pieces in the order it wrote them). Collected as Arrow columns: a ``collect()`` of
    Rows cost Python's unpickling of one Row per piece, thousands a batch with many
    partitions."""
    if tuple(table.column_names[: len(_SPAN_FIELDS)]) != _SPAN_FIELDS:
        names = table.column_names
        raise CorruptRecordError(f"staged pieces have columns {names}", file="<staged>")
    columns = [table.column(name).to_pylist() for name in _SPAN_FIELDS]
    spans = list(map(_Span._make, zip(*columns, strict=True)))
    return sorted(spans, key=lambda span: (span.topic, span.partition, span.task))


def _staged(table: pa.Table) -> Iterator[Piece]:
    """Each partition's pieces from every task read as one (up to CHUNK_BYTES), in task order:
    one append per partition however many tasks wrote to it. Partitions are independent logs,
    so only the order within each one matters."""
    with StagingFiles() as files:
        for _, group in itertools.groupby(
            _spans(table), key=lambda span: (span.topic, span.partition)
        ):
            spans: list[_Span] = []
            size = 0
            for span in group:
                if spans and size + span.length > CHUNK_BYTES:
                    yield _read(files, spans)
                    spans, size = [], 0
                spans.append(span)
                size += span.length
            yield _read(files, spans)


def _read(files: StagingFiles, spans: list[_Span]) -> Piece:
    data = files.read([(s.path, s.position, s.length) for s in spans])
    first = spans[0]
    records = sum(s.records for s in spans)
    return Piece(first.topic, first.partition, records, data, first.path)


def _fetched(encoded: DataFrame) -> Iterator[Piece]:
    from pyspark import StorageLevel

    encoded = encoded.persist(StorageLevel.DISK_ONLY)
    try:
        summary = encoded.drop("data").collect()  # also computes every task, in parallel
        fetched = 0
        for row in encoded.toLocalIterator(prefetchPartitions=True):
            want = summary[fetched] if fetched < len(summary) else None
            if want is None or (want["topic"], want["partition"], want["records"]) != (
                row["topic"], row["partition"], row["records"]
            ):  # fmt: skip
                raise CorruptRecordError(
                    "the encoded micro-batch changed between its two reads; fix: make the input "
                    "deterministic (e.g. df.persist() before the sink)", file="<fetched>"
                )  # fmt: skip
            fetched += 1
            data = row["data"] if isinstance(row["data"], bytearray) else bytearray(row["data"])
            yield Piece(row["topic"], row["partition"], row["records"], data, "<fetched>")
        if fetched != len(summary):
            raise CorruptRecordError("encoded pieces missing on fetch", file="<fetched>")
    finally:
        encoded.unpersist()
