"""Shared helpers for the cleaner tests: compacted logs written through Log.append, and a
read_committed consumer view built from the stored bytes alone."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.log import Log
from kafkatier.storage.log.segment import LogSegment
from kafkatier.storage.record.batch import RecordBatch
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record
from kafkatier.storage.record.records import iter_batches
from kafkatier.storage.verify.paths import verify_paths
from kafkatier.storage.verify.problem import Problem
from kafkatier.storage.wire import ControlType

TOPIC = "compacted"


def compact_config(**settings: object) -> LogConfig:
    props = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0"}
    props.update({k.replace("_", "."): str(v) for k, v in settings.items()})
    return LogConfig.from_properties(props, source="test")


class ManualClock:
    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def open_log(path: Path, config: LogConfig, clock: ManualClock) -> tuple[LogDirectory, Log]:
    log_dir = LogDirectory(path, config_for=lambda _t: config, clock=clock)
    return log_dir, log_dir.get_or_create(TOPIC, 0)


_seq = itertools.count()


def append(
    log: Log,
    pairs: list[tuple[bytes | None, bytes | None]],
    *,
    timestamp: int,
    producer: tuple[int, int, int] | None = None,
    transactional: bool = False,
) -> None:
    """One batch of (key, value) records; ``producer`` is (id, epoch, base sequence)."""
    records = [Record(i, timestamp, k, v) for i, (k, v) in enumerate(pairs)]
    pid, epoch, seq = producer if producer is not None else (-1, -1, -1)
    log.append(
        build_batch(
            records,
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
            transactional=transactional,
        )
    )


def segment_batches(segment: LogSegment) -> Iterator[RecordBatch]:
    data = segment.log_path.read_bytes()
    for batch in iter_batches(data, file=str(segment.log_path)):
        assert isinstance(batch, RecordBatch)
        yield batch


def committed_records(log: Log) -> list[Record]:
    """What a read_committed consumer reading from the start sees: data records of committed
    or non-transactional batches, in offset order (aborted ones known from the ABORT markers)."""
    batches = [b for s in log.segments for b in segment_batches(s)]
    aborted_ranges: dict[int, list[tuple[int, int]]] = {}
    open_first: dict[int, int] = {}
    for b in batches:
        if b.is_transactional and not b.is_control:
            open_first.setdefault(b.producer_id, b.base_offset)
        elif b.is_control and b.records_count:
            kind, _ = b.control_record()
            first = open_first.pop(b.producer_id, None)
            if kind is ControlType.ABORT and first is not None:
                aborted_ranges.setdefault(b.producer_id, []).append((first, b.base_offset))
    out: list[Record] = []
    for b in batches:
        if b.is_control:
            continue
        if b.is_transactional and any(
            lo <= b.base_offset < hi for lo, hi in aborted_ranges.get(b.producer_id, [])
        ):
            continue
        undecided = open_first.get(b.producer_id)
        if b.is_transactional and undecided is not None and b.base_offset >= undecided:
            continue  # still undecided: beyond the LSO
        out.extend(b.records())
    return out


def latest_by_key(records: list[Record]) -> dict[bytes, tuple[int, bytes | None]]:
    latest: dict[bytes, tuple[int, bytes | None]] = {}
    for r in records:
        if r.key is not None:
            latest[r.key] = (r.offset, r.value)
    return latest


def verify_compacted(path: Path) -> list[Problem]:
    """verify_paths of a compacted log, which must find nothing: verify knows what Kafka's
    compaction legitimately leaves behind (stale snapshots, copied txn-index entries)."""
    problems = verify_paths([path])
    assert problems == [], "\n".join(map(str, problems))
    return problems
