"""The executor side of the ``kafkatier`` data source over local files: one offset range of one
partition, read chunk by chunk for the Arrow decoder, in Spark's Kafka source schema.

v2 batches are read as runs of whole batches of at most ``chunk_bytes`` (``Run``), which the
caller decodes with the numba decoder (``storage.arrow.pieces``), many partitions' runs at once,
so a task's memory is bounded by a chunk of log plus its decoded rows, whatever the range.
Legacy magic 0/1 message sets (Kafka before 0.11) take the per-record path. ``read_committed``
drops control batches and the data of aborted transactions with the engine's
``AbortedTransactionFilter`` (Kafka's consumer logic), one filter for the whole range so its state
carries across chunks; the aborted transactions come from the ``.txnindex`` files and from the
ABORT markers the planner saw (see ``storage/log/bounds.py``); no filter at all when none was
aborted in the range.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from kafkatier.sink.source.task import BatchFilter, ReadTask, batch_filter, checked_start, project
from kafkatier.storage.arrow.pieces import Run, decode_runs
from kafkatier.storage.arrow.schema import SPARK_KAFKA_SCHEMA
from kafkatier.storage.log.active_index import batches_from
from kafkatier.storage.log.batch_position import BatchPosition
from kafkatier.storage.log.readonly import (
    ReadOnlyPartition,
    SegmentBytes,
    byte_ranges,
    read_batches,
)
from kafkatier.storage.log.segment import AnyBatch
from kafkatier.storage.wire import NO_TIMESTAMP


def local_parts(task: ReadTask) -> Iterator[Run | pa.Table]:
    """The task's range in the partition's local files: runs of v2 batches still to decode
    (``storage.arrow.pieces``: a caller decodes many partitions' runs at once), and the decoded
    rows of legacy batches, in ``output_schema``."""
    with ReadOnlyPartition(
        Path(task.log_dir), task.topic, task.partition, task.log_start_hint
    ) as part:
        start = checked_start(task, task.start, part.log_start_offset, part.path)
        keep = batch_filter(task, [*part.aborted_txns(start, task.end), *task.aborted])
        for found in _parts(part, task, start, keep):
            yield found if isinstance(found, Run) else project(found, task.include_headers)


def local_tables(
    part: ReadOnlyPartition, task: ReadTask, start: int, keep: BatchFilter | None
) -> Iterator[pa.Table]:
    """The decoded rows of [start, task.end) in the local segments, chunk by chunk."""
    for found in _parts(part, task, start, keep):
        yield decode_runs([found]) if isinstance(found, Run) else found


def _parts(
    part: ReadOnlyPartition, task: ReadTask, start: int, keep: BatchFilter | None
) -> Iterator[Run | pa.Table]:
    """Closed segments through their offset index; the last one through its ``.log`` alone
    (``storage.log.tail``: a small file read at once), its headers framed from where its
    index, read as a hint the batch there confirms, points (``active_index.py``), to ``start``."""
    for base in part.bases_from(start):
        if base >= task.end:
            break
        if base != part.bases[-1]:
            segment = part.segment(base)
            found = segment.translate_offset(start)
            if found is not None:
                headers = segment.scan_headers(found.position)
                yield from _runs(segment, headers, found.position, task, start, keep)
            continue
        with part.last_log() as log:
            tail = batches_from(log, part.file(base, ".index"), base, start)
            first = next(tail, None)
            if first is not None:
                headers = itertools.chain([first], tail)
                yield from _runs(log, headers, first.position, task, start, keep)


def _runs(
    segment: SegmentBytes,
    headers: Iterable[BatchPosition],
    position: int,
    task: ReadTask,
    start: int,
    keep: BatchFilter | None,
) -> Iterator[Run | pa.Table]:
    for at, size, legacy in byte_ranges(headers, position, task.end, task.chunk_bytes):
        if legacy:
            yield legacy_table(read_batches(segment, at, size), start, task, keep)
        else:
            yield Run(segment.read_bytes(at, size), task.topic, task.partition, start, task.end,
                      keep, str(segment.log_path), at)  # fmt: skip


def legacy_table(
    batches: Iterable[AnyBatch], start: int, task: ReadTask, keep: BatchFilter | None
) -> pa.Table:
    """Magic 0/1 messages, per record. As Kafka's consumer (and so Spark) reports them: v0 has
    no timestamp (-1) and timestamp type -1; v1 has its own."""
    rows: list[dict[str, Any]] = []
    for batch in batches:
        if batch.is_control or (keep is not None and not keep(batch)):
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
