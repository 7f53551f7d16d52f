"""The executor entry point of the ``kafkatier`` data source: one task's ranges, read from the
local files, or from the remote store joined with the local files when the topic is tiered.

Small record batches are merged before Spark gets them (``COALESCE_BYTES``): every batch a
Python data source hands over costs a fixed round trip into the JVM, and a task planned over many
small Kafka partitions (split.py) would otherwise hand over at least one batch per partition.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa

from kafkatier.sink.source.joined import read_joined
from kafkatier.sink.source.local import read_local
from kafkatier.sink.source.task import ReadTask

COALESCE_BYTES = 4 << 20


def read_task(task: ReadTask) -> Iterator[pa.RecordBatch]:
    """The visible records of the task's range, as record batches in ``output_schema``."""
    if task.start >= task.end:
        return
    yield from (read_joined(task) if task.store is not None else read_local(task))


def read_ranges(tasks: Iterable[ReadTask]) -> Iterator[pa.RecordBatch]:
    """The records of every range in turn, small batches merged (module docstring): at most
    about ``COALESCE_BYTES`` more held than one batch."""
    pending: list[pa.RecordBatch] = []
    held = 0
    for task in tasks:
        for batch in read_task(task):
            pending.append(batch)
            held += batch.nbytes
            if held >= COALESCE_BYTES:
                yield _merged(pending)
                pending, held = [], 0
    if pending:
        yield _merged(pending)


def _merged(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    return batches[0] if len(batches) == 1 else pa.concat_batches(batches)
