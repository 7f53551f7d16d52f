"""The SIGKILL crash workload (a script run by test_crash_recovery.py), and the log checks the
storage tests share (they import this module: pytest puts this folder on ``sys.path``).

As a script: ``crash_writer.py <log dir> <seed> [<crash point>:<n>]`` opens a LogDirectory and
appends until killed: per partition an idempotent producer (retries, epoch bumps, two-batch
appends), two transactional producers (interleaved, committed or aborted) and a plain one, in
small segments, its files closed and reopened all along by a tiny budget of open files; now and
then a clean close and reopen. After each ``LogDirectory.flush()`` it
prints ``ACK <partition> <last offset> <digest>``, the digest chaining every batch of the
partition up to that offset (:func:`chain`): acknowledged data must survive any kill. With a
crash point it SIGKILLs itself the n-th time it gets there (:func:`install_crash_point`). A broken
expectation inside the writer exits with status 3 and says why on stderr.

:func:`check_partition` reads the segment files with kafka-python's DefaultRecordBatch (a reader
independent of kafkatier) and compares what the engine keeps -- offset/time/txn indexes,
producer snapshots and state, leader epochs, LSO, read views -- with :class:`Model`, a replay of
the stored batches by Kafka's rules (kafka-format.md §4-§7).
"""

from __future__ import annotations

import hashlib
import os
import random
import signal
import struct
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kafka.record.default_records import DefaultRecordBatch

from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.log import loader as log_loader
from kafkatier.storage.log import reader as log_reader
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.log import Log
from kafkatier.storage.log.segment import LogSegment
from kafkatier.storage.producer.snapshot import read_snapshot
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record

TOPIC = "crash"
PARTITIONS = 2
IDEMPOTENT, TXN_PIDS = 1000, (2000, 3000)


def crash_config() -> LogConfig:
    return LogConfig(segment_bytes=6000, index_interval_bytes=600)


# ------------------------------------------------------------------ stored batches, independently


@dataclass(frozen=True)
class StoredBatch:
    """One batch as kafka-python reads it from a ``.log`` file."""

    segment: int
    position: int
    size: int
    base_offset: int
    last_offset: int
    pid: int
    epoch: int
    last_seq: int
    transactional: bool
    control: bool
    max_timestamp: int
    leader_epoch: int
    records: tuple[tuple[Any, ...], ...]

    @property
    def marker(self) -> tuple[int, int] | None:
        """(control type, coordinator epoch) of a transaction marker."""
        if not self.control or not self.records:
            return None
        _, _, key, value, _ = self.records[0]
        return struct.unpack(">h", key[2:4])[0], struct.unpack(">i", value[2:6])[0]


def describe(
    base: int, last: int, pid: int, epoch: int, txn: bool, control: bool, records: Any
) -> tuple[Any, ...]:
    """What the crash digest covers: offsets, producer fields, every record's content."""
    recs = tuple((o, ts, k, v, tuple(tuple(h) for h in hs)) for o, ts, k, v, hs in records)
    return (base, last, pid, epoch, txn, control, recs)


def chain(previous: str, desc: tuple[Any, ...]) -> str:
    return hashlib.sha256((previous + repr(desc)).encode()).hexdigest()[:24]


def read_segment_file(path: Path) -> list[StoredBatch]:
    """Every batch, asserting framing, magic 2 and CRC, and that nothing trails the last one."""
    data, pos, out = path.read_bytes(), 0, []
    base = int(path.name.split(".")[0])
    while pos < len(data):
        assert len(data) - pos >= 61, f"{path}: {len(data) - pos} trailing bytes at {pos}"
        size = 12 + struct.unpack_from(">i", data, pos + 8)[0]
        assert pos + size <= len(data), f"{path}: torn batch at {pos}"
        kb = DefaultRecordBatch(bytearray(data[pos : pos + size]))
        assert kb.magic == 2 and kb.validate_crc(), f"{path}: bad batch at {pos}"
        recs = tuple((r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in kb)
        out.append(StoredBatch(
            base, pos, size, kb.base_offset, kb.last_offset, kb.producer_id, kb.producer_epoch,
            kb.last_sequence, kb.is_transactional, kb.is_control_batch, kb.max_timestamp,
            kb.leader_epoch, recs))  # fmt: skip
        pos += size
    return out


def read_partition(directory: Path) -> list[StoredBatch]:
    return [b for p in sorted(directory.glob("*.log")) for b in read_segment_file(p)]


def digests(batches: list[StoredBatch]) -> dict[int, str]:
    """Chained digest after each batch, by the batch's last offset."""
    out, digest = {}, ""
    for b in batches:
        digest = chain(
            digest,
            describe(
                b.base_offset, b.last_offset, b.pid, b.epoch, b.transactional, b.control, b.records
            ),
        )
        out[b.last_offset] = digest
    return out


# ------------------------------------------------------------------ the model replay


@dataclass(frozen=True)
class ModelProducer:
    """A snapshot entry's fields (§7.1), as Kafka's rules derive them from the batches."""

    epoch: int = -1
    last_seq: int = -1
    last_offset: int = -1
    offset_delta: int = 0
    timestamp: int = -1
    coordinator_epoch: int = -1
    txn_first: int = -1


@dataclass
class Model:
    """Producer state, aborted transactions and aborted data, replayed batch by batch."""

    producers: dict[int, ModelProducer] = field(default_factory=dict)
    aborted: list[tuple[int, int, int, int]] = field(default_factory=list)
    aborted_batches: set[int] = field(default_factory=set)  # base offsets of aborted data
    _open: dict[int, list[int]] = field(default_factory=dict)

    def apply(self, b: StoredBatch) -> None:
        if b.pid < 0:
            return
        p = self.producers.get(b.pid, ModelProducer())
        if b.epoch != p.epoch:  # a new epoch forgets the old epoch's batches
            p = replace(p, epoch=b.epoch, last_seq=-1, last_offset=-1, offset_delta=0)
        marker = b.marker
        if not b.control:
            p = replace(
                p,
                last_seq=b.last_seq,
                last_offset=b.last_offset,
                offset_delta=b.last_offset - b.base_offset,
                timestamp=b.max_timestamp,
            )
            if b.transactional:
                self._open.setdefault(b.pid, []).append(b.base_offset)
                if p.txn_first < 0:
                    p = replace(p, txn_first=b.base_offset)
        elif marker is not None:
            if p.txn_first >= 0 and marker[0] == 0:  # ABORT with data: a .txnindex entry
                others = [
                    q.txn_first
                    for pid, q in self.producers.items()
                    if pid != b.pid and q.txn_first >= 0
                ]
                lso = min(others, default=b.base_offset + 1)
                self.aborted.append((b.pid, p.txn_first, b.base_offset, lso))
                self.aborted_batches.update(self._open.get(b.pid, []))
            self._open.pop(b.pid, None)
            p = replace(p, coordinator_epoch=marker[1], timestamp=b.max_timestamp, txn_first=-1)
        self.producers[b.pid] = p

    def first_unstable(self) -> int | None:
        return min((p.txn_first for p in self.producers.values() if p.txn_first >= 0), default=None)


# ------------------------------------------------------------------ checks


def _index_entries(path: Path, count: int, fmt: str) -> list[tuple[int, int]]:
    size = struct.calcsize(fmt)
    data = path.read_bytes()[: count * size] if path.exists() else b""
    return [struct.unpack_from(fmt, data, i * size) for i in range(len(data) // size)]


def check_segment_indexes(seg: LogSegment, batches: list[StoredBatch], active: bool) -> None:
    """Offset-index entries map a batch's last offset to its start; time-index entries carry
    the running max timestamp with the last offset of the batch that set it; inactive segments
    are trimmed and end with their max timestamp (§4, §5)."""
    seg.write_index_entries()  # a live writer keeps its last entries in memory (index/base.py)
    at = {b.position: b for b in batches}
    rel = _index_entries(seg.offset_index.path, seg.offset_index.entries, ">ii")
    offsets = [seg.base_offset + r for r, _ in rel]
    assert offsets == sorted(set(offsets)), f"{seg}: offset index not increasing"
    for r, pos in rel:
        assert pos in at and at[pos].last_offset == seg.base_offset + r, f"{seg}: entry {r},{pos}"
    running, max_at = -1, {}
    for b in batches:
        running = max(running, b.max_timestamp)
        max_at[b.last_offset] = (running, b.max_timestamp)
    times = _index_entries(seg.time_index.path, seg.time_index.entries, ">qi")
    assert [t for t, _ in times] == sorted({t for t, _ in times}), f"{seg}: time index order"
    for ts, r in times:
        assert max_at.get(seg.base_offset + r) == (ts, ts), f"{seg}: time entry {ts},{r}"
    if not active:
        assert seg.offset_index.path.stat().st_size == 8 * len(rel), f"{seg}: untrimmed index"
        assert seg.time_index.path.stat().st_size == 12 * len(times), f"{seg}: untrimmed"
        if running >= 0:
            assert times and times[-1][0] == running, f"{seg}: last time entry != max {running}"


def _txn_entries(seg: LogSegment) -> list[tuple[int, int, int, int]]:
    path = seg.txn_index.path
    data = path.read_bytes() if path.exists() else b""
    return [struct.unpack_from(">hqqqq", data, i)[1:] for i in range(0, len(data) - 33, 34)]


def check_snapshots(directory: Path, batches: list[StoredBatch], end: int) -> None:
    """Every ``.snapshot`` file holds exactly the replayed state at its offset."""
    wanted = sorted(int(p.name.split(".")[0]) for p in directory.glob("*.snapshot"))
    assert all(o <= end for o in wanted), f"snapshot beyond the log end {end}: {wanted}"
    model, i = Model(), 0
    for offset in wanted:
        while i < len(batches) and batches[i].last_offset < offset:
            model.apply(batches[i])
            i += 1
        assert offset == 0 or batches[i - 1].last_offset + 1 == offset, f"snapshot {offset}"
        path = directory / f"{offset:020d}.snapshot"
        got = {
            e.producer_id: (
                e.producer_epoch,
                e.last_sequence,
                e.last_offset,
                e.offset_delta,
                e.timestamp,
                e.coordinator_epoch,
                e.current_txn_first_offset,
            )
            for e in read_snapshot(path)
        }
        expected = {pid: tuple(vars(p).values()) for pid, p in model.producers.items()}
        assert got == expected, f"{path}: {got} != {expected}"


def check_partition(log: Log) -> list[StoredBatch]:
    """Everything :mod:`crash_writer` promises about a (re)opened log; returns its batches."""
    batches = read_partition(log.directory)
    offsets = [(b.base_offset, b.last_offset) for b in batches]
    expected_next = log.log_start_offset
    for first, last in offsets:
        assert first == expected_next, f"offset gap/overlap at {first} (wanted {expected_next})"
        expected_next = last + 1
    assert log.log_end_offset == expected_next, (log.log_end_offset, expected_next)
    bases = sorted(int(p.name.split(".")[0]) for p in log.directory.glob("*.log"))
    assert bases == [s.base_offset for s in log.segments]
    for seg in log.segments:
        mine = [b for b in batches if b.segment == seg.base_offset]
        assert not mine or mine[0].base_offset == seg.base_offset, f"{seg} misnamed"
        check_segment_indexes(seg, mine, seg is log.active_segment)
    assert all(b.leader_epoch == 0 for b in batches)
    if batches:
        epochs = (log.directory / "leader-epoch-checkpoint").read_text()
        assert epochs == f"0\n1\n0 {batches[0].base_offset}\n", epochs
    model = Model()
    for b in batches:
        model.apply(b)
    got_txns = []
    for seg in log.segments:
        entries = _txn_entries(seg)
        upper = seg.base_offset + 2**31
        assert all(seg.base_offset <= e[2] < upper for e in entries)
        got_txns += entries
    assert got_txns == model.aborted, (got_txns, model.aborted)
    state = {
        pid: (
            e.producer_epoch,
            e.last_seq,
            e.last_data_offset,
            e.last_offset_delta,
            e.last_timestamp,
            e.coordinator_epoch,
            -1 if e.current_txn_first_offset is None else e.current_txn_first_offset,
        )
        for pid, e in log.producer_state.producers.items()
    }
    assert state == {pid: tuple(vars(p).values()) for pid, p in model.producers.items()}
    unstable = model.first_unstable()
    assert log.last_stable_offset == (expected_next if unstable is None else unstable)
    check_snapshots(log.directory, batches, expected_next)
    check_views(log, batches, model)
    return batches


def check_views(log: Log, batches: list[StoredBatch], model: Model) -> None:
    """read_uncommitted sees every data record; read_committed hides aborted data and stops at
    the LSO."""
    data = [b for b in batches if not b.control]
    every = [r[0] for b in data for r in b.records]
    lso = log.last_stable_offset
    committed = [
        r[0]
        for b in data
        if b.base_offset not in model.aborted_batches
        for r in b.records
        if r[0] < lso
    ]
    unc = log_reader.IsolationLevel.READ_UNCOMMITTED
    com = log_reader.IsolationLevel.READ_COMMITTED
    assert [r.offset for r in log_reader.iter_records(log, isolation=unc)] == every
    assert [r.offset for r in log_reader.iter_records(log, isolation=com)] == committed


# ------------------------------------------------------------------ the writer


@dataclass
class Producer:
    pid: int
    epoch: int = 0
    next_seq: int = 0
    in_txn: bool = False
    last_sent: tuple[bytes, int, int] | None = None  # bytes, first and last offset


class PartitionWriter:
    """One partition's producers, continuing from whatever the log holds."""

    def __init__(self, log: Log, partition: int) -> None:
        self.log, self.partition, self.digest = log, partition, ""
        for batch in log_reader.iter_batches(log):
            recs = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch.records()]
            self.digest = chain(self.digest, describe(
                batch.base_offset, batch.last_offset, batch.producer_id, batch.producer_epoch,
                batch.is_transactional, batch.is_control, recs))  # fmt: skip
        self.producers = {pid: self._resume(pid) for pid in (IDEMPOTENT, *TXN_PIDS)}
        for p in self.producers.values():
            if p.in_txn:  # the coordinator aborts what a crash left open
                self.marker(p, commit=False)

    def _resume(self, pid: int) -> Producer:
        entry = self.log.producer_state.last_entry(pid)
        if entry is None:
            return Producer(pid)
        return Producer(
            pid,
            max(entry.producer_epoch, 0),
            entry.last_seq + 1,
            entry.current_txn_first_offset is not None,
        )

    def _records(self, rng: random.Random) -> list[Record]:
        now = int(time.time() * 1000)
        return [
            Record(
                i,
                now - rng.choice((0, 0, 0, rng.randrange(5000))),
                rng.choice((None, b"k%d" % rng.randrange(40))),
                None if rng.random() < 0.05 else rng.randbytes(rng.randrange(400)),
                (("h", b"x"),) if rng.random() < 0.2 else (),
            )
            for i in range(rng.randint(1, 5))
        ]

    def send(
        self, rng: random.Random, p: Producer | None, batches: int = 1, txn: bool = False
    ) -> None:
        sent, data = [], b""
        for _ in range(batches):
            recs = self._records(rng)
            codec = rng.choice((0, 0, 0, 1, 3, 4))
            pid, epoch, seq = (p.pid, p.epoch, p.next_seq) if p else (-1, -1, -1)
            one = build_batch(
                recs,
                codec=codec,
                producer_id=pid,
                producer_epoch=epoch,
                base_sequence=seq,
                transactional=txn,
            )
            sent.append((recs, one))
            data += one
            if p:
                p.next_seq += len(recs)
        expected_first = self.log.log_end_offset
        info = self.log.append(data)
        expect(info.first_offset == expected_first and info.num_batches == batches, info)
        offset = info.first_offset
        for recs, one in sent:
            rows = [(offset + r.offset, r.timestamp, r.key, r.value, r.headers) for r in recs]
            last = offset + len(recs) - 1
            self.digest = chain(
                self.digest,
                describe(offset, last, p.pid if p else -1, p.epoch if p else -1, txn, False, rows),
            )
            if p:
                p.last_sent, p.in_txn = (one, offset, last), p.in_txn or txn
            offset = last + 1

    def retry(self, p: Producer) -> None:
        if p.last_sent is None:
            return
        data, first, last = p.last_sent
        info = self.log.append(data)
        expect((info.num_batches, info.first_offset, info.last_offset) == (0, first, last), info)

    def marker(self, p: Producer, commit: bool) -> None:
        ts = int(time.time() * 1000)
        info = self.log.write_txn_marker(p.pid, p.epoch, commit=commit, timestamp=ts)
        key, value = struct.pack(">hh", 0, int(commit)), struct.pack(">hi", 0, 0)
        rows = [(info.first_offset, ts, key, value, ())]
        self.digest = chain(
            self.digest,
            describe(info.first_offset, info.first_offset, p.pid, p.epoch, True, True, rows),
        )
        p.in_txn = False

    def step(self, rng: random.Random) -> None:
        r, idem = rng.random(), self.producers[IDEMPOTENT]
        if r < 0.30:
            self.send(rng, idem)
        elif r < 0.36:
            self.send(rng, idem, batches=2)
        elif r < 0.44:
            self.retry(idem)
        elif r < 0.52:
            self.send(rng, None)
        elif r < 0.54:
            idem.epoch, idem.next_seq, idem.last_sent = idem.epoch + 1, 0, None
        else:
            p = self.producers[rng.choice(TXN_PIDS)]
            if not p.in_txn or rng.random() < 0.6:
                self.send(rng, p, txn=True)
            else:
                self.marker(p, commit=rng.random() < 0.5)

    def ack(self) -> None:
        if self.log.log_end_offset > 0:
            print(f"ACK {self.partition} {self.log.log_end_offset - 1} {self.digest}", flush=True)


def expect(condition: bool, detail: object) -> None:
    if not condition:
        print(f"writer expectation failed: {detail}", file=sys.stderr, flush=True)
        os._exit(3)


def _wrap(owner: Any, name: str, before: bool, hit: Callable[[], None]) -> None:
    original = getattr(owner, name)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if before:
            hit()
        result = original(*args, **kwargs)
        if not before:
            hit()
        return result

    setattr(owner, name, wrapped)


CRASH_POINTS = {  # name: (class, method, kill before the call?)
    "after_write": (LogSegment, "append", False),  # data written, producer state not yet
    "mid_roll": (Log, "new_segment", True),  # old segment trimmed and snapshot taken
    "after_roll": (Log, "roll", False),  # new empty segment created
    "before_txn_index": (LogSegment, "append_aborted_txn", True),  # ABORT marker on disk
    "after_txn_index": (LogSegment, "append_aborted_txn", False),
    "mid_flush": (LogDirectory, "checkpoint", True),  # segments fsynced, checkpoints not
    "mid_close": (LogSegment, "close", False),  # some segments closed, no marker yet
    "mid_recovery": (log_loader, "recover_segment", False),  # a segment recovered, no snapshot
    "recovery_truncated": (LogSegment, "truncate_bytes", False),  # torn tail cut, indexes not
}


def install_crash_point(spec: str) -> None:
    """SIGKILL this process the n-th time the named point is reached (``torn_write``: write
    only the first half of the n-th segment append, then die)."""
    name, n = spec.split(":")
    count = [0]

    def hit() -> None:
        count[0] += 1
        if count[0] >= int(n):
            # one write per line: recovery threads may reach the point together
            sys.stdout.write(f"CRASHPOINT {spec}\n")
            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGKILL)

    if name == "torn_write":
        original = LogSegment.append

        def torn(self: LogSegment, data: Any, batches: Any) -> None:
            if count[0] + 1 >= int(n):
                whole = b"".join(bytes(part) for part in data) if isinstance(data, list) else (
                    bytes(data))  # fmt: skip
                with self._file.use() as fd:
                    os.pwrite(fd, whole[: len(whole) // 2], self.size)
                hit()
            count[0] += 1
            original(self, data, batches)

        LogSegment.append = torn  # type: ignore[method-assign]
        return
    owner, method, before = CRASH_POINTS[name]
    _wrap(owner, method, before, hit)


def open_log_dir(path: Path) -> LogDirectory:
    """The writer's log dir, with a budget of 4 open files (below what the setting allows):
    segment files and index maps close and reopen all along, which must change nothing."""
    log_dir = LogDirectory(path, config_for=lambda _topic: crash_config(), max_open_files=16)
    log_dir.file_budget.limit = 4
    return log_dir


def main(argv: list[str]) -> None:
    path, rng = Path(argv[1]), random.Random(int(argv[2]))
    if len(argv) > 3:
        install_crash_point(argv[3])
    log_dir = open_log_dir(path)
    parts = [PartitionWriter(log_dir.get_or_create(TOPIC, p), p) for p in range(PARTITIONS)]
    print("READY", flush=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        rng.choice(parts).step(rng)
        if rng.random() < 0.2:
            log_dir.flush()
            for part in parts:
                part.ack()
        if rng.random() < 0.01:
            log_dir.close()
            log_dir = open_log_dir(path)
            parts = [PartitionWriter(log_dir.get_or_create(TOPIC, p), p) for p in range(PARTITIONS)]
    expect(False, "not killed within 60 s")


if __name__ == "__main__":
    main(sys.argv)
