"""Log as a leader: offsets, leader epochs, idempotence, rejected appends, rolls, topic-level
rewrites (LogAppendTime, compression.type, max.message.bytes) and transactions on the write side
(kafka-format.md §1.6, §3, §4-§7, §9.2). Stored bytes are read back with kafka-python
(``crash_writer.read_partition``) and whole logs are checked with ``crash_writer.check_partition``.
"""

from __future__ import annotations

import contextlib
import struct
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from crash_writer import check_partition, read_partition
from fd_probe import held_deleted
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch

from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.errors import (
    ConfigError,
    CorruptRecordError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    RecordTooLargeError,
    TransactionCoordinatorFencedError,
)
from kafkatier.storage.log.committed import write_committed
from kafkatier.storage.log.loader import open_log
from kafkatier.storage.log.log import Log
from kafkatier.storage.log.queued_writes import QueuedWrites
from kafkatier.storage.log.reader import iter_records
from kafkatier.storage.log.segment import LogSegment
from kafkatier.storage.log.validator import parse_incoming
from kafkatier.storage.producer.entry import AppendOrigin
from kafkatier.storage.producer.snapshot import read_snapshot
from kafkatier.storage.record.builder import build_batch, build_control_batch
from kafkatier.storage.record.record import Record
from kafkatier.storage.wire import INT32_MAX, Codec, ControlType

NOW = 1_700_000_000_000
A, B, C = 7000, 8000, 9000


class Clock:
    def __init__(self, now: int = NOW) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def batch(
    n: int = 2,
    pid: int = -1,
    epoch: int = -1,
    seq: int = -1,
    txn: bool = False,
    ts: int = NOW,
    size: int = 30,
    codec: Codec = Codec.NONE,
) -> bytes:
    stamps = [ts + i if ts >= 0 else -1 for i in range(n)]
    recs = [Record(i, stamps[i], b"key%d" % i, b"v" * size, (("h", b"1"),)) for i in range(n)]
    return build_batch(
        recs, codec=codec, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
        transactional=txn,
    )  # fmt: skip


def new_log(tmp_path: Path, clock: Clock | None = None, **settings: object) -> Log:
    props = {"segment.index.bytes": "4096", **{k: str(v) for k, v in settings.items()}}
    config = LogConfig.from_properties(props, source="test")
    return open_log(tmp_path / "t-0", config, clock=clock or Clock())


def reopen(log: Log, clean: bool = True) -> Log:
    if clean:
        log.close()
    else:
        for segment in log.segments:
            segment.close_handlers()
    return open_log(log.directory, log.config, clean_shutdown=clean, clock=log.clock)


def files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def segment_sizes(log: Log) -> list[tuple[int, int]]:
    return [(s.base_offset, s.size) for s in log.segments]


# ------------------------------------------------------------------ offsets and epochs


def test_offsets_are_consecutive_and_batches_carry_the_leader_epoch(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    counts = [1, 3, 2, 5, 1, 4]
    first = log.append(batch(counts[0]))
    multi = log.append(b"".join(batch(n) for n in counts[1:4]))
    last = log.append(b"".join(batch(n) for n in counts[4:]))
    assert (first.first_offset, first.last_offset) == (0, 0)
    assert (multi.first_offset, multi.last_offset, multi.num_batches) == (1, 10, 3)
    assert (last.first_offset, last.last_offset, last.num_records) == (11, 15, 5)
    stored = read_partition(log.directory)
    assert [(b.base_offset, b.last_offset) for b in stored] == [
        (0, 0), (1, 3), (4, 5), (6, 10), (11, 11), (12, 15),
    ]  # fmt: skip
    assert [[r[0] for r in b.records] for b in stored][1] == [1, 2, 3]
    assert {b.leader_epoch for b in stored} == {0}
    assert (log.directory / "leader-epoch-checkpoint").read_text() == "0\n1\n0 0\n"
    assert log.log_end_offset == log.high_watermark == 16
    check_partition(log)


def test_leader_epoch_entry_starts_at_the_first_offset(tmp_path: Path) -> None:
    config = LogConfig()
    log = open_log(tmp_path / "t-0", config, log_start_offset=500, clock=Clock())
    assert log.append(batch(2)).first_offset == 500
    assert (log.directory / "leader-epoch-checkpoint").read_text() == "0\n1\n0 500\n"
    assert (log.directory / "00000000000000000500.log").exists()


# ------------------------------------------------------------------ idempotence and rejections


def test_duplicates_within_the_last_five_return_the_original_offsets(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    sent = [batch(2, A, 0, 2 * i) for i in range(7)]
    infos = [log.append(b) for b in sent]
    before = files(log.directory)
    for i in range(2, 7):  # the last five batches are remembered
        dup = log.append(sent[i])
        assert (dup.first_offset, dup.last_offset) == (infos[i].first_offset, infos[i].last_offset)
        assert (dup.num_batches, dup.duplicate_batches) == (0, 1)
    for i in (0, 1):  # older ones are not: their sequence is simply out of order
        with pytest.raises(OutOfOrderSequenceError):
            log.append(sent[i])
    assert files(log.directory) == before
    assert log.append(batch(1, A, 0, 14)).first_offset == 14


def test_new_epoch_restarts_sequences_and_older_epochs_are_fenced(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    log.append(batch(2, A, 0, 0))
    with pytest.raises(OutOfOrderSequenceError):
        log.append(batch(2, A, 1, 5))  # a new epoch must start at sequence 0
    assert log.append(batch(2, A, 1, 0)).first_offset == 2
    with pytest.raises(InvalidProducerEpochError):
        log.append(batch(2, A, 0, 2))
    with pytest.raises(OutOfOrderSequenceError):
        log.append(batch(1, A, 1, 3))  # a gap in the sequence
    assert log.append(batch(1, A, 1, 2)).first_offset == 4
    assert log.append(batch(1, B, 3, 77)).first_offset == 5  # unknown producer: any sequence


def _corrupt(raw: bytes) -> bytes:
    data = bytearray(raw)
    data[-1] ^= 0xFF
    return bytes(data)


REJECTED = {
    "out_of_order": (lambda: batch(2, A, 1, 9), OutOfOrderSequenceError),
    "fenced": (lambda: batch(2, A, 0, 4), InvalidProducerEpochError),
    "new_epoch_not_zero": (lambda: batch(2, A, 2, 4), OutOfOrderSequenceError),
    "corrupt_crc": (lambda: _corrupt(batch(2)), CorruptRecordError),
    "partial_batch": (lambda: batch(2)[:-3], InvalidRecordError),
    "client_control_batch": (
        lambda: build_control_batch(
            ControlType.COMMIT, producer_id=A, producer_epoch=1, timestamp=NOW
        ),
        InvalidRecordError,
    ),
    "count_mismatch": (
        lambda: build_batch([Record(0, NOW, None, b"x")], last_offset=3),
        InvalidRecordError,
    ),
    "too_large": (lambda: batch(1, size=5000), RecordTooLargeError),
    "good_then_bad_in_one_append": (
        lambda: batch(2, A, 1, 4) + batch(1, A, 1, 99),
        OutOfOrderSequenceError,
    ),
    "good_then_too_large_across_a_roll": (
        lambda: b"".join(batch(3, size=200) for _ in range(8)) + batch(1, size=2500),
        RecordTooLargeError,
    ),
}


@pytest.mark.parametrize("case", sorted(REJECTED))
def test_rejected_append_leaves_every_file_byte_identical(tmp_path: Path, case: str) -> None:
    make, error = REJECTED[case]
    log = new_log(tmp_path, **{"segment.bytes": 2400, "max.message.bytes": 3000})
    log.append(batch(2, A, 1, 0))
    log.append(batch(2, A, 1, 2))
    log.append(batch(1))
    before, end = files(log.directory), log.log_end_offset
    entry = log.producer_state.last_entry(A)
    assert entry is not None
    state = (entry.producer_epoch, entry.last_seq)
    with pytest.raises(error):
        log.append(make())
    assert files(log.directory) == before
    assert log.log_end_offset == end
    assert (entry.producer_epoch, entry.last_seq) == state
    assert log.append(batch(1, A, 1, 4)).first_offset == end  # and the log carries on


# ------------------------------------------------------------------ rolls


def _check_rolled(log: Log) -> None:
    """§9.2: every non-active segment has trimmed indexes ending with its max timestamp, and a
    producer snapshot exists at each rolled segment's base."""
    check_partition(log)
    for seg in log.segments[1:]:
        assert (log.directory / f"{seg.base_offset:020d}.snapshot").exists()


def test_roll_on_segment_bytes(tmp_path: Path) -> None:
    log = new_log(tmp_path, **{"segment.bytes": 1000, "index.interval.bytes": 150})
    sizes, expected = [], [0]
    for i in range(30):
        raw = batch(1 + i % 3, A, 0, log.log_end_offset, size=40 + 13 * i % 90)
        if expected[-1] > 1000 - len(raw):  # Kafka: size > segment.bytes - messagesSize
            sizes.append(expected[-1])
            expected.append(0)
        expected[-1] += len(raw)
        log.append(raw)
    assert [s for _, s in segment_sizes(log)] == [*sizes, expected[-1]]
    assert all(s <= 1000 for _, s in segment_sizes(log))
    _check_rolled(log)


def test_roll_on_segment_ms_by_batch_timestamps_also_after_reopen(tmp_path: Path) -> None:
    clock = Clock()
    log = new_log(tmp_path, clock, **{"segment.ms": 1000})
    # The segment's first batch has max timestamp NOW + 1; roll once an incoming batch's max
    # timestamp is more than segment.ms past it.
    for ts in (NOW, NOW + 500, NOW + 1000):  # the last one waited exactly 1000: no roll
        log.append(batch(2, ts=ts))
    assert len(log.segments) == 1
    log.append(batch(2, ts=NOW + 1001))  # max NOW + 1002: waited 1001
    assert [s.base_offset for s in log.segments] == [0, 6]
    log = reopen(log)  # the first batch's timestamp is read back from the reopened segment
    log.append(batch(1, ts=NOW + 1500))
    log.append(batch(1, ts=NOW + 2002))  # waited 1000 from NOW + 1002
    assert len(log.segments) == 2
    log.append(batch(1, ts=NOW + 2003))
    assert [s.base_offset for s in log.segments] == [0, 6, 10]
    _check_rolled(log)


def test_roll_on_segment_ms_by_wall_clock_without_timestamps(tmp_path: Path) -> None:
    clock = Clock()
    log = new_log(tmp_path, clock, **{"segment.ms": 1000})
    log.append(batch(2, ts=-1))
    clock.now += 1000
    log.append(batch(2, ts=-1))
    assert len(log.segments) == 1
    clock.now += 1
    log.append(batch(2, ts=-1))
    assert [s.base_offset for s in log.segments] == [0, 4]


def test_roll_when_an_index_is_full(tmp_path: Path) -> None:
    # 48 bytes: 6 offset-index slots, 4 time-index slots (full at 3, one kept for the roll).
    log = new_log(tmp_path, **{"segment.index.bytes": 48, "index.interval.bytes": 0})
    for i in range(12):
        log.append(batch(1, ts=NOW + i))
    # Entries come from the 2nd append of a segment on; the time index is full after 3, so
    # each segment takes 4 appends. The roll's final entry repeats the last one: not added.
    assert [s.base_offset for s in log.segments] == [0, 4, 8]
    assert [s.time_index.entries for s in log.segments[:2]] == [3, 3]
    assert [s.offset_index.entries for s in log.segments[:2]] == [3, 3]
    _check_rolled(log)


def test_an_offset_index_filled_to_its_last_slot_keeps_its_entries_at_the_roll(
    tmp_path: Path,
) -> None:
    """One timestamp throughout: the time index takes one entry, the offset index (6 slots)
    fills to the file's end, so the roll's trim has nothing to cut. The entries kept in memory
    (``PENDING_BYTES``) still reach the file: they were dropped there, leaving six zero-filled
    slots that Kafka reads as entries (offset = base, position 0)."""
    log = new_log(tmp_path, **{"segment.index.bytes": 48, "index.interval.bytes": 0})
    for _ in range(9):
        log.append(batch(1, ts=NOW))
    assert [s.base_offset for s in log.segments] == [0, 7]
    raw = (log.directory / f"{0:020d}.index").read_bytes()
    entries = [struct.unpack_from(">ii", raw, i) for i in range(0, len(raw), 8)]
    assert [offset for offset, _ in entries] == [1, 2, 3, 4, 5, 6]
    assert all(position > 0 for _, position in entries)
    _check_rolled(log)
    _check_rolled(reopen(log))


@pytest.mark.parametrize("index_bytes", [12, 16, 23])
def test_index_sizes_under_two_time_entries_still_write_and_roll(
    tmp_path: Path, index_bytes: int
) -> None:
    """``segment.index.bytes`` 12 to 23: one time index slot, held back for the roll's entry
    (and one or two offset index slots); every append then rolls (Kafka's ``shouldRoll``: a
    full index), and the offsets, records and indexes are as Kafka's own reading wants them."""
    log = new_log(tmp_path, **{"segment.index.bytes": index_bytes, "index.interval.bytes": 0})
    for i in range(4):
        log.append(batch(2, ts=NOW + i))
    log = reopen(log)
    log.append(batch(2, ts=NOW + 9))
    assert log.log_end_offset == 10
    assert [s.base_offset for s in log.segments][:2] == [0, 2]
    assert [r.offset for r in iter_records(log)] == list(range(10))
    _check_rolled(log)
    log.close()


@pytest.mark.parametrize("index_bytes", [4, 8, 11])
def test_index_sizes_under_one_time_entry_are_refused(index_bytes: int) -> None:
    """Kafka accepts ``segment.index.bytes`` from 4, yet its index refuses to create a file
    under one entry, so such a topic's partitions go offline at creation. Refused here when the
    setting is read, before anything is written (records were written, then the close failed)."""
    with pytest.raises(ConfigError, match=r"at least 12.*setting=segment\.index\.bytes"):
        LogConfig.from_properties({"segment.index.bytes": str(index_bytes)}, source="test")


def test_roll_when_offsets_would_overflow_the_relative_range(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    log.append(batch(1))
    # A stored (replicated) batch may span more offsets than it has records.
    wide = build_batch([Record(0, NOW, None, b"x")], last_offset=INT32_MAX)
    info = log.append(wide, origin=AppendOrigin.REPLICATION)
    assert (info.first_offset, info.last_offset) == (1, 1 + INT32_MAX)
    assert [s.base_offset for s in log.segments] == [0, 1]
    check_partition(log)


def test_multi_batch_append_across_a_roll(tmp_path: Path) -> None:
    """Each new segment starts at the first offset it holds, and the producer snapshot taken
    at the roll already includes the batches written before it in the same append."""
    log = new_log(tmp_path, **{"segment.bytes": 700})
    data = [batch(2, A, 0, 2 * i, size=60) for i in range(8)]
    per_segment = 700 // len(data[0])
    info = log.append(b"".join(data))
    assert (info.first_offset, info.last_offset) == (0, 15)
    assert [s.base_offset for s in log.segments] == list(range(0, 16, 2 * per_segment))
    snap = log.segments[1].base_offset
    [entry] = read_snapshot(log.directory / f"{snap:020d}.snapshot")
    assert (entry.producer_id, entry.last_sequence, entry.last_offset) == (A, snap - 1, snap - 1)
    _check_rolled(log)
    log.close()
    (log.directory / "00000000000000000016.snapshot").unlink()  # load from the roll snapshot
    log = open_log(log.directory, log.config, clean_shutdown=True, clock=log.clock)
    assert log.append(data[-1]).duplicate_batches == 1
    check_partition(log)


def test_clean_close_trims_the_active_segment_and_snapshots_the_end(tmp_path: Path) -> None:
    log = new_log(tmp_path, **{"index.interval.bytes": 100, "segment.index.bytes": 4096})
    for i in range(10):
        log.append(batch(2, A, 0, 2 * i, ts=NOW + 10 * i))
    active = log.active_segment
    assert active.offset_index.path.stat().st_size == 4096
    log.close()
    assert active.offset_index.path.stat().st_size == 8 * active.offset_index.entries
    assert active.time_index.path.stat().st_size == 12 * active.time_index.entries
    assert active.time_index.last_entry == (NOW + 91, 19)
    [entry] = read_snapshot(log.directory / "00000000000000000020.snapshot")
    assert (entry.producer_id, entry.last_sequence, entry.last_offset) == (A, 19, 19)


# ------------------------------------------------------------------ topic-level rewrites


def test_log_append_time_is_stamped_with_a_valid_crc(tmp_path: Path) -> None:
    clock = Clock(NOW + 12345)
    log = new_log(tmp_path, clock, **{"message.timestamp.type": "LogAppendTime"})
    log.append(batch(3, A, 0, 0, ts=NOW))
    log.append(batch(2, codec=Codec.LZ4, ts=5))
    raw = (log.directory / "00000000000000000000.log").read_bytes()
    for stored in read_partition(log.directory):  # read_partition also checked every CRC
        assert stored.max_timestamp == NOW + 12345
        assert [r[1] for r in stored.records] == [NOW + 12345] * len(stored.records)
        kb = DefaultRecordBatch(bytearray(raw[stored.position : stored.position + stored.size]))
        assert kb.timestamp_type == 1
    assert {r.timestamp for r in iter_records(log)} == {NOW + 12345}
    check_partition(log)


def test_topic_compression_recompresses_other_codecs(tmp_path: Path) -> None:
    log = new_log(tmp_path, **{"compression.type": "lz4"})
    plain, zstd = batch(4, A, 0, 0), batch(2, codec=Codec.ZSTD)
    lz4 = batch(3, codec=Codec.LZ4)
    for raw in (plain, zstd, lz4):
        log.append(raw)
    log.write_txn_marker(B, 0, commit=True)  # control batches stay uncompressed
    raw_log = (log.directory / "00000000000000000000.log").read_bytes()
    stored = read_partition(log.directory)
    codecs = [DefaultRecordBatch(bytearray(raw_log[b.position : b.position + b.size]))
              .compression_type for b in stored]  # fmt: skip
    assert codecs == [3, 3, 3, 0]
    sent = [DefaultRecordBatch(bytearray(r)) for r in (plain, zstd, lz4)]
    for got, original in zip(stored, sent, strict=False):
        assert [(r[1], r[2], r[3], r[4]) for r in got.records] == [
            (r.timestamp, r.key, r.value, tuple(r.headers)) for r in original
        ]
    assert raw_log[stored[2].position + 16 :][: len(lz4) - 16] == lz4[16:]  # kept as sent
    assert stored[0].pid == A and stored[0].last_seq == 3
    check_partition(log)


def test_uncompressed_topic_decompresses(tmp_path: Path) -> None:
    log = new_log(tmp_path, **{"compression.type": "uncompressed"})
    log.append(batch(3, codec=Codec.GZIP))
    raw = (log.directory / "00000000000000000000.log").read_bytes()
    assert DefaultRecordBatch(bytearray(raw)).compression_type == 0


def test_max_message_bytes_applies_before_and_after_recompression(tmp_path: Path) -> None:
    log = new_log(tmp_path, **{"max.message.bytes": 1000, "compression.type": "lz4"})
    compressible = batch(4, size=400)  # > 1000 bytes as sent, far smaller once compressed
    assert len(compressible) > 1000
    with pytest.raises(RecordTooLargeError):
        log.append(compressible)
    size = next(n for n in range(1000) if len(batch(1, size=n)) >= 1000)
    exact, over = batch(1, size=size), batch(1, size=size + 1)
    assert (len(exact), len(over)) == (1000, 1001)
    other = new_log(tmp_path / "x", **{"max.message.bytes": 1000})
    assert other.append(exact).num_batches == 1
    with pytest.raises(RecordTooLargeError):
        other.append(over)


# ------------------------------------------------------------------ transactions


def _txn_entries(log: Log) -> list[tuple[int, int, int, int]]:
    out = []
    for seg in log.segments:
        path = seg.txn_index.path
        data = path.read_bytes() if path.exists() else b""
        out += [struct.unpack_from(">hqqqq", data, i)[1:] for i in range(0, len(data), 34)]
    return out


def test_lso_stays_at_the_first_offset_of_an_open_transaction(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    log.append(batch(2))
    log.append(batch(2, A, 0, 0, txn=True))
    log.append(batch(3))
    log.append(batch(2, A, 0, 2, txn=True))
    assert (log.last_stable_offset, log.log_end_offset) == (2, 9)
    marker = log.write_txn_marker(A, 0, commit=True, timestamp=NOW)
    assert marker.first_offset == 9
    assert log.last_stable_offset == log.log_end_offset == 10
    assert _txn_entries(log) == []  # commits are not indexed
    check_partition(log)


@pytest.mark.parametrize(("segment_bytes", "marker_epoch"), [(1 << 20, 0), (1 << 20, 3), (500, 0)])
def test_append_committed_is_an_append_then_a_commit_marker(
    tmp_path: Path, segment_bytes: int, marker_epoch: int
) -> None:
    """``append_committed`` (the sink's one write per partition) leaves the same files, offsets
    and producer state as ``append_batches`` and ``write_txn_marker`` one after the other,
    whether or not a roll falls between the batches (500-byte segments), and with a marker at a
    newer epoch than its batches (a recovering sink's)."""
    logs = [new_log(tmp_path / side, **{"segment.bytes": segment_bytes}) for side in "ab"]
    for log in logs:
        log.append(batch(2, A, 0, 0, txn=True, size=100))
        log.write_txn_marker(A, 0, commit=True, timestamp=NOW)
        log.append(batch(1, B, 0, 0, txn=True))  # another producer's open transaction
    data = b"".join(batch(n, A, 0, seq, txn=True, size=100) for n, seq in ((3, 2), (2, 5)))
    two = logs[0].append(data)
    marker = logs[0].write_txn_marker(A, marker_epoch, commit=True, timestamp=NOW + 5)
    one = logs[1].append_committed(
        parse_incoming(bytearray(data), AppendOrigin.CLIENT), A, marker_epoch, timestamp=NOW + 5
    )
    assert (one.first_offset, one.last_offset) == (two.first_offset, marker.last_offset)
    entries = [log.producer_state.last_entry(A) for log in logs]
    assert entries[0] is not None and entries[1] is not None
    assert entries[0].to_snapshot_entry() == entries[1].to_snapshot_entry()
    assert entries[1].current_txn_first_offset is None
    assert [log.last_stable_offset for log in logs] == [3, 3]  # B's transaction is still open
    assert segment_sizes(logs[0]) == segment_sizes(logs[1])
    for log in logs:
        log.close()
    assert files(tmp_path / "a" / "t-0") == files(tmp_path / "b" / "t-0")
    stored = read_partition(tmp_path / "b" / "t-0")  # kafka-python's reader
    assert stored[-1].control and stored[-1].marker is not None
    assert stored[-1].marker[0] == ControlType.COMMIT and stored[-1].epoch == marker_epoch


# What each case appends after A's first transaction (2 records, sequences 0-1, committed):
# (data batches, the marker's epoch, topic settings, whether the one-pass placement applies).
COMMITTED_CASES = {
    "continues the producer": ([(3, 2), (2, 5)], 0, {}, True),
    "marker at a newer epoch": ([(3, 2)], 4, {}, False),
    "retried duplicate first": ([(2, 0), (3, 2)], 0, {}, False),
    "out of order": ([(3, 3)], 0, {}, False),
    "topic codec differs": ([(3, 2)], 0, {"compression.type": "lz4"}, False),
    "LogAppendTime topic": ([(3, 2)], 0, {"message.timestamp.type": "LogAppendTime"}, False),
    "over max.message.bytes": ([(3, 2)], 0, {"max.message.bytes": "300"}, False),
}


@pytest.mark.parametrize("case", list(COMMITTED_CASES))
def test_append_committed_in_one_pass_or_in_full_as_append_then_marker(
    tmp_path: Path, case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``append_committed`` writes the batches in one pass (``write_committed``) only where the
    full checks would pass with nothing to rewrite; either way the files, offsets, state and
    errors are those of ``append`` then ``write_txn_marker``."""
    import kafkatier.storage.log.log as log_module

    spans, marker_epoch, settings, one_pass = COMMITTED_CASES[case]
    placed: list[object] = []
    real = log_module.write_committed
    monkeypatch.setattr(
        log_module, "write_committed", lambda *a: placed.append(real(*a)) or placed[-1]
    )
    logs = [new_log(tmp_path / side, **settings) for side in "ab"]
    for log in logs:
        log.append(batch(2, A, 0, 0, txn=True, size=100))
        log.write_txn_marker(A, 0, commit=True, timestamp=NOW)
    data = b"".join(batch(n, A, 0, seq, txn=True, size=100) for n, seq in spans)
    outcomes = []
    for log, combined in zip(logs, (False, True), strict=True):
        try:
            if combined:
                batches = parse_incoming(bytearray(data), AppendOrigin.CLIENT)
                got = log.append_committed(batches, A, marker_epoch, timestamp=NOW + 5)
                outcomes.append((got.first_offset, got.last_offset))
            else:
                first = log.append(data).first_offset
                last = log.write_txn_marker(A, marker_epoch, commit=True, timestamp=NOW + 5)
                outcomes.append((first, last.last_offset))
        except Exception as exc:  # both sides must refuse alike
            outcomes.append(type(exc).__name__)
    assert outcomes[0] == outcomes[1]
    assert [p is not None for p in placed] == [one_pass]
    entries = [log.producer_state.last_entry(A) for log in logs]
    assert entries[0] is not None and entries[1] is not None
    assert entries[0].to_snapshot_entry() == entries[1].to_snapshot_entry()
    assert [log.last_stable_offset for log in logs] == [logs[0].log_end_offset] * 2
    for log in logs:
        log.close()
    assert files(tmp_path / "a" / "t-0") == files(tmp_path / "b" / "t-0")


# Topic settings and leader epoch changes under which eight committed transactions meet each
# way ``append_committed`` writes: in one write without index entries, one that adds some, or
# the full path (a roll, a new leader epoch). The last element: whether the one-pass writes of
# the rounds that came to it added no index entry (True: none did; "some": both kinds, or
# fewer rounds than eight; "fewer": fewer rounds than eight).
_NO_ENTRY = {"index.interval.bytes": "100000"}
ROUND_CASES: dict[str, tuple[dict[str, str], tuple[int, ...], list[bool] | str]] = {
    "no index entry due": (_NO_ENTRY, (), [True] * 8),
    "an index entry every batch": ({"index.interval.bytes": "1"}, (), [False] * 8),
    "some index entries": ({"index.interval.bytes": "900"}, (), "some"),
    "rolls by size": ({**_NO_ENTRY, "segment.bytes": "2000"}, (), "some"),
    "rolls by time": ({**_NO_ENTRY, "segment.ms": "150"}, (), "some"),
    "a new leader epoch": (_NO_ENTRY, (3, 6), [True] * 6),
    "full indexes roll": ({"index.interval.bytes": "1", "segment.index.bytes": "48"}, (), "fewer"),
}


@pytest.mark.parametrize("queue", [False, True], ids=["written at once", "queued"])
@pytest.mark.parametrize("case", list(ROUND_CASES))
def test_committed_transactions_written_at_once_leave_what_append_then_marker_leave(
    tmp_path: Path, case: str, queue: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``append_committed`` writes a placed transaction without the general append's
    per-batch objects where no roll and no new leader epoch is due: the files (segments,
    indexes, snapshots), offsets and producer state are still those of ``append`` then
    ``write_txn_marker``, round after round, whichever batch holds the largest timestamp;
    the same with its bytes left to a thread (``QueuedWrites``, finished after each round)."""
    settings, new_epochs, unindexed = ROUND_CASES[case]
    if queue:
        probe = QueuedWrites.open(1)
        if probe is None:
            pytest.skip("the C library is not built here: nothing is queued")
        probe.finish()
    written: list[bool] = []
    real = LogSegment.append_placed

    def placed(self: LogSegment, views: Any, batches: Any, queued: Any = None) -> None:
        since, start = self._bytes_since_last_index_entry, self.size  # since grows by the
        real(self, views, batches, queued)  # bytes written unless an entry was due
        if sys._getframe(1).f_code is write_committed.__code__:  # not append's calls
            written.append(self._bytes_since_last_index_entry == since + self.size - start)

    monkeypatch.setattr(LogSegment, "append_placed", placed)
    clocks = [Clock(), Clock()]
    logs = [new_log(tmp_path / s, clock, **settings) for s, clock in zip("ab", clocks, strict=True)]
    for log in logs:
        log.append(batch(2, A, 0, 0, txn=True, size=100))
        log.write_txn_marker(A, 0, commit=True, timestamp=NOW)
    outcomes: list[list[object]] = [[], []]
    for r in range(8):
        ts = NOW + 100 * (r + 1)
        seq = 2 + 5 * r
        data = batch(3, A, 0, seq, txn=True, ts=ts, size=100)
        # The second batch's largest timestamp: ts + 11, or the first batch's (ts + 2).
        data += batch(2, A, 0, seq + 3, txn=True, ts=ts + (10 if r % 2 else 1), size=100)
        marker_ts = (ts + 50, ts - 50, ts + 11)[r % 3]  # above the batches', below, or at it
        for side, log in enumerate(logs):
            clocks[side].now = ts
            if r in new_epochs:
                log.leader_epoch += 1
            if side:
                batches = parse_incoming(bytearray(data), AppendOrigin.CLIENT)
                queued = QueuedWrites.open(1) if queue else None
                with queued or contextlib.nullcontext():
                    outcomes[side].append(log.append_committed(
                        batches, A, 0, coordinator_epoch=r // 2, timestamp=marker_ts,
                        queued=queued,
                    ))  # fmt: skip
            else:
                first = log.append(data)
                last = log.write_txn_marker(A, 0, commit=True, coordinator_epoch=r // 2,
                                            timestamp=marker_ts)  # fmt: skip
                outcomes[side].append((first.first_offset, last.last_offset))
        maxima = [[s.max_timestamp_and_offset for s in log.segments] for log in logs]
        assert maxima[0] == maxima[1]  # what the next time index entry takes
    assert [(o.first_offset, o.last_offset) for o in outcomes[1]] == outcomes[0]  # type: ignore[attr-defined]
    entries = [log.producer_state.last_entry(A) for log in logs]
    assert entries[0] is not None and entries[1] is not None
    assert entries[0].to_snapshot_entry() == entries[1].to_snapshot_entry()
    if unindexed == "some":
        assert True in written and (False in written or len(written) < 8)
    elif unindexed == "fewer":
        assert len(written) < 8
    else:
        assert written == unindexed
    for log in logs:
        log.close()
    assert files(tmp_path / "a" / "t-0") == files(tmp_path / "b" / "t-0")
    assert len(read_partition(tmp_path / "b" / "t-0")) == 2 + 8 * 3  # batches, kafka-python


def _committed_both_ways(
    tmp_path: Path, rounds: list[tuple[int, int, int]], *, first_coordinator: int = 0,
    roll_first: bool = False, **settings: object,
) -> list[object]:  # fmt: skip
    """After A's first transaction (coordinator epoch ``first_coordinator``; then a roll to an
    empty segment if asked), each round (the batches' timestamp, the marker's, its coordinator
    epoch) appended as ``append`` then ``write_txn_marker`` on one log and ``append_committed``
    on another; both sides' outcomes (offsets, or the error's type), and their files equal."""
    logs = [new_log(tmp_path / side, **settings) for side in "ab"]
    for log in logs:
        log.append(batch(2, A, 0, 0, txn=True, size=100))
        log.write_txn_marker(A, 0, commit=True, coordinator_epoch=first_coordinator,
                             timestamp=NOW)  # fmt: skip
        if roll_first:
            log.roll()
    outcomes: list[list[object]] = [[], []]
    for r, (ts, marker_ts, coordinator) in enumerate(rounds):
        data = batch(3, A, 0, 2 + 3 * r, txn=True, ts=ts, size=100)
        for side, log in enumerate(logs):
            try:
                if side:
                    got = log.append_committed(
                        parse_incoming(bytearray(data), AppendOrigin.CLIENT), A, 0,
                        coordinator_epoch=coordinator, timestamp=marker_ts,
                    )  # fmt: skip
                    outcomes[side].append((got.first_offset, got.last_offset))
                else:
                    first = log.append(data).first_offset
                    last = log.write_txn_marker(A, 0, commit=True, coordinator_epoch=coordinator,
                                                timestamp=marker_ts)  # fmt: skip
                    outcomes[side].append((first, last.last_offset))
            except Exception as exc:
                outcomes[side].append(type(exc).__name__)
    assert outcomes[0] == outcomes[1]
    assert segment_sizes(logs[0]) == segment_sizes(logs[1])
    for log in logs:
        log.close()
    assert files(tmp_path / "a" / "t-0") == files(tmp_path / "b" / "t-0")
    return outcomes[1]


def test_a_committed_marker_late_enough_to_roll_starts_a_new_segment(tmp_path: Path) -> None:
    """The marker's own time rule (``segment.ms`` from the segment's first batch to the
    marker's timestamp) rolls before the marker, as the coordinator's separate append would."""
    _committed_both_ways(tmp_path, [(NOW + 10, NOW + 5_000, 0), (NOW + 5_010, NOW + 5_020, 0)],
                         **{"segment.ms": 1_000})  # fmt: skip
    assert len(list((tmp_path / "b" / "t-0").glob("*.log"))) == 2


def test_a_committed_transaction_into_an_empty_segment_bases_its_time_on_the_data(
    tmp_path: Path,
) -> None:
    """Into an empty segment the data's largest timestamp, not the marker's, becomes what the
    time rule counts from: the next round rolls exactly where append-then-marker rolls."""
    rounds = [(NOW + 10, NOW + 900, 0), (NOW + 1_500, NOW + 1_510, 0)]
    _committed_both_ways(tmp_path, rounds, roll_first=True, **{"segment.ms": 1_000})


def test_a_committed_marker_of_an_older_coordinator_epoch_is_refused(tmp_path: Path) -> None:
    """A marker whose coordinator epoch is below the producer's last one is fenced, as Kafka
    fences a zombie coordinator's marker; ``append_committed`` then writes nothing."""
    log = new_log(tmp_path)
    log.append(batch(2, A, 0, 0, txn=True, size=100))
    log.write_txn_marker(A, 0, commit=True, coordinator_epoch=3, timestamp=NOW)
    before = files(tmp_path / "t-0")
    data = parse_incoming(bytearray(batch(3, A, 0, 2, txn=True, size=100)), AppendOrigin.CLIENT)
    with pytest.raises(TransactionCoordinatorFencedError):
        log.append_committed(data, A, 0, coordinator_epoch=1, timestamp=NOW + 20)
    assert files(tmp_path / "t-0") == before and log.log_end_offset == 3
    log.append(batch(3, A, 0, 2, txn=True, size=100))
    with pytest.raises(TransactionCoordinatorFencedError):
        log.write_txn_marker(A, 0, commit=True, coordinator_epoch=1, timestamp=NOW + 20)
    log.close()


def test_a_committed_transaction_of_more_batches_than_one_pwritev_takes(tmp_path: Path) -> None:
    """1,100 data batches and their marker (Linux's ``pwritev`` takes 1,024 buffers): written
    as an append and a marker would write them."""
    logs = [new_log(tmp_path / side, **{"index.interval.bytes": "1000000"}) for side in "ab"]
    for log in logs:
        log.append(batch(1, A, 0, 0, txn=True))
        log.write_txn_marker(A, 0, commit=True, timestamp=NOW)
    data = b"".join(batch(1, A, 0, 1 + i, txn=True, size=1) for i in range(1_100))
    logs[0].append(data)
    logs[0].write_txn_marker(A, 0, commit=True, timestamp=NOW + 5)
    got = logs[1].append_committed(parse_incoming(bytearray(data), AppendOrigin.CLIENT), A, 0,
                                   timestamp=NOW + 5)  # fmt: skip
    assert (got.first_offset, got.last_offset, got.num_batches) == (2, 1_102, 1_101)
    for log in logs:
        log.close()
    assert files(tmp_path / "a" / "t-0") == files(tmp_path / "b" / "t-0")


def test_abort_is_indexed_with_pid_first_marker_and_lso(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    log.append(batch(2, A, 0, 0, txn=True))  # 0-1
    log.append(batch(1))  # 2
    log.append(batch(2, A, 0, 2, txn=True))  # 3-4
    log.write_txn_marker(A, 0, commit=False)  # 5
    assert _txn_entries(log) == [(A, 0, 5, 6)]
    assert log.last_stable_offset == 6
    log.write_txn_marker(A, 0, commit=False)  # an empty transaction: nothing to index
    assert _txn_entries(log) == [(A, 0, 5, 6)]
    check_partition(log)


def test_interleaved_transactions_of_two_producers(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    log.append(batch(1, A, 0, 0, txn=True))  # 0  A opens
    log.append(batch(1, B, 0, 0, txn=True))  # 1  B opens
    log.append(batch(1, A, 0, 1, txn=True))  # 2
    assert log.last_stable_offset == 0
    log.write_txn_marker(A, 0, commit=False)  # 3  A aborts while B is open: LSO = B's first
    assert log.last_stable_offset == 1
    log.append(batch(1, A, 0, 2, txn=True))  # 4  A opens again
    log.append(batch(1, B, 0, 1, txn=True))  # 5
    log.write_txn_marker(B, 0, commit=False)  # 6  B aborts, A still open from 4
    log.write_txn_marker(A, 0, commit=True)  # 7
    assert _txn_entries(log) == [(A, 0, 3, 1), (B, 1, 6, 4)]
    assert log.last_stable_offset == 8
    check_partition(log)


def test_abort_marker_in_a_later_segment_is_indexed_there(tmp_path: Path) -> None:
    log = new_log(tmp_path, **{"segment.bytes": 500})
    log.append(batch(2, A, 0, 0, txn=True, size=100))
    log.append(batch(2, size=100))
    assert len(log.segments) == 2
    log.write_txn_marker(A, 0, commit=False)
    assert not log.segments[0].txn_index.path.exists()
    assert _txn_entries(log) == [(A, 0, 4, 5)]
    check_partition(log)


def test_transaction_rule_violations(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    log.append(batch(1, A, 3, 0, txn=True))
    with pytest.raises(InvalidTxnStateError):
        log.append(batch(1, A, 3, 1))  # non-transactional while the transaction is open
    with pytest.raises(InvalidProducerEpochError):
        log.write_txn_marker(A, 2, commit=True)
    log.write_txn_marker(A, 3, commit=True, coordinator_epoch=5)
    with pytest.raises(TransactionCoordinatorFencedError):
        log.write_txn_marker(A, 3, commit=False, coordinator_epoch=4)
    check_partition(log)


@pytest.mark.parametrize("clean", [True, False])
def test_transactions_survive_reopen(tmp_path: Path, clean: bool) -> None:
    log = new_log(tmp_path, **{"segment.bytes": 600})
    log.append(batch(1, A, 0, 0, txn=True))
    log.append(batch(2, B, 0, 0, txn=True, size=120))
    log.write_txn_marker(A, 0, commit=False)
    log.append(batch(2, C, 0, 0, txn=True, size=120))
    log.write_txn_marker(B, 0, commit=True)
    log.append(batch(1, A, 0, 1, txn=True))  # A and C left open
    entries, lso = _txn_entries(log), log.last_stable_offset
    assert (entries, lso) == ([(A, 0, 3, 1)], 4)  # C (from 4) and A (from 7) still open
    index_bytes = {p: b for p, b in files(log.directory).items() if p.endswith(".txnindex")}
    log = reopen(log, clean)
    assert _txn_entries(log) == entries and log.last_stable_offset == lso
    assert {p: b for p, b in files(log.directory).items() if p.endswith(".txnindex")} == (
        index_bytes
    )
    check_partition(log)
    log.write_txn_marker(C, 0, commit=False)
    log.write_txn_marker(A, 0, commit=False)
    assert _txn_entries(log)[-2:] == [(C, 4, 8, 7), (A, 7, 9, 10)]
    check_partition(log)


def test_flush_syncs_the_directory_when_it_covers_new_segments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kafka's LocalLog.flush: new segment files need their directory entry made durable."""
    import kafkatier.storage.log.durability as durability_module

    synced: list[Path] = []
    monkeypatch.setattr(durability_module, "fsync_dir", synced.append)
    log = new_log(tmp_path, **{"segment.bytes": 500})
    log.append(batch(1))
    log.flush()  # segment 0 is new: created after recovery point 0
    assert synced == [log.directory]
    log.append(batch(1))
    log.flush()  # nothing created since recovery point 1: data fsync only
    assert len(synced) == 1
    while len(log.segments) < 3:
        log.append(batch(2, size=100))
    assert len(synced) == 1  # a roll leaves its flush to the next flush (Kafka: scheduled)
    log.flush()  # segments 1 and 2 are new
    assert synced == [log.directory] * 2
    assert log.recovery_point == log.log_end_offset
    log.append(batch(1))
    log.flush_data()  # appends only: the data, not the directory
    assert len(synced) == 2 and log.recovery_point < log.log_end_offset
    while len(log.segments) < 4:
        log.append(batch(2, size=100))
    log.flush_data()  # the roll's flush: up to the new segment, whose name is new too
    assert synced == [log.directory] * 3
    assert log.recovery_point == log.active_segment.base_offset


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("idem"), st.integers(1, 3)),
        st.tuples(st.just("plain"), st.integers(1, 3)),
        st.tuples(st.just("txn"), st.sampled_from([B, C])),
        st.tuples(st.just("end"), st.sampled_from([B, C]), st.booleans(), st.booleans()),
        st.tuples(st.just("bump"), st.just(0)),
        st.tuples(st.just("retry"), st.just(0)),
        st.tuples(st.just("reopen"), st.booleans()),
    ),
    max_size=40,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS)
def test_random_operations_keep_the_log_consistent(ops: list[tuple]) -> None:
    """Any mix of appends, markers (some bumping the producer epoch, as a coordinator does on
    abort), retries and reopens leaves a log whose every file agrees with a replay."""
    with tempfile.TemporaryDirectory() as tmp:
        log = new_log(Path(tmp), **{"segment.bytes": 800, "segment.index.bytes": 60,
                                    "index.interval.bytes": 100})  # fmt: skip
        epochs, seqs = {A: 0, B: 0, C: 0}, {A: 0, B: 0, C: 0}
        last: tuple[bytes, int, int] | None = None
        for op in ops:
            kind = op[0]
            if kind == "idem":
                data = [batch(2, A, epochs[A], seqs[A] + 2 * i) for i in range(op[1])]
                info = log.append(b"".join(data))
                seqs[A] += 2 * op[1]
                last = (data[-1], info.last_offset - 1, info.last_offset)
            elif kind == "plain":
                log.append(b"".join(batch(1) for _ in range(op[1])))
            elif kind == "txn":
                log.append(batch(1, op[1], epochs[op[1]], seqs[op[1]], txn=True))
                seqs[op[1]] += 1
            elif kind == "end":
                _, pid, commit, bump = op
                epochs[pid] += bump
                seqs[pid] = 0 if bump else seqs[pid]
                log.write_txn_marker(pid, epochs[pid], commit=commit)
            elif kind == "bump":
                epochs[A], seqs[A], last = epochs[A] + 1, 0, None
            elif kind == "retry" and last is not None:
                dup = log.append(last[0])
                assert (dup.num_batches, dup.first_offset, dup.last_offset) == (0, *last[1:])
            elif kind == "reopen":
                log = reopen(log, clean=op[1])
                check_partition(log)
        check_partition(log)
        log.close()


# ------------------------------------------------------------------ segments deleted beside it


def delete_as_the_sidecar_does(directory: Path, base: int) -> None:
    """Local retention of tiering/copy/local_retention.py: rename ``.deleted``, then unlink."""
    for path in sorted(directory.glob(f"{base:020d}.*")):
        renamed = path.with_name(path.name + ".deleted")
        path.rename(renamed)
        renamed.unlink()


def test_segments_another_process_deleted_are_let_go(tmp_path: Path) -> None:
    log = new_log(tmp_path, **{"segment.bytes": 500, "index.interval.bytes": 100})
    for _ in range(12):
        log.append(batch(3, size=40))
    assert len(log.segments) >= 4
    first = [s.base_offset for s in log.segments]
    for base in first[:2]:
        delete_as_the_sidecar_does(log.directory, base)
    assert held_deleted(tmp_path)  # the writer still holds what the sidecar freed
    assert log.release_removed_segments() == 2
    assert held_deleted(tmp_path) == []
    assert [s.base_offset for s in log.segments] == first[2:]
    assert log.log_start_offset == 0  # the data are remote, not gone: the log start stays
    assert log.release_removed_segments() == 0  # one stat when nothing changed
    end = log.log_end_offset
    log.append(batch(2))
    assert [r.offset for r in iter_records(log, first[2])][-2:] == [end, end + 1]
    remaining = len(log.segments)
    for base in [s.base_offset for s in log.segments]:  # never the active segment
        delete_as_the_sidecar_does(log.directory, base)
    assert log.release_removed_segments() == remaining - 1
    assert len(log.segments) == 1
