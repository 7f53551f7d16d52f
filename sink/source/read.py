"""The executor entry point of the ``kafkatier`` data source: one task's ranges, read from the
local files, or from the remote store joined with the local files when the topic is tiered.

A task planned over many small Kafka partitions (split.py) pays for each only what reading it
needs: its files are opened and the bytes of its range read, but the batches of all partitions
are decoded together (``storage.arrow.pieces``), about ``COALESCE_BYTES`` of log at a time, and
small record batches are merged before Spark gets them: every batch a Python data source hands
over costs a fixed round trip into the JVM.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa

from kafkatier.sink.source.joined import read_joined
from kafkatier.sink.source.local import local_parts
from kafkatier.sink.source.task import ReadTask, project
from kafkatier.storage.arrow.pieces import Run, decode_runs

COALESCE_BYTES = 4 << 20


def read_task(task: ReadTask) -> Iterator[pa.RecordBatch]:
    """The visible records of one range, as record batches in ``output_schema``, decoded as
    they are read (no merging)."""
    if task.start >= task.end:
        return
    if task.store is not None:
        yield from read_joined(task)
        return
    for part in local_parts(task):
        table = part if isinstance(part, pa.Table) else _decoded([part], task.include_headers)
        yield from table.to_batches()


def read_ranges(tasks: Iterable[ReadTask]) -> Iterator[pa.RecordBatch]:
    """The records of every range in turn (module docstring): at most about
    ``COALESCE_BYTES`` of log and as much of rows held, beyond one run or batch. All ranges of
    one Spark task come from one query's options (``include_headers``)."""
    merged = _Merger()
    runs: list[Run] = []
    held = 0
    headers = False
    for task in tasks:
        headers = task.include_headers
        parts = read_task(task) if task.store is not None else local_parts(task)
        for part in parts if task.start < task.end else ():
            if isinstance(part, Run):
                runs.append(part)
                held += len(part.data)
            if runs and (held >= COALESCE_BYTES or not isinstance(part, Run)):
                yield from merged.add(_decoded(runs, headers))  # rows stay in order
                runs, held = [], 0
            if not isinstance(part, Run):
                yield from merged.add(part)
    if runs:
        yield from merged.add(_decoded(runs, headers))
    yield from merged.flush()


def _decoded(runs: list[Run], include_headers: bool) -> pa.Table:
    return project(decode_runs(runs), include_headers)


class _Merger:
    """Record batches merged up to about ``COALESCE_BYTES`` each, in order."""

    def __init__(self) -> None:
        self.pending: list[pa.RecordBatch] = []
        self.held = 0

    def add(self, rows: pa.Table | pa.RecordBatch) -> Iterator[pa.RecordBatch]:
        for batch in rows.to_batches() if isinstance(rows, pa.Table) else [rows]:
            self.pending.append(batch)
            self.held += batch.nbytes
            if self.held >= COALESCE_BYTES:
                yield from self.flush()

    def flush(self) -> Iterator[pa.RecordBatch]:
        if self.pending:
            batches, self.pending, self.held = self.pending, [], 0
            yield batches[0] if len(batches) == 1 else pa.concat_batches(batches)
