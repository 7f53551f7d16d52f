"""Reads from a partition log: bounded fetches of whole batches, the HW/LSO bound, offset range,
read_committed vs read_uncommitted (also after clean and unclean reopen), and ListOffsets by
timestamp. Fetched bytes are parsed with kafka-python; expectations are written from Kafka's
rules (kafka-format.md §4-§6), never from kafkatier's own output."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from crash_writer import check_partition, read_partition
from kafka.record import MemoryRecords

from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.errors import OffsetOutOfRangeError
from kafkatier.storage.log.loader import open_log
from kafkatier.storage.log.log import Log
from kafkatier.storage.log.reader import (
    IsolationLevel,
    iter_batches,
    iter_records,
    offset_for_timestamp,
    read,
)
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record

NOW = 1_700_000_000_000
A, B = 11, 12
UNC, COM = IsolationLevel.READ_UNCOMMITTED, IsolationLevel.READ_COMMITTED
CONFIG = LogConfig(segment_bytes=1200, index_interval_bytes=150, segment_index_bytes=4096)


def clock() -> int:
    return NOW


def batch(n: int, pid: int = -1, seq: int = -1, txn: bool = False, ts: list[int] | None = None,
          size: int = 40) -> bytes:  # fmt: skip
    stamps = ts or [NOW + i for i in range(n)]
    recs = [Record(i, stamps[i], b"k", b"%d" % i * size) for i in range(n)]
    return build_batch(
        recs, producer_id=pid, producer_epoch=0 if pid >= 0 else -1, base_sequence=seq,
        transactional=txn,
    )  # fmt: skip


def parse(data: bytes) -> list[tuple[int, int]]:
    """(base offset, last offset) of every batch in fetched bytes; asserts they are whole."""
    records, out = MemoryRecords(data), []
    while records.has_next():
        b = records.next_batch()
        out.append((b.base_offset, b.base_offset + b.last_offset_delta))
    size = sum(12 + int.from_bytes(data[p + 8 : p + 12], "big") for p in _positions(data))
    assert size == len(data), "fetch ends in a partial batch"
    return out


def _positions(data: bytes) -> list[int]:
    pos, out = 0, []
    while pos < len(data):
        out.append(pos)
        pos += 12 + int.from_bytes(data[pos + 8 : pos + 12], "big")
    return out


def plain_log(tmp_path: Path) -> Log:
    log = open_log(tmp_path / "r-0", CONFIG, clock=clock)
    for i in range(40):
        log.append(batch(1 + i % 4, size=10 + 7 * i % 50))
    assert len(log.segments) >= 4
    return log


def test_read_returns_whole_batches_from_the_one_holding_the_offset(tmp_path: Path) -> None:
    log = plain_log(tmp_path)
    stored = read_partition(log.directory)
    for b in stored:
        for offset in (b.base_offset, b.last_offset):
            fetched = parse(read(log, offset, max_bytes=10**6).data)
            in_segment = [(s.base_offset, s.last_offset) for s in stored if s.segment == b.segment]
            start = in_segment.index((b.base_offset, b.last_offset))
            assert fetched == in_segment[start:]  # to the end of that segment
            one = parse(read(log, offset, max_bytes=1).data)
            assert one == [(b.base_offset, b.last_offset)]  # at least one batch, even if larger


def test_read_is_bounded_by_max_bytes(tmp_path: Path) -> None:
    log = plain_log(tmp_path)
    stored = read_partition(log.directory)
    sizes = {s.base_offset: s.size for s in stored}
    for max_bytes in (100, 250, 400, 777):
        for b in stored:
            data = read(log, b.base_offset, max_bytes).data
            got = parse(data)
            assert len(data) <= max_bytes or len(got) == 1
            nxt = [s for s in stored if s.segment == b.segment and s.base_offset > got[-1][1]]
            if nxt:  # it stopped because the next batch would not fit
                assert len(data) + sizes[nxt[0].base_offset] > max_bytes


def test_offset_range(tmp_path: Path) -> None:
    log = plain_log(tmp_path)
    end = log.log_end_offset
    assert read(log, end).data == b""  # a fetch at the log end waits for data: empty
    for bad in (end + 1, -1):
        with pytest.raises(OffsetOutOfRangeError):
            read(log, bad)
        with pytest.raises(OffsetOutOfRangeError):
            list(iter_records(log, bad))
    log.close()
    later = open_log(log.directory, CONFIG, clean_shutdown=True, log_start_offset=5, clock=clock)
    with pytest.raises(OffsetOutOfRangeError):
        read(later, 4)
    assert parse(read(later, 5, 1).data)[0][0] <= 5
    assert next(r.offset for r in iter_records(later)) == 5


def txn_log(tmp_path: Path) -> Log:
    """0 plain, 1-2 A (aborted), 3 B, 4 plain, 5 A-abort, 6 B, 7 B-commit, 8-9 A (open), 10 plain.
    Over small segments, so transactions span segments."""
    log = open_log(tmp_path / "x-0", LogConfig(segment_bytes=400), clock=clock)
    log.append(batch(1, size=60))  # 0
    log.append(batch(2, A, 0, txn=True, size=60))  # 1-2
    log.append(batch(1, B, 0, txn=True, size=60))  # 3
    log.append(batch(1, size=60))  # 4
    log.write_txn_marker(A, 0, commit=False)  # 5
    log.append(batch(1, B, 1, txn=True, size=60))  # 6
    log.write_txn_marker(B, 0, commit=True)  # 7
    log.append(batch(2, A, 2, txn=True, size=60))  # 8-9
    log.append(batch(1, size=60))  # 10
    assert len(log.segments) >= 3
    return log


VISIBLE = {UNC: [0, 1, 2, 3, 4, 6, 8, 9, 10], COM: [0, 3, 4, 6]}


@pytest.mark.parametrize("reopen", ["no", "clean", "unclean"])
def test_isolation_levels(tmp_path: Path, reopen: str) -> None:
    log = txn_log(tmp_path)
    if reopen != "no":
        if reopen == "clean":
            log.close()
        else:
            for segment in log.segments:
                segment.close_handlers()
        log = open_log(log.directory, log.config, clean_shutdown=reopen == "clean", clock=clock)
    assert (log.last_stable_offset, log.log_end_offset) == (8, 11)
    for level, offsets in VISIBLE.items():
        assert [r.offset for r in iter_records(log, isolation=level)] == offsets
        assert [r.offset for r in iter_records(log, 2, isolation=level)] == [
            o for o in offsets if o >= 2
        ]
    assert [b.base_offset for b in iter_batches(log, isolation=COM)] == [0, 1, 3, 4, 5, 6, 7]
    check_partition(log)


def test_read_committed_fetch_stops_at_the_lso_and_lists_aborted_txns(tmp_path: Path) -> None:
    log = txn_log(tmp_path)
    everything = []
    offset = 0
    while offset < log.log_end_offset:
        fetched = read(log, offset, 10**6, COM)
        got = parse(fetched.data)
        if not got:
            break
        everything += got
        offset = got[-1][1] + 1
    assert everything[-1][1] < 8 <= offset  # nothing at or past the LSO
    assert read(log, 8, 10**6, COM).data == b""
    aborted = read(log, 0, 10**6, COM).aborted
    assert [(t.producer_id, t.first_offset, t.last_offset) for t in aborted] == [(A, 1, 5)]
    assert read(log, 0, 10**6, UNC).aborted == ()
    assert parse(read(log, 8, 10**6, UNC).data)[0] == (8, 9)  # uncommitted reads go to the HW


def test_aborted_transaction_filter_per_producer(tmp_path: Path) -> None:
    """Only the aborting producer's transactional data is dropped, from its txn's first offset
    up to its ABORT marker, even when another producer's txn interleaves (§6)."""
    log = open_log(tmp_path / "f-0", CONFIG, clock=clock)
    log.append(batch(1, A, 0, txn=True))  # 0
    log.append(batch(1, B, 0, txn=True))  # 1
    log.write_txn_marker(A, 0, commit=False)  # 2
    log.append(batch(1, A, 1, txn=True))  # 3  a new A transaction: visible once committed
    log.write_txn_marker(B, 0, commit=False)  # 4
    log.write_txn_marker(A, 0, commit=True)  # 5
    assert [r.offset for r in iter_records(log, isolation=COM)] == [3]
    assert [r.offset for r in iter_records(log, 1, isolation=COM)] == [3]
    check_partition(log)


def test_offset_for_timestamp_matches_brute_force(tmp_path: Path) -> None:
    rng = random.Random(3)
    log = open_log(tmp_path / "ts-0", CONFIG, clock=clock)
    for _ in range(60):
        n = rng.randint(1, 4)
        log.append(batch(n, ts=[NOW + rng.randrange(5000) for _ in range(n)]))
    records = [(r[0], r[1]) for b in read_partition(log.directory) for r in b.records]
    targets = [NOW - 1, NOW, *(NOW + rng.randrange(5100) for _ in range(40)), NOW + 5000]
    for _reopened in (False, True):
        for target in targets:
            expected = next((o for o, ts in records if ts >= target), None)
            assert offset_for_timestamp(log, target) == expected, target
        log.close()
        log = open_log(log.directory, CONFIG, clean_shutdown=True, clock=clock)


def test_offset_for_timestamp_with_log_append_time(tmp_path: Path) -> None:
    now = [NOW]
    config = LogConfig(message_timestamp_type="LogAppendTime", segment_bytes=400)
    log = open_log(tmp_path / "lat-0", config, clock=lambda: now[0])
    for i in range(12):
        now[0] = NOW + 10 * i
        log.append(batch(2, ts=[5, 6]))  # the producer's timestamps are ignored
    assert offset_for_timestamp(log, NOW + 35) == 8  # appended at NOW + 40
    assert offset_for_timestamp(log, 7) == 0
    assert offset_for_timestamp(log, NOW + 111) is None
