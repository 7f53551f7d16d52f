"""Spark input partitions planned by bytes, as Spark's file sources plan theirs.

A Spark task costs far more than opening a Kafka partition's files (a Python worker, a pickled
plan, a result stream), so one task per Kafka partition makes a topic of a thousand small
partitions a thousand tasks. Instead, as ``FilePartition.getFilePartitions`` does for files:

* the target split size is ``min(maxPartitionBytes, max(openCostInBytes, total / cores))``, the
  total counting each range's bytes plus ``openCostInBytes`` (what opening it is worth: 256 KiB
  by default, measured, where Spark's files take 4 MiB);
* a range larger than the split size is cut into that many offset ranges of about equal bytes
  (Spark's Kafka source ``minPartitions`` does the same by offsets), so one large partition is
  read by several tasks;
* the pieces, largest first, are packed into tasks while a task stays within the split size.

``cores`` is Spark's ``defaultParallelism`` when the JVM reader plans (``jvm.py`` asks Spark),
else the planning machine's CPU count: Spark's ``defaultParallelism`` is not visible to a Python
data source. ``minPartitions`` is what Spark's Kafka source makes of it, at least that many
tasks where the offsets allow (the split size is the total over it, with no open cost as its
floor, and ranges are cut at their records' bytes over it: a small topic stayed one task
whatever it asked). ``maxRecordsPerPartition``, as in Spark's Kafka source, caps the offsets a
task reads: ranges are cut at it and a task takes no more (with ``minPartitions`` too, the tasks
are as many as the larger of the two asks). A range's bytes are estimated from its partition's
segment sizes, in proportion to the offsets it covers.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from collections.abc import Sequence
from dataclasses import dataclass

from kafkatier.sink.source.task import ReadTask

MAX_PARTITION_BYTES = 128 * 1024 * 1024
"""Spark's ``spark.sql.files.maxPartitionBytes`` default."""
OPEN_COST_BYTES = 256 * 1024
"""What opening one more Kafka partition in a task is worth, in bytes read. Spark's file
sources assume 4 MiB a file; here an open (about a millisecond: a few files and a tail scan) is
cheap next to a task (about 170 ms for a Python data source on this machine: 32 tasks over
1,024 partitions of 25 kB took 8.8 s, 3 tasks 3.3 s; bench/scale.py)."""


@dataclass(frozen=True)
class SplitSettings:
    """The options ``minPartitions``, ``maxRecordsPerPartition``, ``maxPartitionBytes`` and
    ``openCostInBytes``."""

    min_partitions: int | None = None
    max_records: int | None = None  # offsets a task reads at most
    max_partition_bytes: int = MAX_PARTITION_BYTES
    open_cost_bytes: int = OPEN_COST_BYTES


@dataclass(frozen=True)
class Sized:
    """A range to read and its estimated bytes."""

    task: ReadTask
    size: int


def estimate(task: ReadTask, size_bytes: int, first: int, end: int) -> int:
    """Bytes of ``task``'s range in a partition of ``size_bytes`` holding offsets [first, end)."""
    span = max(end - first, 1)
    return min(size_bytes, size_bytes * (task.end - task.start) // span)


def split_size(ranges: Sequence[Sized], settings: SplitSettings, cores: int | None = None) -> int:
    """What a task holds, its ranges' bytes and an open cost each."""
    total = sum(r.size + settings.open_cost_bytes for r in ranges)
    if settings.min_partitions:  # every task within it: at least min_partitions of them
        return max(min(settings.max_partition_bytes, total // settings.min_partitions), 1)
    per_core = total // max(cores or os.cpu_count() or 1, 1)
    return max(min(settings.max_partition_bytes, max(settings.open_cost_bytes, per_core)), 1)


def piece_size(ranges: Sequence[Sized], settings: SplitSettings, limit: int) -> int:
    """The bytes a range is cut at: the split size, or with ``minPartitions`` the records'
    bytes over it (a piece with its open cost may fill a task alone: a small topic is still
    cut into as many tasks as asked)."""
    if not settings.min_partitions:
        return limit
    return max(min(limit, sum(r.size for r in ranges) // settings.min_partitions), 1)


def cut(r: Sized, limit: int, max_records: int | None = None) -> list[Sized]:
    """``r`` in pieces of at most about ``limit`` bytes and at most ``max_records`` offsets, by
    offsets."""
    offsets = r.task.end - r.task.start
    n = min(-(-r.size // limit), offsets)
    if max_records:
        n = max(n, -(-offsets // max_records))
    if n <= 1:
        return [r]
    bounds = [r.task.start + offsets * i // n for i in range(n + 1)]
    return [Sized(dataclasses.replace(r.task, start=a, end=b), r.size // n)
            for a, b in itertools.pairwise(bounds)]  # fmt: skip


def plan(
    ranges: Sequence[Sized], settings: SplitSettings, cores: int | None = None
) -> list[tuple[ReadTask, ...]]:
    """The Spark input partitions for ``ranges`` (module docstring); each task's ranges in
    (topic, partition, offset) order."""
    limit = split_size(ranges, settings, cores)
    at = piece_size(ranges, settings, limit)
    most = settings.max_records
    pieces = sorted((p for r in ranges for p in cut(r, at, most)), key=lambda p: -p.size)
    tasks: list[list[ReadTask]] = []
    current: list[ReadTask] = []
    filled = records = 0
    for piece in pieces:
        offsets = piece.task.end - piece.task.start
        if current and (filled + piece.size > limit or (most and records + offsets > most)):
            tasks.append(current)
            current, filled, records = [], 0, 0
        current.append(piece.task)
        filled += piece.size + settings.open_cost_bytes
        records += offsets
    if current:
        tasks.append(current)
    return [tuple(sorted(t, key=lambda r: (r.topic, r.partition, r.start))) for t in tasks]
