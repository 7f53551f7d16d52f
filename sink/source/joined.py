"""The executor side of a tiered partition: offsets below the local log start read from the
remote store, the rest from the local files (``remote.py`` has the design).

The join point is the local log start *when the task runs*: the sidecar deletes a local segment
only after its remote copy is FINISHED, so whatever is no longer local is remote. A segment the
sidecar deletes while the task reads it (``FileNotFoundError``), or a remote object that remote
retention or compaction removed after the task read the manifest (``ObjectNotFoundError``),
makes the task start over, with a fresh listing and manifest, from the offset after the last
row it produced.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

from kafkatier.sink.source.local import legacy_table, local_tables
from kafkatier.sink.source.remote import RemoteSettings, earliest, remote_reader
from kafkatier.sink.source.task import BatchFilter, ReadTask, batch_filter, checked_start, project
from kafkatier.storage.arrow.codec import decode_arrow
from kafkatier.storage.index.txn_index import AbortedTxn
from kafkatier.storage.log.readonly import ReadOnlyPartition
from kafkatier.storage.record.records import iter_batches
from kafkatier.tiering.errors import ObjectNotFoundError
from kafkatier.tiering.read.remote_reader import RemoteLogReader, batch_spans

ATTEMPTS = 3


def read_joined(task: ReadTask) -> Iterator[pa.RecordBatch]:
    """The visible records of the task's range over remote and local segments."""
    next_offset = task.start
    for attempt in range(ATTEMPTS):
        try:
            for table in _joined_tables(task, next_offset):
                if table.num_rows:
                    next_offset = int(table.column("offset")[-1].as_py()) + 1
                yield from project(table, task.include_headers).to_batches()
            return
        except (FileNotFoundError, ObjectNotFoundError):
            if attempt + 1 == ATTEMPTS:
                raise


def _joined_tables(task: ReadTask, begin: int) -> Iterator[pa.Table]:
    assert task.store is not None
    settings = task.remote or RemoteSettings(task.store.url)
    reader = remote_reader(settings, task.store, task.log_dir, (task.topic, task.partition),
                           task.chunk_bytes)  # fmt: skip
    with contextlib.ExitStack() as stack:
        local = _local(task)
        if local is not None:
            stack.enter_context(local)
        local_start = local.log_start_offset if local is not None else task.end
        lowest = earliest(reader, None if local is None else local_start)
        start = checked_start(task, begin, lowest, f"{settings.url} + {task.log_dir}")
        keep = batch_filter(task, [*_aborted(task, reader, local, start), *task.aborted])
        if start < local_start:
            with settings.errors():
                yield from _remote_tables(reader, task, start, min(task.end, local_start), keep)
        if local is not None and task.end > local_start:
            yield from local_tables(local, task, max(start, local_start), keep)


def _local(task: ReadTask) -> ReadOnlyPartition | None:
    """The local partition, if it has a segment (a remote-only partition has no directory)."""
    try:
        part = ReadOnlyPartition(
            Path(task.log_dir), task.topic, task.partition, task.log_start_hint
        )
    except FileNotFoundError:
        return None
    if not part.bases:
        part.close()
        return None
    return part


def _aborted(
    task: ReadTask, reader: RemoteLogReader, local: ReadOnlyPartition | None, start: int
) -> list[AbortedTxn]:
    """Kafka's collectAbortedTransactions across tiers: the remote ``txnindex`` objects from
    ``start`` on, then the local ``.txnindex`` files unless the remote search was complete."""
    if not task.committed:
        return []
    found, complete = reader.aborted_txns(start, task.end)
    if not complete and local is not None:
        found += local.aborted_txns(start, task.end)
    return found


def _remote_tables(
    reader: RemoteLogReader, task: ReadTask, start: int, stop: int, keep: BatchFilter | None
) -> Iterator[pa.Table]:
    """Decoded rows of [start, stop) from the remote ``log`` objects, one ranged GET a time;
    v2 runs through the numba decoder, legacy (magic 0/1) runs per record."""
    for key, position, data in reader.byte_runs(start, stop):
        spans = batch_spans(data)
        i = 0
        while i < len(spans):
            j = i
            while j < len(spans) and spans[j].legacy == spans[i].legacy:
                j += 1
            begin, end = spans[i].position, spans[j - 1].position + spans[j - 1].size
            run = data[begin:end]
            if spans[i].legacy:
                yield legacy_table(iter_batches(run, file=key), start, task, keep)
            else:
                yield decode_arrow(
                    run, topic=task.topic, partition=task.partition, file=key,
                    start_offset=start, end_offset=stop, batch_filter=keep,
                    base_position=position + begin,
                )  # fmt: skip
            i = j
