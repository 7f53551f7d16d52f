"""One task of the ``kafkatier`` data source: the offset range it reads, and the rules every
reader of a range applies (Spark's Kafka source's output schema, ``failOnDataLoss``, isolation).

The planner (``plan.py``) makes tasks on the driver; they are pickled to executors, where
``read.py`` reads them from the local files (``tiering/metadata/local.py``) or from remote and
local segments joined (``joined.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from kafkatier.sink.source.remote import RemoteSettings
from kafkatier.storage.arrow.schema import SPARK_KAFKA_SCHEMA
from kafkatier.storage.errors import OffsetOutOfRangeError
from kafkatier.storage.index.txn_index import AbortedTxn
from kafkatier.storage.log.reader import AbortedTransactionFilter
from kafkatier.tiering.store.object_store import ObjectStore

DEFAULT_CHUNK_BYTES = 16 * 1024 * 1024
BatchFilter = Callable[[Any], bool]


@dataclass(frozen=True)
class ReadTask:
    """One Spark task: offsets [start, end) of ``topic``-``partition`` under ``log_dir``, and
    below the local log start from ``store`` when the topic is tiered (``remote``)."""

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


def batch_filter(task: ReadTask, aborted: Iterable[AbortedTxn]) -> BatchFilter | None:
    """What ``task``'s isolation level lets through; ``aborted`` may repeat a transaction.
    None when that is every data batch (readers drop control batches anyway): no transaction
    aborted in the range, or ``read_uncommitted``."""
    txns: dict[tuple[int, int], AbortedTxn] = {}
    for txn in aborted if task.committed else ():
        txns.setdefault((txn.producer_id, txn.first_offset), txn)
    return AbortedTransactionFilter.of(list(txns.values())).keep if txns else None


def project(table: pa.Table, include_headers: bool) -> pa.Table:
    return table if include_headers else table.drop_columns(["headers"])
