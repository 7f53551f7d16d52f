"""The encode job's pieces: where each Kafka partition's batches are in the staging files, as
the executors hand them back to the driver, grouped by partition (:class:`PartitionSpans`).

Staged (the default where executors share the driver's file system): the JVM encoder's tasks
pack their rows into one array each (``PieceRows.java``), read here from a file
(:func:`unpack_pieces`); the Python encoder's are collected as Arrow. Fetched (``staging=False``):
the bytes come through Spark into one staging file the driver writes (:func:`_fetched`).
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import TYPE_CHECKING, Final, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kafkatier.sink.encode import CHUNK_ARROW, CHUNK_SCHEMA, Encode, EncodePlan
from kafkatier.sink.jvm import JvmEncoder, input_error
from kafkatier.sink.stage import StagingPlace
from kafkatier.storage.errors import CorruptRecordError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


class PartitionSpans(NamedTuple):
    """Where one Kafka partition's encoded batches are (provisional sequences, base offsets 0):
    (path, position, length) spans in the staging files, in task order (a tuple: one is built
    per partition and batch)."""

    topic: str
    partition: int
    records: int
    spans: list[tuple[str, int, int]]


def encoded_spans(
    df: DataFrame, plan: EncodePlan, place: StagingPlace, jvm: JvmEncoder | None = None
) -> list[PartitionSpans]:
    """The micro-batch encoded by one parallel job: the JVM encoder's (:mod:`kafkatier.sink.jvm`)
    when given, else a ``mapInArrow`` of Python workers; where its batches are, by partition.

    Staged (``plan.staging_dir``): the job writes the staging files and returns where each piece
    is (a few small rows per task: the JVM encoder's packed in one array a task and handed over
    with no DataFrame around the job, :func:`unpack_pieces`, 20-30 ms less a micro-batch
    than the pieces' DataFrame collected as Arrow; the Python encoder's collected as Arrow).
    Fetched: the job persists the pieces to executor disk, and ``toLocalIterator`` brings them
    one task at a time into one staging file the driver writes at ``place``; the driver checks
    them against the job's own summary."""
    try:
        if jvm is not None and plan.staging_dir is not None:
            return _by_partition(unpack_pieces(jvm.encode_staged(df, plan, place.file("pieces"))))
        if jvm is not None:
            encoded = jvm.encode(df, plan)  # coalesces its rows to plan.max_tasks itself
        else:
            rows = df.coalesce(plan.max_tasks) if plan.max_tasks else df
            encoded = rows.mapInArrow(Encode(plan), CHUNK_SCHEMA)
        if plan.staging_dir is not None:
            return _by_partition(encoded.toArrow())
        return _by_partition(_fetched(encoded, place.file("driver.kbatches")))
    except Exception as exc:
        mapped = input_error(exc)  # bad input found by the JVM encoder: the sink's own error
        if mapped is None:
            raise
        raise mapped from None


_SPAN_SCHEMA: Final = pa.schema([field for field in CHUNK_ARROW if field.name != "data"])
_SPAN_FIELDS: Final = tuple(_SPAN_SCHEMA.names)
_ORDER: Final = [("topic", "ascending"), ("partition", "ascending"), ("task", "ascending"),
                 ("row", "ascending")]  # fmt: skip


_PACKED_ROW: Final = np.dtype([("task", "<i4"), ("topic", "<i4"), ("partition", "<i4"),
                               ("path", "<i4"), ("records", "<i8"), ("position", "<i8"),
                               ("length", "<i8")])  # fmt: skip


def unpack_pieces(packed: bytes) -> pa.Table:
    """The staged pieces' rows as the JVM encoder packed them (``PieceRows.java``: each task's
    names, then a fixed row a piece), as the columns :func:`_by_partition` takes."""
    view = memoryview(packed)
    try:
        (tasks,), at, tables = struct.unpack_from("<i", view), 4, []
        for _ in range(tasks):
            (size,) = struct.unpack_from("<i", view, at)
            tables.append(_unpack_task(view[at + 4 : at + 4 + size]))
            at += 4 + size
    except (struct.error, ValueError, IndexError) as exc:
        raise CorruptRecordError(
            f"the JVM encoder's pieces are malformed ({exc}) in {len(packed)} bytes",
            file="<staged>",
        ) from None
    return pa.concat_tables(tables) if tables else _SPAN_SCHEMA.empty_table()


def _unpack_task(view: memoryview) -> pa.Table:
    """One task's packed rows."""
    (count,), at = struct.unpack_from("<i", view), 4
    names = []
    for _ in range(count):
        (size,) = struct.unpack_from("<i", view, at)
        names.append(bytes(view[at + 4 : at + 4 + size]).decode())
        at += 4 + size
    (n,) = struct.unpack_from("<i", view, at)
    rows = np.frombuffer(view, _PACKED_ROW, n, at + 4)
    strings = pa.array(names, pa.string())
    columns = {
        "task": pa.array(rows["task"]), "topic": strings.take(pa.array(rows["topic"])),
        "partition": pa.array(rows["partition"]), "records": pa.array(rows["records"]),
        "path": strings.take(pa.array(rows["path"])), "position": pa.array(rows["position"]),
        "length": pa.array(rows["length"]),
    }  # fmt: skip
    return pa.table(columns).cast(_SPAN_SCHEMA)


def _by_partition(table: pa.Table) -> list[PartitionSpans]:
    """The staged rows (collected as Arrow columns: a ``collect()`` of Rows cost Python's
    unpickling of one Row per piece) grouped by partition, each group in task order, each
    task's pieces in the order it wrote them: partitions are independent logs, so only the
    order within each one matters. Arrow sorts; one loop over the sorted columns groups (one
    object a piece cost 9 us a piece at 1,024 partitions, ad hoc phase timers)."""
    if tuple(table.column_names[: len(_SPAN_FIELDS)]) != _SPAN_FIELDS:
        names = table.column_names
        raise CorruptRecordError(f"staged pieces have columns {names}", file="<staged>")
    rows = table.select(list(_SPAN_FIELDS)).append_column("row", pa.array(range(len(table))))
    ordered = rows.take(pc.sort_indices(rows, sort_keys=_ORDER))
    columns = [ordered.column(name).to_pylist() for name in _SPAN_FIELDS[1:]]
    groups: list[PartitionSpans] = []
    key: tuple[str, int] | None = None
    spans: list[tuple[str, int, int]] = []
    records = 0
    for topic, partition, count, path, position, length in zip(*columns, strict=True):
        if key != (topic, partition):
            if key is not None:
                groups.append(PartitionSpans(*key, records, spans))
            key, spans, records = (topic, partition), [], 0
        spans.append((path, position, length))
        records += count
    if key is not None:
        groups.append(PartitionSpans(*key, records, spans))
    return groups


def _fetched(encoded: DataFrame, path: Path) -> pa.Table:
    """The pieces fetched one task at a time into the staging file ``path``, as the staged
    rows' columns (``_SPAN_FIELDS``)."""
    from pyspark import StorageLevel

    encoded = encoded.persist(StorageLevel.DISK_ONLY)
    spans: list[tuple[int, str, int, int, str, int, int]] = []
    try:
        summary = encoded.drop("data").collect()  # also computes every task, in parallel
        with open(path, "wb") as out:
            for row in encoded.toLocalIterator(prefetchPartitions=True):
                want = summary[len(spans)] if len(spans) < len(summary) else None
                if want is None or (want["topic"], want["partition"], want["records"]) != (
                    row["topic"], row["partition"], row["records"]
                ):  # fmt: skip
                    raise CorruptRecordError(
                        "the encoded micro-batch changed between its two reads; fix: make the "
                        "input deterministic (e.g. df.persist() before the sink)",
                        file="<fetched>",
                    )
                position = out.tell()
                out.write(row["data"])
                spans.append((row["task"], row["topic"], row["partition"], row["records"],
                              str(path), position, out.tell() - position))  # fmt: skip
        if len(spans) != len(summary):
            raise CorruptRecordError("encoded pieces missing on fetch", file="<fetched>")
        columns = [list(column) for column in zip(*spans, strict=True)]
        return pa.table(columns or [[] for _ in _SPAN_FIELDS], schema=_SPAN_SCHEMA)
    finally:
        encoded.unpersist()
