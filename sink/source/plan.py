"""Planning for the ``kafkatier`` data source (driver side): which partitions, which offset range
of each, and one :class:`~kafkatier.sink.source.local.ReadTask` per non-empty range.

Offsets resolve as Spark's Kafka source resolves them: earliest is the log start offset, latest
the last stable offset (``read_committed``) or the high watermark (``read_uncommitted``), a JSON
offset map must name every subscribed partition, and a timestamp resolves to the earliest
offset whose record timestamp is at or after it. With the remote options, partitions, bounds and
timestamps cover the remote segments too, and earliest is the remote log start
(``remote``).
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kafkatier.sink.source.data_loss import report_missing
from kafkatier.sink.source.options import EARLIEST, LATEST, OffsetSpec, SourceOptions
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

Offsets = dict[TopicPartition, int]
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
    trigger, the last segments' headers (``tails``: each survey then reads only the batches
    appended since the last, not the whole active segment again) and each partition's bounds
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
            tail = None if tails is None or not part.bases else tails.headers(part)
            found = scan_bounds(part, opts.committed, tail)
            return dataclasses.replace(found, size_bytes=part.size_bytes())

        return scan() if cache is None else cache.keep(look, part, hint, scan)


def by_timestamp(
    opts: SourceOptions, tps: Iterable[TopicPartition], ts: int
) -> dict[TopicPartition, int | None]:
    hints = checkpointed_log_starts(Path(opts.path))
    found: dict[TopicPartition, int | None] = {}
    for tp in tps:
        found[tp] = None
        if opts.remote is not None:
            remote = remote_reader(opts.remote, _store(opts), opts.path, tp, opts.chunk_bytes)
            with opts.remote.errors():
                found[tp] = remote.offset_for_timestamp(ts)
        if found[tp] is None and (Path(opts.path) / partition_dir_name(*tp)).is_dir():
            with ReadOnlyPartition(Path(opts.path), *tp, hints.get(tp, 0)) as part:
                found[tp] = part.offset_for_timestamp(ts)
    return found


def _specific(
    spec: OffsetSpec, name: str, tps: Iterable[TopicPartition]
) -> Mapping[TopicPartition, int]:
    """A JSON offset map checked against the subscription (Spark requires every partition)."""
    if not isinstance(spec, dict):
        return {tp: spec for tp in tps}
    wanted = set(tps)
    missing = sorted(wanted - spec.keys())
    extra = sorted(spec.keys() - wanted)
    if missing or extra:
        parts = [
            f"missing {_names(missing)}" if missing else "",
            f"not subscribed or not on disk: {_names(extra)}" if extra else "",
        ]
        raise ConfigError(
            f"kafkatier option {name!r} must give an offset for every subscribed partition "
            f"(-2 = earliest, -1 = latest): {'; '.join(p for p in parts if p)}",
            setting=name,
        )
    return spec


def _names(tps: Iterable[TopicPartition]) -> str:
    return ", ".join(f"{t}-{p}" for t, p in tps)


def _resolve(value: int, bounds: PartitionBounds, committed: bool) -> int:
    if value == EARLIEST:
        return bounds.log_start
    if value == LATEST:
        return bounds.latest(committed)
    return value


def starting_offsets(
    opts: SourceOptions, bounds: Mapping[TopicPartition, PartitionBounds]
) -> Offsets:
    """Where each partition starts: startingTimestamp, else startingOffsetsByTimestamp, else
    startingOffsets (Spark's order)."""
    timed = _by_time(opts, bounds, "starting", opts.starting_timestamp,
                     opts.starting_by_timestamp)  # fmt: skip
    if timed is not None:
        return timed
    spec = _specific(opts.starting, "startingOffsets", bounds)
    return {tp: _resolve(spec[tp], b, opts.committed) for tp, b in bounds.items()}


def ending_offsets(
    opts: SourceOptions, bounds: Mapping[TopicPartition, PartitionBounds]
) -> Offsets:
    """Where each partition ends (batch queries): endingTimestamp, else
    endingOffsetsByTimestamp, else endingOffsets."""
    timed = _by_time(opts, bounds, "ending", opts.ending_timestamp, opts.ending_by_timestamp)
    if timed is not None:
        return timed
    spec = _specific(opts.ending, "endingOffsets", bounds)
    ends = {tp: _resolve(spec[tp], b, opts.committed) for tp, b in bounds.items()}
    for tp, end in ends.items():
        latest = bounds[tp].latest(opts.committed)
        if end > latest:
            raise OffsetOutOfRangeError(
                f"endingOffsets: {tp[0]}-{tp[1]} ends at {end}, beyond its latest offset {latest}",
                file=opts.path,
            )
    return ends


def _by_time(
    opts: SourceOptions, bounds: Mapping[TopicPartition, PartitionBounds], which: str,
    one: int | None, each: dict[TopicPartition, int] | None,
) -> Offsets | None:  # fmt: skip
    """``<which>Timestamp`` (one for every partition), else ``<which>OffsetsByTimestamp`` (one
    each), Spark's order; None when neither is given."""
    start = which == "starting"
    if one is not None:
        stamps = dict.fromkeys(bounds, one)
        return _from_timestamp(opts, bounds, stamps, f"{which}Timestamp", start=start)
    if each is not None:
        name = f"{which}OffsetsByTimestamp"
        return _from_timestamp(opts, bounds, dict(_specific(each, name, bounds)), name,
                               start=start)  # fmt: skip
    return None


def _from_timestamp(
    opts: SourceOptions, bounds: Mapping[TopicPartition, PartitionBounds],
    stamps: Mapping[TopicPartition, int], name: str, *, start: bool,
) -> Offsets:  # fmt: skip
    """Each partition's first offset with a timestamp at or after its own in ``stamps`` (option
    ``name``). Spark: no match at the end means latest; at the start, an error unless
    startingOffsetsByTimestampStrategy=latest. A match inside an open transaction (past the
    LSO) is not visible yet, so it counts as latest."""
    found: dict[TopicPartition, int | None] = {}
    for ts in set(stamps.values()):
        found.update(by_timestamp(opts, [tp for tp in bounds if stamps[tp] == ts], ts))
    out: Offsets = {}
    for tp, offset in found.items():
        latest = bounds[tp].latest(opts.committed)
        if offset is None and start and opts.timestamp_strategy == "error":
            raise OffsetOutOfRangeError(
                f"{name}: no record of {tp[0]}-{tp[1]} has a timestamp >= {stamps[tp]} "
                "(set startingOffsetsByTimestampStrategy=latest to start at the end instead)",
                file=opts.path,
            )
        out[tp] = latest if offset is None else min(max(offset, bounds[tp].log_start), latest)
    return out


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


def rate_limit(starts: Mapping[TopicPartition, int], ends: Offsets, max_offsets: int) -> Offsets:
    """Spark's maxOffsetsPerTrigger: the limit shared in proportion to each partition's backlog
    (a partition with any backlog advances by at least one)."""
    backlog = {tp: end - starts.get(tp, end) for tp, end in ends.items()}
    total = sum(b for b in backlog.values() if b > 0)
    if total <= max_offsets:
        return ends
    limited = dict(ends)
    for tp, size in backlog.items():
        if size > 0:
            share = max_offsets * size / total
            step = math.ceil(share) if share < 1 else math.floor(share)
            limited[tp] = min(ends[tp], starts[tp] + step)
    return limited


def to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """Spark's Kafka offset JSON: {"topic": {"partition": offset}}."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = offset
    return out


def from_json(offsets: Mapping[str, Mapping[str, int]]) -> Offsets:
    return {(t, int(p)): int(o) for t, parts in offsets.items() for p, o in parts.items()}
