"""Planning for the ``kafkatier`` data source (driver side): which partitions exist, their
bounds (``survey``), and one :class:`~kafkatier.sink.source.local.ReadTask` per non-empty offset
range, packed into Spark input partitions by bytes (``split.py``). The offset options resolve in
``offsets.py``. With the remote options, partitions and bounds cover the remote segments too,
and earliest is the remote log start (``remote``).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kafkatier.sink.source.data_loss import report_missing
from kafkatier.sink.source.options import SourceOptions
from kafkatier.sink.source.remote import (
    joined_bounds,
    remote_partitions,
    remote_reader,
    store_for,
)
from kafkatier.sink.source.split import Sized, estimate
from kafkatier.sink.source.split import plan as plan_splits
from kafkatier.sink.source.task import ReadTask
from kafkatier.storage.checkpoint.metadata import partition_dir_name
from kafkatier.storage.errors import ConfigError, OffsetOutOfRangeError
from kafkatier.storage.log.bounds import PartitionBounds, scan_bounds
from kafkatier.storage.log.bounds_cache import BoundsCache
from kafkatier.storage.log.readonly import (
    ReadOnlyPartition,
    TopicPartition,
    checkpointed_log_starts,
    discover,
)
from kafkatier.storage.log.tail_cache import TailCache
from kafkatier.tiering.store.object_store import ObjectStore

SURVEY_THREADS = 8
"""Partitions of a tiered topic surveyed at a time: each waits on its manifest from the object
store, and threads overlap the waits. A topic on local disk alone is surveyed in the caller's
thread: its few small files are nearly always in the page cache (the sink or the previous
trigger just wrote or read them), and there threads only queue for the GIL: 1,024 partitions
took 229-260 ms in one thread (one run of ten 337) against 354-437 ms in eight (2 threads
322-347, 4 threads 356-440); with the page cache dropped before each survey, 583-584 ms against
429-508 ms in four or eight (one run of eight 1,837 ms), ad hoc, 2026-11-29."""


def topic_partitions(opts: SourceOptions, *, listing_max_age_s: float = 0) -> list[TopicPartition]:
    """The subscribed partitions that exist now, on disk or (with the remote options) only
    in the remote store (a listing at most ``listing_max_age_s`` old). Without a local log dir,
    a remote store is enough."""
    log_dir = Path(opts.path)
    if not log_dir.is_dir() and opts.remote is None:
        raise ConfigError(f"kafkatier option 'path': {log_dir} is not a directory", setting="path")
    topics = opts.topics if opts.assign is None else {t for t, _ in opts.assign}
    pattern = opts.pattern if opts.assign is None else None
    found = set(discover(log_dir, topics, pattern))
    if opts.remote is not None:
        listed = remote_partitions(
            opts.remote, _store(opts), topics, pattern, max_age_s=listing_max_age_s
        )
        found |= set(listed)
    report_missing(opts, found)
    if opts.assign is not None:
        return [tp for tp in opts.assign if tp in found]
    return sorted(found)


def _store(opts: SourceOptions) -> ObjectStore:
    assert opts.remote is not None
    return store_for(opts.remote)


def survey(
    opts: SourceOptions, tps: Iterable[TopicPartition], tails: TailCache | None = None,
    kept: BoundsCache | None = None,
) -> dict[TopicPartition, PartitionBounds]:  # fmt: skip
    """Bounds of each partition, read from its files (and remote manifest) now (a tiered
    topic's ``SURVEY_THREADS`` partitions at a time). A streaming query keeps, from trigger to
    trigger, what the last segments' headers said (``tails``: each survey then frames only the
    batches appended since the last, not the whole active segment again) and each partition's bounds
    while its folder is unchanged (``kept``: a trigger with nothing new at 1,024 partitions
    then lists no folder)."""
    hints = checkpointed_log_starts(Path(opts.path))

    def one(tp: TopicPartition) -> PartitionBounds:
        if opts.remote is None:
            return _bounds(opts, tp, hints.get(tp, 0), (tails, kept))
        local = None
        if (Path(opts.path) / partition_dir_name(*tp)).is_dir():
            local = _bounds(opts, tp, hints.get(tp, 0), (tails, kept))
        remote = remote_reader(opts.remote, _store(opts), opts.path, tp, opts.chunk_bytes)
        return joined_bounds(local, remote)

    wanted = list(tps)
    if opts.remote is None:
        return {tp: one(tp) for tp in wanted}
    with ThreadPoolExecutor(max(min(SURVEY_THREADS, len(wanted)), 1)) as pool:
        return dict(zip(wanted, pool.map(one, wanted), strict=True))


_Kept = tuple[TailCache | None, BoundsCache | None]  # what a streaming query keeps (survey)


def _bounds(opts: SourceOptions, tp: TopicPartition, hint: int, kept: _Kept) -> PartitionBounds:
    """Retention or the cleaner may delete a segment (or a snapshot) between listing and opening
    it: list again, twice at most."""
    cache = kept[1]
    if cache is not None:
        found = cache.get(os.path.join(opts.path, partition_dir_name(*tp)), hint)
        if found is not None:
            return found
    for _ in range(2):
        try:
            return _scan(opts, tp, hint, kept)
        except FileNotFoundError:
            continue
    return _scan(opts, tp, hint, kept)


def _scan(opts: SourceOptions, tp: TopicPartition, hint: int, kept: _Kept) -> PartitionBounds:
    tails, cache = kept
    look = None if cache is None else cache.look(os.path.join(opts.path, partition_dir_name(*tp)))
    with ReadOnlyPartition(Path(opts.path), *tp, hint) as part:

        def scan() -> PartitionBounds:
            found = scan_bounds(part, opts.committed, tails)
            return dataclasses.replace(found, size_bytes=part.size_bytes())

        return scan() if cache is None else cache.keep(look, part, hint, scan)


def read_tasks(
    opts: SourceOptions,
    starts: Mapping[TopicPartition, int],
    ends: Mapping[TopicPartition, int],
    bounds: Mapping[TopicPartition, PartitionBounds],
) -> list[ReadTask]:
    """One task per partition with a non-empty range; a start after its end is an error."""
    tasks: list[ReadTask] = []
    for tp, end in sorted(ends.items()):
        start = starts[tp]
        if start > end:
            raise OffsetOutOfRangeError(
                f"{tp[0]}-{tp[1]}: starting offset {start} is after the ending offset {end}",
                file=opts.path,
            )
        if start == end:
            continue
        b = bounds[tp]
        tasks.append(
            ReadTask(
                log_dir=opts.path,
                topic=tp[0],
                partition=tp[1],
                start=start,
                end=end,
                committed=opts.committed,
                include_headers=opts.include_headers,
                fail_on_data_loss=opts.fail_on_data_loss,
                log_start_hint=b.log_start,
                aborted=b.aborted_in(start, end),
                chunk_bytes=opts.chunk_bytes,
                remote=opts.remote,
                store=None if opts.remote is None else _store(opts),
            )
        )
    return tasks


def input_partitions(
    opts: SourceOptions,
    tasks: list[ReadTask],
    bounds: Mapping[TopicPartition, PartitionBounds],
    cores: int | None = None,
) -> list[tuple[ReadTask, ...]]:
    """``tasks`` packed into Spark input partitions by bytes (``split.py``) for ``cores``."""
    sized = []
    for task in tasks:
        b = bounds[(task.topic, task.partition)]
        sized.append(Sized(task, estimate(task, b.size_bytes, b.log_start, b.high_watermark)))
    return plan_splits(sized, opts.splits, cores)
