"""The executor side of the ``kafkatier`` data source: one offset range of one partition, decoded
chunk by chunk into Arrow record batches in Spark's Kafka source schema.

v2 batches go through the numba decoder (``arrow_codec.decode_arrow``) a chunk of whole batches
at a time, so a task's memory is bounded by ``chunk_bytes`` of log plus its decoded rows,
whatever the range. Legacy magic 0/1 message sets (Kafka before 0.11) take the per-record path.
``read_committed`` drops control batches and the data of aborted transactions with the engine's
``AbortedTransactionFilter`` (Kafka's consumer logic), one filter for the whole range so its state
carries across chunks; the aborted transactions come from the ``.txnindex`` files and from the
ABORT markers the planner saw (see ``source_log``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from kafkatier.sink.source_log import ReadOnlyPartition, byte_ranges, read_batches
from kafkatier.storage.arrow_codec import SPARK_KAFKA_SCHEMA, decode_arrow
from kafkatier.storage.errors import OffsetOutOfRangeError
from kafkatier.storage.log_reader import AbortedTransactionFilter
from kafkatier.storage.segment import AnyBatch, LogSegment
from kafkatier.storage.txn_index import AbortedTxn
from kafkatier.storage.wire import NO_TIMESTAMP

if TYPE_CHECKING:
    from kafkatier.sink.source_remote import RemoteSettings
    from kafkatier.tiering.store import ObjectStore

DEFAULT_CHUNK_BYTES = 16 * 1024 * 1024
BatchFilter = Callable[[Any], bool]


@dataclass(frozen=True)
class ReadTask:
    """One Spark task: offsets [start, end) of ``topic``-``partition`` under ``log_dir``, and
    below the local log start from ``store`` when the topic is tiered (``source_remote``)."""

    log_dir: str
    topic: str
    partition: int
    start: int
    end: int
    committed: bool = True
    include_headers: bool = False
    fail_on_data_loss: bool = True
    log_start_hint: int = 0
    aborted: tuple[AbortedTxn, ...] = ()
    chunk_bytes: int = DEFAULT_CHUNK_BYTES
    remote: RemoteSettings | None = None
    store: ObjectStore | None = None  # pickled with the task: settings only, no credentials


def output_schema(include_headers: bool) -> pa.Schema:
    """SPARK_KAFKA_SCHEMA, without ``headers`` unless asked for (as Spark's Kafka source)."""
    if include_headers:
        return SPARK_KAFKA_SCHEMA
    return SPARK_KAFKA_SCHEMA.remove(SPARK_KAFKA_SCHEMA.get_field_index("headers"))


def read_task(task: ReadTask) -> Iterator[pa.RecordBatch]:
    """The visible records of the task's range, as record batches in ``output_schema``."""
    if task.start >= task.end:
        return
    if task.store is not None:
        from kafkatier.sink.source_read_remote import read_joined  # it builds on this module

        yield from read_joined(task)
        return
    with ReadOnlyPartition(
        Path(task.log_dir), task.topic, task.partition, task.log_start_hint
    ) as part:
        start = checked_start(task, task.start, part.log_start_offset, str(part.directory))
        keep = batch_filter(task, [*part.aborted_txns(start, task.end), *task.aborted])
        for table in local_tables(part, task, start, keep):
            yield from project(table, task.include_headers).to_batches()


def local_tables(
    part: ReadOnlyPartition, task: ReadTask, start: int, keep: BatchFilter
) -> Iterator[pa.Table]:
    """The decoded rows of [start, task.end) in the local segments, chunk by chunk."""
    for segment in part.segments_from(start):
        if segment.base_offset >= task.end:
            break
        found = segment.translate_offset(start)
        if found is None:
            continue
        ranges = byte_ranges(segment, found.position, task.end, task.chunk_bytes)
        for position, size, legacy in ranges:
            yield (
                legacy_table(read_batches(segment, position, size), start, task, keep)
                if legacy
                else _decode(segment, position, size, start, task, keep)
            )


def checked_start(task: ReadTask, start: int, log_start: int, where: str) -> int:
    """Kafka's failOnDataLoss: a range starting below the log start (deleted by retention or
    never there) fails, or starts at the log start when data loss is accepted."""
    if start >= log_start:
        return start
    if task.fail_on_data_loss:
        raise OffsetOutOfRangeError(
            f"offset {start} of {task.topic}-{task.partition} is gone: the log starts at "
            f"{log_start} (set failOnDataLoss=false to read from there on)",
            file=where,
        )
    return log_start


def batch_filter(task: ReadTask, aborted: Iterable[AbortedTxn]) -> BatchFilter:
    """What ``task``'s isolation level lets through; ``aborted`` may repeat a transaction."""
    if not task.committed:
        return lambda batch: not batch.is_control
    txns: dict[tuple[int, int], AbortedTxn] = {}
    for txn in aborted:
        txns.setdefault((txn.producer_id, txn.first_offset), txn)
    return AbortedTransactionFilter.of(list(txns.values())).keep


def _decode(
    segment: LogSegment, position: int, size: int, start: int, task: ReadTask, keep: BatchFilter
) -> pa.Table:
    return decode_arrow(
        segment.read_bytes(position, size),
        topic=task.topic,
        partition=task.partition,
        file=str(segment.log_path),
        start_offset=start,
        end_offset=task.end,
        batch_filter=keep,
        base_position=position,
    )


def legacy_table(
    batches: Iterable[AnyBatch], start: int, task: ReadTask, keep: BatchFilter
) -> pa.Table:
    """Magic 0/1 messages, per record. As Kafka's consumer (and so Spark) reports them: v0 has
    no timestamp (-1) and timestamp type -1; v1 has its own."""
    rows: list[dict[str, Any]] = []
    for batch in batches:
        if not keep(batch):
            continue
        ts_type = int(batch.timestamp_type) if batch.magic >= 1 else NO_TIMESTAMP
        for record in batch.records():
            if start <= record.offset < task.end:
                rows.append(_row(task, record.offset, record.timestamp, ts_type, record))
    return pa.Table.from_pylist(rows, schema=SPARK_KAFKA_SCHEMA)


def _row(task: ReadTask, offset: int, timestamp: int, ts_type: int, record: Any) -> dict[str, Any]:
    headers = [{"key": k, "value": v} for k, v in record.headers]
    return {
        "key": record.key,
        "value": record.value,
        "topic": task.topic,
        "partition": task.partition,
        "offset": offset,
        "timestamp": timestamp * 1000,
        "timestampType": ts_type,
        "headers": headers or None,
    }


def project(table: pa.Table, include_headers: bool) -> pa.Table:
    return table if include_headers else table.drop_columns(["headers"])
