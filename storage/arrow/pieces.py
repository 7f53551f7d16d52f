"""Many short runs of record batches v2, of many partitions, decoded in one pass into one table.

A reader of a topic of a thousand small partitions holds a thousand short runs of batches (one
or two batches each); decoding them one by one pays the fixed cost of a decode (selection,
kernel calls, an Arrow table) a thousand times. Here the runs are joined into one buffer and go
through :mod:`~kafkatier.storage.arrow.decode` once: each run is framed on its own (a partial
batch at the end of a run ends that run only), every batch is selected by its own run's offset
range, filter and CRC, the records of all are parsed together, and each row then gets its run's
topic and partition; the records of a boundary batch outside its run's range are dropped.
The rows are those of ``decode_arrow`` over each run, run after run; so are the errors, which
name the run's file and position.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from kafkatier.storage.arrow import decode as D
from kafkatier.storage.arrow.numpy_views import int_values
from kafkatier.storage.arrow.schema import SPARK_KAFKA_SCHEMA

_EVERY_OFFSET = (-D.INT64_MAX - 1, D.INT64_MAX)
BatchFilter = Callable[[Any], bool]


@dataclass(frozen=True)
class Run:
    """Whole batches of one partition, read from ``file`` at ``position``, and what of them to
    keep: records in [start, end) of batches ``batch_filter`` accepts (as ``decode_arrow``)."""

    data: bytes
    topic: str
    partition: int
    start: int
    end: int
    batch_filter: BatchFilter | None = None
    file: str | None = None
    position: int = 0


@dataclass(frozen=True)
class _Joined(D.Source):
    """The runs back to back (``starts``: where each begins); positions map back to runs."""

    starts: NDArray[np.int64] = dataclasses.field(default_factory=lambda: np.zeros(1, np.int64))
    runs: Sequence[Run] = ()

    def run_at(self, position: int) -> int:
        return int(np.searchsorted(self.starts, position, side="right")) - 1

    def where(self, position: int) -> dict[str, Any]:
        run = self.run_at(position)
        at = self.runs[run].position + int(position) - int(self.starts[run])
        return {"file": self.runs[run].file, "position": at}

    def part(self, run: int) -> D.Source:
        begin, end = int(self.starts[run]), int(self.starts[run]) + len(self.runs[run].data)
        r = self.runs[run]
        return D.Source(self.view[begin:end], self.array[begin:end], r.file, r.position)


def decode_runs(runs: Sequence[Run], *, verify_crc: bool = True) -> pa.Table:
    """The visible records of ``runs``, in order, as one table in SPARK_KAFKA_SCHEMA."""
    if not runs:
        return SPARK_KAFKA_SCHEMA.empty_table()
    sizes = [len(r.data) for r in runs]
    starts = np.zeros(len(runs), np.int64)
    np.cumsum(sizes[:-1], out=starts[1:])
    joined = runs[0].data if len(runs) == 1 else b"".join(r.data for r in runs)  # no copy of one
    view = memoryview(joined).toreadonly()
    src = _Joined(view, np.frombuffer(view, np.uint8), None, 0, starts, runs)
    positions, hdr, run_of = _frame(src)
    bounds = (np.array([r.start for r in runs], np.int64)[run_of],
              np.array([r.end for r in runs], np.int64)[run_of])  # fmt: skip
    idx = D.select(src, positions, hdr, bounds, _filter(src), verify_crc)
    tables = [
        _labelled(D.decode_group(src, g, _EVERY_OFFSET, "", 0), src, g)
        for g in D.groups(src, positions, hdr, idx)
    ]
    if not tables:
        return SPARK_KAFKA_SCHEMA.empty_table()
    return tables[0] if len(tables) == 1 else pa.concat_tables(tables)


def _frame(src: _Joined) -> tuple[NDArray[np.int64], NDArray[Any], NDArray[np.intp]]:
    """Every run's batches, each run framed alone: positions in the joined buffer, headers,
    and the run of each batch."""
    found = [D.frame(src.part(r)) for r in range(len(src.runs))]
    positions = np.concatenate([p + src.starts[r] for r, p in enumerate(found)]).astype(np.int64)
    run_of = np.repeat(np.arange(len(found), dtype=np.intp), [len(p) for p in found])
    return positions, D.headers_at(src.array, positions), run_of


def _filter(src: _Joined) -> BatchFilter | None:
    """One filter for all batches: each batch goes to its own run's filter, with its position
    in that run's file; None when no run has one."""
    if all(r.batch_filter is None for r in src.runs):
        return None

    def keep(header: Any) -> bool:
        run = src.run_at(header.position)
        own = src.runs[run].batch_filter
        at = src.where(header.position)["position"]
        return True if own is None else own(dataclasses.replace(header, position=at))

    return keep


def _labelled(table: pa.Table, src: _Joined, group: D.Group) -> pa.Table:
    """``table`` (every record of the group's batches) with each row's topic and partition, and
    without the records outside their run's offset range."""
    counts = group.meta[:, 0]
    row_run = np.repeat(np.searchsorted(src.starts, group.positions, side="right") - 1, counts)
    names = [r.topic for r in src.runs]
    topic = (pa.repeat(pa.scalar(names[0], pa.string()), len(row_run))
             if len(set(names)) == 1 else pa.array(names, pa.string()).take(row_run))  # fmt: skip
    partitions = np.array([r.partition for r in src.runs], np.int32)[row_run]
    table = table.set_column(2, "topic", topic).set_column(3, "partition", pa.array(partitions))
    offsets = int_values(table.column("offset"))
    keep = (offsets >= np.array([r.start for r in src.runs], np.int64)[row_run]) & (
        offsets < np.array([r.end for r in src.runs], np.int64)[row_run]
    )
    return table if keep.all() else table.filter(pa.array(keep))
