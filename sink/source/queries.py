"""The Spark tasks of whole queries (driver side), from ``offsets.py``'s offsets and
``plan.py``'s tasks: a batch query's, and one micro-batch's of a streaming query. Both the
Python source (``datasource.py``) and the JVM reader's planner (``jvm.py``) plan through these,
so both read the same offsets.
"""

from __future__ import annotations

from collections.abc import Mapping

from kafkatier.sink.source.offsets import Offsets, by_timestamp, ending_offsets, starting_offsets
from kafkatier.sink.source.options import SourceOptions
from kafkatier.sink.source.plan import input_partitions, read_tasks, survey, topic_partitions
from kafkatier.sink.source.pushdown import Narrowing
from kafkatier.sink.source.task import ReadTask
from kafkatier.storage.errors import ConfigError
from kafkatier.storage.log.bounds import PartitionBounds
from kafkatier.storage.log.readonly import TopicPartition


def batch_plan(
    opts: SourceOptions, narrowing: Narrowing | None = None, cores: int | None = None
) -> list[tuple[ReadTask, ...]]:
    """The Spark tasks of a batch query: its offsets resolved once, when Spark plans the scan,
    narrowed by the scan's pushed filters (``pushdown.py``). Partitions are left out before
    the survey unless an offset option names partitions (it must name every subscribed one)."""
    tps = topic_partitions(opts)
    named = set(opts.topics or ()) | {t for t, _ in opts.assign or ()}
    missing = sorted(named - {t for t, _ in tps})
    if missing:  # an assigned topic too: Spark's Kafka source fails on an unknown topic
        remote = "" if opts.remote is None else f" or in {opts.remote.url}"
        setting = "subscribe" if opts.assign is None else "assign"
        raise ConfigError(
            f"kafkatier option '{setting}': no partitions of {', '.join(missing)} "
            f"under {opts.path}{remote}",
            setting=setting,
        )
    if narrowing is not None and not isinstance(opts.starting, dict) and not isinstance(
            opts.ending, dict):  # fmt: skip
        tps = [tp for tp in tps if narrowing.admits(tp)]
    bounds = survey(opts, tps)
    starts, ends = starting_offsets(opts, bounds), ending_offsets(opts, bounds)
    if narrowing is not None:
        starts, ends = narrowing.offsets(starts, ends)
        starts = _since(opts, narrowing.since_ms, starts, ends)
    return input_partitions(opts, read_tasks(opts, starts, ends, bounds), bounds, cores)


def _since(opts: SourceOptions, since_ms: int | None, starts: Offsets, ends: Offsets) -> Offsets:
    """Each start moved to the first offset whose batch reaches ``since_ms`` (none: empty)."""
    if since_ms is None:
        return starts
    moved = dict(starts)
    found = by_timestamp(opts, [tp for tp, s in starts.items() if s < ends[tp]], since_ms)
    for tp, offset in found.items():
        moved[tp] = ends[tp] if offset is None else min(max(starts[tp], offset), ends[tp])
    return moved


def micro_batch_plan(
    opts: SourceOptions,
    begin: Offsets,
    stop: Offsets,
    bounds: Mapping[TopicPartition, PartitionBounds],
    cores: int | None = None,
) -> list[tuple[ReadTask, ...]]:
    """The Spark tasks of one micro-batch, offsets ``begin`` (a partition missing from it starts
    at its log start: it appeared since) to ``stop``, within ``bounds`` surveyed when or after
    ``stop`` was handed out (their ABORT markers cover it); partitions gone since are left out."""
    stop = {tp: e for tp, e in stop.items() if tp in bounds}
    starts = {tp: begin.get(tp, bounds[tp].log_start) for tp in stop}
    if not opts.fail_on_data_loss:  # a partition that went back (stream.py): read on from there
        stop = {tp: e for tp, e in stop.items() if e >= starts[tp]}
    tasks = read_tasks(opts, starts, stop, bounds)
    return input_partitions(opts, tasks, bounds, cores)
