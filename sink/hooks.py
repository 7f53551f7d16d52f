"""What the sink reads from its surroundings: the streaming query's id, and the crash hook.

``KAFKATIER_SINK_CRASH=<point>[:<batch>]`` makes the driver SIGKILL itself at
``after-stage-sync`` (the batch's staging files durable, its commit not yet decided),
``after-decide``, ``after-append`` (after a partition's batches and marker, or a call's worth of
partitions appended at once: ``append.write_all``) or ``after-appends``
(every partition written, none made durable yet), the first time it gets there or only in that
batch: the crash tests' way to stop a real driver at a chosen step of the protocol
(:mod:`kafkatier.sink.sink`).
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

CRASH_ENV: Final = "KAFKATIER_SINK_CRASH"
QUERY_ID_PROPERTY: Final = "sql.streaming.queryId"


def crash_points(batch_id: int) -> Callable[[str], None]:
    """The crash hook of batch ``batch_id``: SIGKILL this process at a point when
    KAFKATIER_SINK_CRASH asks for it (crash tests). The variable is read once a batch, not at
    every point: the sink passes one point per partition appended."""
    spec = os.environ.get(CRASH_ENV)
    if not spec:
        return no_crash
    name, _, batch = spec.partition(":")
    if batch and int(batch) != batch_id:
        return no_crash

    def crash(point: str) -> None:
        if point == name:
            os.kill(os.getpid(), signal.SIGKILL)

    return crash


def no_crash(point: str) -> None:
    del point


def query_id(df: DataFrame) -> str | None:
    """The streaming query's id (kept in its checkpoint), None outside a streaming query."""
    with contextlib.suppress(Exception):
        value: Any = df.sparkSession.sparkContext.getLocalProperty(QUERY_ID_PROPERTY)
        return str(value) if value else None
    return None
