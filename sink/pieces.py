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


class Encoded(NamedTuple):
    """A micro-batch's pieces grouped by partition, with the staging files they are in and
    their bytes, which the check asks of them all before it looks at any (taken from the
    pieces' columns: gathered from 2,048 spans, 1.9 ms of the driver's Python at 1,024
    partitions, py-spy)."""

    groups: list[PartitionSpans]
    paths: frozenset[str]
    size: int

    @classmethod
    def of(cls, groups: list[PartitionSpans]) -> Encoded:
        """``groups`` with the paths and bytes of their spans (groups not made from columns)."""
        spans = [span for group in groups for span in group.spans]
        return cls(groups, frozenset(path for path, _, _ in spans), sum(n for _, _, n in spans))


def encoded_spans(
    df: DataFrame, plan: EncodePlan, place: StagingPlace, jvm: JvmEncoder | None = None
) -> Encoded:
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


def _by_partition(table: pa.Table) -> Encoded:
    """The staged rows (collected as Arrow columns: a ``collect()`` of Rows cost Python's
    unpickling of one Row per piece) grouped by partition, each group in task order, each
    task's pieces in the order it wrote them: partitions are independent logs, so only the
    order within each one matters. Arrow sorts, numpy finds where each partition's rows start
    and sums their records, and the spans are made in one ``zip`` and sliced a group each (a
    loop over the pieces took 4-5 ms of a micro-batch at 1,024 partitions, 2,048 pieces; an
    object a piece before it, 9 us a piece)."""
    if tuple(table.column_names[: len(_SPAN_FIELDS)]) != _SPAN_FIELDS:
        names = table.column_names
        raise CorruptRecordError(f"staged pieces have columns {names}", file="<staged>")
    if table.num_rows == 0:
        return Encoded([], frozenset(), 0)
    rows = table.select(list(_SPAN_FIELDS)).append_column("row", pa.array(range(len(table))))
    ordered = rows.take(pc.sort_indices(rows, sort_keys=_ORDER))
    topics = ordered.column("topic").combine_chunks().dictionary_encode()
    names, topic_ids = topics.dictionary.to_pylist(), topics.indices.to_numpy()
    partitions = ordered.column("partition").to_numpy()
    change = np.flatnonzero((np.diff(topic_ids) != 0) | (np.diff(partitions) != 0)) + 1
    starts = np.concatenate(([0], change))
    ends = [*change.tolist(), len(partitions)]
    records = np.add.reduceat(ordered.column("records").to_numpy(), starts).tolist()
    spans = list(zip(*(ordered.column(name).to_pylist() for name in ("path", "position",
                                                                      "length")), strict=True))
    keys = zip([names[i] for i in topic_ids[starts].tolist()], partitions[starts].tolist(),
               strict=True)  # fmt: skip
    groups = [PartitionSpans(topic, partition, count, spans[start:end])
              for (topic, partition), count, start, end
              in zip(keys, records, starts.tolist(), ends, strict=True)]  # fmt: skip
    paths = frozenset(pc.unique(ordered.column("path")).to_pylist())
    return Encoded(groups, paths, int(pc.sum(ordered.column("length")).as_py()))


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
