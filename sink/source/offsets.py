"""The offset options of the ``kafkatier`` data source resolved against the partitions' bounds
(``plan.survey``), as Spark's Kafka source resolves them: earliest is the log start offset,
latest the last stable offset (``read_committed``) or the high watermark (``read_uncommitted``),
a JSON offset map must name every subscribed partition, and a timestamp resolves to the earliest
offset whose record timestamp is at or after it (with the remote options, in the remote segments
too). Also Spark's offset JSON and ``maxOffsetsPerTrigger``'s share of a trigger.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from pathlib import Path

from kafkatier.sink.source.options import EARLIEST, LATEST, OffsetSpec, SourceOptions
from kafkatier.sink.source.remote import remote_reader, store_for
from kafkatier.storage.checkpoint.metadata import partition_dir_name
from kafkatier.storage.errors import ConfigError, OffsetOutOfRangeError
from kafkatier.storage.log.bounds import PartitionBounds
from kafkatier.storage.log.readonly import (
    ReadOnlyPartition,
    TopicPartition,
    checkpointed_log_starts,
)

Offsets = dict[TopicPartition, int]
logger = logging.getLogger(__name__)


def by_timestamp(
    opts: SourceOptions, tps: Iterable[TopicPartition], ts: int
) -> dict[TopicPartition, int | None]:
    hints = checkpointed_log_starts(Path(opts.path))
    found: dict[TopicPartition, int | None] = {}
    for tp in tps:
        found[tp] = None
        if opts.remote is not None:
            remote = remote_reader(opts.remote, store_for(opts.remote), opts.path, tp,
                                   opts.chunk_bytes)
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
            message = (f"endingOffsets: {tp[0]}-{tp[1]} ends at {end}, beyond its latest offset "
                       f"{latest}")  # fmt: skip
            if opts.fail_on_data_loss:
                raise OffsetOutOfRangeError(f"{message}; set failOnDataLoss=false to read to "
                                            "the latest", file=opts.path)  # fmt: skip
            # Spark's consumer finds nothing past the end and, without failOnDataLoss, warns
            # and ends the range there (KafkaDataConsumer's getEarliestAvailableOffsetBetween)
            logger.warning("%s: reading to %d (failOnDataLoss=false)", message, latest)
            ends[tp] = latest
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
    startingOffsetsByTimestampStrategy=latest. A match at or past the latest offset (inside an
    open transaction, past the LSO) is no match, as Kafka's ``fetchOffsetForTimestamp`` keeps
    only offsets below the last fetchable one: Spark then fails a start under the default
    strategy (it started at the latest offset, silently)."""
    found: dict[TopicPartition, int | None] = {}
    for ts in set(stamps.values()):
        found.update(by_timestamp(opts, [tp for tp in bounds if stamps[tp] == ts], ts))
    out: Offsets = {}
    for tp, offset in found.items():
        latest = bounds[tp].latest(opts.committed)
        if offset is not None and offset >= latest:
            offset = None  # not visible yet (Kafka's ListOffsets answers -1: no match)
        if offset is None and start and opts.timestamp_strategy == "error":
            raise OffsetOutOfRangeError(
                f"{name}: no record of {tp[0]}-{tp[1]} has a timestamp >= {stamps[tp]} "
                "(set startingOffsetsByTimestampStrategy=latest to start at the end instead)",
                file=opts.path,
            )
        out[tp] = latest if offset is None else max(offset, bounds[tp].log_start)
    return out


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
