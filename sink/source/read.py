"""The executor entry point of the ``kafkatier`` data source: one task's range, read from the
local files, or from the remote store joined with the local files when the topic is tiered."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from kafkatier.sink.source.joined import read_joined
from kafkatier.sink.source.local import read_local
from kafkatier.sink.source.task import ReadTask


def read_task(task: ReadTask) -> Iterator[pa.RecordBatch]:
    """The visible records of the task's range, as record batches in ``output_schema``."""
    if task.start >= task.end:
        return
    yield from (read_joined(task) if task.store is not None else read_local(task))
