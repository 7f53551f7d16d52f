"""Shared pieces of the remote-compaction tests (no tests here): a random keyed workload and
batch-level snapshots of a log for record-for-record comparison."""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from pathlib import Path

from kafkatier.storage.log.log import Log
from kafkatier.storage.log.segment import AnyBatch
from kafkatier.storage.record.batch import RecordBatch
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record
from kafkatier.storage.record.records import iter_batches

Row = tuple[object, ...]


def batch_rows(batches: Iterable[AnyBatch]) -> list[Row]:
    """Every stored batch as (base, last, pid, epoch, control, txn, records...)."""
    rows: list[Row] = []
    for b in batches:
        assert isinstance(b, RecordBatch)
        recs = tuple((r.offset, r.timestamp, r.key, r.value) for r in b.records())
        rows.append((b.base_offset, b.last_offset, b.producer_id, b.producer_epoch,
                     b.is_control, b.is_transactional, recs))
    return rows


def dir_batches(directory: Path) -> Iterator[AnyBatch]:
    for path in sorted(directory.glob("*.log")):
        yield from iter_batches(path.read_bytes(), file=str(path))


class Workload:
    """A random keyed workload: updates, tombstones, idempotent and transactional producers
    (commits and aborts), on a manual clock."""

    def __init__(self, seed: int, keys: int = 30) -> None:
        self.rng = random.Random(seed)
        self.keys = keys
        self.seq: dict[int, int] = {}
        self.open: set[int] = set()

    def _append(self, log: Log, now: int, pid: int, txn: bool) -> None:
        rng = self.rng
        pairs = []
        for _ in range(rng.randint(1, 5)):
            key = b"key-%d" % rng.randint(0, self.keys - 1)
            value = None if rng.random() < 0.12 else b"v%d" % rng.randint(0, 10**9)
            pairs.append((key, value))
        seq = self.seq.get(pid, 0) if pid >= 0 else -1
        records = [Record(i, now, k, v) for i, (k, v) in enumerate(pairs)]
        log.append(build_batch(records, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                               base_sequence=seq, transactional=txn))
        if pid >= 0:
            self.seq[pid] = seq + len(pairs)
        if txn:
            self.open.add(pid)

    def step(self, log: Log, now: int) -> None:
        roll = self.rng.random()
        if roll < 0.45:
            self._append(log, now, -1, False)
        elif roll < 0.6:
            self._append(log, now, 1, False)
        elif roll < 0.85:
            self._append(log, now, self.rng.choice((2, 3, 4)), True)
        else:
            pid = self.rng.choice((2, 3, 4))
            if pid in self.open:
                log.write_txn_marker(pid, 0, commit=self.rng.random() < 0.6, timestamp=now)
                self.open.discard(pid)

    def close_all(self, log: Log, now: int) -> None:
        for pid in sorted(self.open):
            log.write_txn_marker(pid, 0, commit=self.rng.random() < 0.5, timestamp=now)
        self.open.clear()
