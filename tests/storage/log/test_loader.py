"""Opening a partition and recovering it (kafka-format.md §7.2, §9.3): clean reopen without
recovery, torn tails, corrupt batches, missing or damaged indexes, interrupted cleaner/retention
operations (``.deleted``, ``.cleaned``, ``.swap``), producer state from snapshots plus replay, the
transaction index and the leader-epoch checkpoint. Every recovered log is checked whole with
``crash_writer.check_partition`` (kafka-python reads, model replay)."""

from __future__ import annotations

import dataclasses
import os
import shutil
import struct
from pathlib import Path

import pytest
from crash_writer import Model, check_partition, read_partition, read_segment_file

from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.errors import OutOfOrderSequenceError, StorageError
from kafkatier.storage.index.txn_index import AbortedTxn
from kafkatier.storage.log.batch_position import BatchInfo
from kafkatier.storage.log.loader import open_log
from kafkatier.storage.log.log import Log
from kafkatier.storage.log.reader import offset_for_timestamp, read
from kafkatier.storage.log.segment import LogSegment
from kafkatier.storage.producer.snapshot import list_snapshot_files
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record
from kafkatier.storage.verify.paths import verify_paths

NOW = 1_700_000_000_000
A, B = 4000, 5000
CONFIG = LogConfig(segment_bytes=1500, index_interval_bytes=200, segment_index_bytes=4096)


def clock() -> int:
    return NOW + 1000


def batch(n: int, pid: int = -1, seq: int = -1, txn: bool = False, epoch: int = 0) -> bytes:
    recs = [Record(i, NOW + i, b"k%d" % i, b"value-%d" % i * 8) for i in range(n)]
    return build_batch(
        recs, producer_id=pid, producer_epoch=epoch if pid >= 0 else -1, base_sequence=seq,
        transactional=txn,
    )  # fmt: skip


def populate(directory: Path, rounds: int = 12) -> tuple[Log, list[bytes]]:
    """A few segments of idempotent, transactional (aborted and committed) and plain data."""
    log = open_log(directory / "t-0", CONFIG, clock=clock)
    sent, seq_a, seq_b = [], 0, 0
    for i in range(rounds):
        raw = batch(3, A, seq_a)
        log.append(raw)
        sent.append(raw)
        seq_a += 3
        log.append(batch(2, B, seq_b, txn=True))
        seq_b += 2
        log.append(batch(1))
        if i % 3 == 2:
            log.write_txn_marker(B, 0, commit=i % 2 == 0, timestamp=NOW + i)
    return log, sent


def crash(log: Log) -> None:
    """Leave the files as a killed process would: nothing trimmed, no snapshot at the end."""
    for segment in log.segments:
        segment.close_handlers()


def reopen(log: Log, clean: bool, recovery_point: int = 0) -> Log:
    opened = open_log(
        log.directory, CONFIG, clean_shutdown=clean, recovery_point=recovery_point, clock=clock
    )
    knows_its_snapshot_files(opened)
    return opened


def knows_its_snapshot_files(log: Log) -> None:
    """After every open, the producer state's snapshots and the strays it forgot are exactly
    the directory's snapshot files: the open's stray removal trusts what the manager knows
    instead of listing the directory again."""
    state = log.producer_state
    known = [offset for offset, _ in state.snapshot_files()]
    known += [stray.offset for stray in state._strays]  # forgotten, deleted at the close
    assert sorted(known) == [s.offset for s in list_snapshot_files(log.directory)]


def seg_path(log: Log, base: int, suffix: str) -> Path:
    return log.directory / f"{base:020d}{suffix}"


def flip_byte(path: Path, position: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= 0x55
    path.write_bytes(bytes(data))


def test_clean_reopen_trusts_the_files_and_regrows_the_active_indexes(tmp_path: Path) -> None:
    log, _ = populate(tmp_path)
    bases, end, lso = [s.base_offset for s in log.segments], log.log_end_offset, None
    lso = log.last_stable_offset
    log.close()
    active_log = seg_path(log, bases[-1], ".log")
    last_batch = read_partition(log.directory)[-1]
    flip_byte(active_log, last_batch.position + last_batch.size - 1)  # corrupt, unnoticed
    reopened = reopen(log, clean=True)
    assert [s.base_offset for s in reopened.segments] == bases
    assert (reopened.log_end_offset, reopened.last_stable_offset) == (end, lso)
    assert active_log.stat().st_size == reopened.active_segment.size  # nothing recovered
    assert seg_path(log, bases[-1], ".index").stat().st_size == CONFIG.segment_index_bytes
    assert seg_path(log, bases[-1], ".timeindex").stat().st_size == 4092
    reopened.append(batch(1))
    assert len(reopened.segments) == len(bases)  # no roll at once on a trimmed index
    crash(reopened)
    recovered = reopen(log, clean=False)  # now recovery finds the corrupt batch
    assert recovered.log_end_offset == last_batch.base_offset
    check_partition(recovered)


def test_torn_tail_is_truncated_and_indexes_rebuilt(tmp_path: Path) -> None:
    log, _ = populate(tmp_path)
    crash(log)
    stored = read_partition(log.directory)
    last = stored[-1]
    path = seg_path(log, last.segment, ".log")
    with open(path, "r+b") as f:
        f.truncate(last.position + last.size // 2)
    recovered = reopen(log, clean=False)
    assert recovered.log_end_offset == last.base_offset
    assert path.stat().st_size == last.position
    check_partition(recovered)
    assert recovered.append(batch(2)).first_offset == last.base_offset


def test_zero_filled_tail_is_truncated(tmp_path: Path) -> None:
    log, _ = populate(tmp_path, rounds=3)
    crash(log)
    path = seg_path(log, log.segments[-1].base_offset, ".log")
    size = path.stat().st_size
    with open(path, "ab") as f:
        f.write(bytes(4096))  # e.g. preallocated space after a crash
    recovered = reopen(log, clean=False)
    assert path.stat().st_size == size
    check_partition(recovered)


def test_corrupt_batch_mid_log_truncates_there_and_drops_later_segments(tmp_path: Path) -> None:
    log, _ = populate(tmp_path)
    crash(log)
    stored = read_partition(log.directory)
    victim = next(b for b in stored if b.segment == log.segments[1].base_offset and b.position)
    flip_byte(seg_path(log, victim.segment, ".log"), victim.position + 40)  # inside the CRC range
    recovered = reopen(log, clean=False, recovery_point=0)
    assert [s.base_offset for s in recovered.segments] == [0, victim.segment]
    assert recovered.log_end_offset == victim.base_offset
    assert not list(log.directory.glob(f"{log.segments[2].base_offset:020d}.*"))
    check_partition(recovered)


def test_recovery_says_what_it_cut(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A truncation and the later segments it deletes are logged, naming the segment and the
    offset, as Kafka's broker logs them (the commands reported nothing, and ``clean`` then
    counted no record removed)."""
    log, _ = populate(tmp_path)
    crash(log)
    stored = read_partition(log.directory)
    victim = next(b for b in stored if b.segment == log.segments[1].base_offset and b.position)
    flip_byte(seg_path(log, victim.segment, ".log"), victim.position + 40)
    caplog.set_level("WARNING", logger="kafkatier.storage.log.loader")
    reopen(log, clean=False, recovery_point=0)
    [message] = [r.getMessage() for r in caplog.records]
    assert str(seg_path(log, victim.segment, ".log")) in message
    assert f"position {victim.position} (offset {victim.base_offset})" in message
    assert f"later segments deleted, from offset {log.segments[2].base_offset}" in message


@pytest.mark.parametrize("position", [2_000_000_000, -5, "inside a batch"])
def test_a_damaged_last_index_entry_of_a_clean_log_is_recovered(
    tmp_path: Path, position: int | str, caplog: pytest.LogCaptureFixture
) -> None:
    """The active segment's last offset-index entry pointing past the file, before it, or into
    a batch, with the clean-shutdown marker left: the segment is recovered (its index rebuilt)
    and the next append gets the next offset, not the segment's base offset again (which
    reused offsets already in the log)."""
    log, _ = populate(tmp_path)
    while log.active_segment.offset_index.entries < 2:  # entries in the active segment's index
        log.append(batch(2))
    end = log.log_end_offset
    log.close()
    index = seg_path(log, log.segments[-1].base_offset, ".index")
    data = bytearray(index.read_bytes())
    assert len(data) >= 8
    relative, real = struct.unpack(">ii", data[-8:])
    bad = real + 7 if position == "inside a batch" else position
    data[-8:] = struct.pack(">ii", relative, bad)
    index.write_bytes(bytes(data))
    caplog.set_level("WARNING", logger="kafkatier.storage.log.loader")
    reopened = reopen(log, clean=True)
    assert reopened.log_end_offset == end
    assert reopened.append(batch(2)).first_offset == end
    assert any(str(index) in r.getMessage() for r in caplog.records)
    check_partition(reopened)


def test_a_torn_last_batch_of_a_clean_log_without_index_entries_is_recovered(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A cut ``.log`` (its last batch torn) with the clean-shutdown marker left and no
    offset-index entry in the active segment (under ``index.interval.bytes`` of batches): the
    segment was trusted, the next append went after the torn bytes, which no reader gets past
    (an outside tester's ``truncate -s``). It is recovered: the torn batch cut off, the next
    append at its base offset, and the whole log reads back with kafka-python."""
    config = dataclasses.replace(CONFIG, index_interval_bytes=1 << 20)
    log = open_log(tmp_path / "t-0", config, clock=clock)
    for _ in range(3):
        log.append(batch(2))
    assert log.active_segment.offset_index.entries == 0
    log.close()
    path = seg_path(log, 0, ".log")
    last = read_partition(log.directory)[-1]
    with open(path, "r+b") as f:
        f.truncate(last.position + last.size - 5)
    caplog.set_level("WARNING", logger="kafkatier.storage.log.loader")
    reopened = open_log(log.directory, config, clean_shutdown=True, clock=clock)
    assert reopened.log_end_offset == last.base_offset
    assert reopened.append(batch(2)).first_offset == last.base_offset
    assert any("recovering the segment" in r.getMessage() for r in caplog.records)
    check_partition(reopened)
    assert [b.base_offset for b in read_partition(reopened.directory)] == [0, 2, 4]


def test_segments_below_the_recovery_point_are_not_rechecked(tmp_path: Path) -> None:
    log, _ = populate(tmp_path)
    crash(log)
    stored = read_partition(log.directory)
    victim = next(b for b in stored if b.segment == 0 and b.position > 0)
    flip_byte(seg_path(log, 0, ".log"), victim.position + 40)
    active = log.segments[-1].base_offset
    recovered = reopen(log, clean=False, recovery_point=active)
    assert recovered.log_end_offset == stored[-1].last_offset + 1  # Kafka trusts flushed data
    assert recovered.recovery_point == active


def test_missing_offset_index_is_rebuilt_even_after_a_clean_shutdown(tmp_path: Path) -> None:
    log, _ = populate(tmp_path)
    log.close()
    middle = log.segments[1].base_offset
    original = seg_path(log, middle, ".index").read_bytes()
    assert original
    seg_path(log, middle, ".index").unlink()
    reopened = reopen(log, clean=True)
    reopened.close()
    assert seg_path(log, middle, ".index").read_bytes() == original  # same rule, same entries
    check_partition(reopen(log, clean=True))


def test_missing_time_index_is_recreated_empty(tmp_path: Path) -> None:
    log, _ = populate(tmp_path)
    log.close()
    middle = log.segments[1].base_offset
    seg_path(log, middle, ".timeindex").unlink()
    reopened = reopen(log, clean=True)
    assert seg_path(log, middle, ".timeindex").stat().st_size == 0  # not 10 MiB of "entries"
    assert reopened.segments[1].max_timestamp == -1


def test_temporary_files_of_interrupted_operations_are_removed(tmp_path: Path) -> None:
    log, _ = populate(tmp_path)
    log.close()
    d = log.directory
    second = log.segments[1].base_offset
    leftovers = [
        "00000000000000000000.log.deleted",
        "00000000000000000000.index.deleted",
        "00000000000000000003.snapshot.deleted",
        f"{second:020d}.log.cleaned",
        f"{second:020d}.index.cleaned",
        f"{second + 1:020d}.log.swap",  # above the smallest .cleaned: an incomplete split
        "00000000000000999999.index",  # an index without its .log
        "00000000000000999999.timeindex",
    ]
    for name in leftovers:
        (d / name).write_bytes(b"junk")
    before = {p.name: p.read_bytes() for p in d.iterdir() if p.name not in leftovers}
    reopened = reopen(log, clean=True)
    after = {p.name: p.read_bytes() for p in d.iterdir()}
    assert not set(leftovers) & set(after)
    assert set(after) == set(before)
    assert {n: b for n, b in after.items() if not n.endswith("index")} == {
        n: b for n, b in before.items() if not n.endswith("index")
    }
    check_partition(reopened)


def _swap_in(log: Log, replaced: list[LogSegment], index_too: bool) -> bytes:
    """Write, as the cleaner does (§11.4), one ``.swap`` segment holding the batches of
    ``replaced``; returns its bytes."""
    data = b"".join(s.log_path.read_bytes() for s in replaced)
    base = replaced[0].base_offset
    if index_too:
        new = LogSegment(log.directory, base, index_interval_bytes=200, suffix=".cleaned")
        for s in replaced:
            for b in read_segment_file(s.log_path):
                raw = s.log_path.read_bytes()[b.position : b.position + b.size]
                new.append(raw, [BatchInfo(0, b.size, b.last_offset, b.max_timestamp)])
        new.on_become_inactive()
        new.flush()
        new.change_suffix(".swap")
        new.close_handlers()
    else:
        seg_path(log, base, ".log.swap").write_bytes(data)
    return data


@pytest.mark.parametrize("stage", ["swap_written", "old_renamed_deleted", "with_index"])
def test_swap_files_replace_the_segments_they_cover(tmp_path: Path, stage: str) -> None:
    log, _ = populate(tmp_path)
    log.close()
    bases = [s.base_offset for s in log.segments]
    end = log.log_end_offset
    data = _swap_in(log, log.segments[:2], index_too=stage == "with_index")
    if stage == "old_renamed_deleted":  # the crash came after step 3 of the swap protocol
        for suffix in (".log", ".index", ".timeindex", ".txnindex"):
            path = seg_path(log, bases[1], suffix)
            if path.exists():
                path.rename(path.with_name(path.name + ".deleted"))
    reopened = reopen(log, clean=stage != "swap_written")
    assert [s.base_offset for s in reopened.segments] == [bases[0], *bases[2:]]
    assert seg_path(log, bases[0], ".log").read_bytes() == data
    assert not list(log.directory.glob("*.swap")) and not list(log.directory.glob("*.deleted"))
    assert not list(log.directory.glob(f"{bases[1]:020d}.[!s]*"))
    assert bases[1] not in dict(reopened.producer_state.snapshot_files())  # no base now
    assert reopened.log_end_offset == end
    check_partition(reopened)
    reopened.close()  # the stray snapshot's file goes after the close's own
    assert not list(log.directory.glob(f"{bases[1]:020d}.*"))


@pytest.mark.parametrize("snapshots", ["kept", "all_deleted", "latest_corrupt"])
def test_producer_state_is_rebuilt_from_snapshot_and_replay(tmp_path: Path, snapshots: str) -> None:
    log, sent = populate(tmp_path)
    crash(log)
    snaps = sorted(log.directory.glob("*.snapshot"))
    assert len(snaps) >= 2
    if snapshots == "all_deleted":
        for path in snaps:
            path.unlink()
    elif snapshots == "latest_corrupt":
        flip_byte(snaps[-1], 3)  # the CRC no longer matches: ignored, an older one is used
    recovered = reopen(log, clean=False, recovery_point=log.segments[-1].base_offset)
    check_partition(recovered)
    dup = recovered.append(sent[-1])  # the producer's retry is still recognised
    assert dup.num_batches == 0 and dup.duplicate_batches == 1
    with pytest.raises(OutOfOrderSequenceError):
        recovered.append(batch(1, A, 3 * len(sent) + 1))
    assert recovered.append(batch(1, A, 3 * len(sent))).num_batches == 1
    recovered.write_txn_marker(B, 0, commit=False)
    check_partition(recovered)


def test_recovery_snapshots_each_recovered_segment_and_drops_strays(tmp_path: Path) -> None:
    log, _ = populate(tmp_path)
    crash(log)
    for path in log.directory.glob("*.snapshot"):
        path.unlink()
    (log.directory / "00000000000000000001.snapshot").write_bytes(b"stray")
    recovered = reopen(log, clean=False)
    bases = [s.base_offset for s in recovered.segments]
    wanted = [*bases[1:], recovered.log_end_offset]  # Kafka's recoverSegment + the end
    assert [o for o, _ in recovered.producer_state.snapshot_files()] == wanted
    check_partition(recovered)
    recovered.close()  # the stray's file goes after the close's snapshot (delete_stray_files)
    assert sorted(int(p.name[:20]) for p in log.directory.glob("*.snapshot")) == wanted


def test_transaction_index_is_rebuilt_by_recovery(tmp_path: Path) -> None:
    log, _ = populate(tmp_path)
    crash(log)
    indexes = {p.name: p.read_bytes() for p in log.directory.glob("*.txnindex")}
    assert indexes
    for name in indexes:
        (log.directory / name).unlink()
    recovered = reopen(log, clean=False)
    assert {p.name: p.read_bytes() for p in log.directory.glob("*.txnindex")} == indexes
    check_partition(recovered)


def test_insane_transaction_index_triggers_recovery_after_clean_shutdown(tmp_path: Path) -> None:
    log, _ = populate(tmp_path)
    log.close()
    path = next(log.directory.glob("*.txnindex"))
    original = path.read_bytes()
    base = int(path.name[:20])
    assert base > 0
    path.write_bytes(AbortedTxn(B, 0, base - 1, base).pack())  # ends before the segment: insane
    reopened = reopen(log, clean=True)
    assert path.read_bytes() == original
    check_partition(reopened)


def test_leader_epoch_checkpoint_is_cut_back_to_the_log(tmp_path: Path) -> None:
    log, _ = populate(tmp_path, rounds=3)
    crash(log)
    epochs = log.directory / "leader-epoch-checkpoint"
    epochs.write_text(f"0\n2\n0 0\n3 {log.log_end_offset + 5}\n")
    recovered = reopen(log, clean=False)
    assert epochs.read_text() == "0\n1\n0 0\n"
    assert recovered.leader_epoch == 0


def test_an_epoch_cut_at_open_is_written_at_once_and_made_durable_by_the_next_flush(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new partition's checkpoint holds epoch 0 from offset 0 (as Kafka's leader assigns
    it); opened again while still empty, the loader cuts that entry (it starts at the log end)
    and writes the file without fsync, as an epoch's assignment is: the next flush syncs it."""
    directory = tmp_path / "t-0"
    open_log(directory, CONFIG, clock=clock).close()
    epochs = directory / "leader-epoch-checkpoint"
    epochs.write_text("0\n1\n0 0\n")
    synced: list[str] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(os.readlink(f"/proc/self/fd/{fd}"))
                        or real_fsync(fd))  # fmt: skip
    log = open_log(directory, CONFIG, clean_shutdown=True, clock=clock)
    assert epochs.read_text() == "0\n0\n"
    assert str(epochs) not in synced
    assert log.needs_flush
    log.flush()
    assert str(epochs) in synced
    log.close()


def test_empty_directory_starts_at_the_log_start_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-3", CONFIG, log_start_offset=7, clock=clock)
    assert (log.log_start_offset, log.log_end_offset, log.topic, log.partition) == (7, 7, "t", 3)
    assert seg_path(log, 7, ".log").exists()
    assert log.append(batch(2)).first_offset == 7


def test_log_start_offset_inside_the_first_segment(tmp_path: Path) -> None:
    log, _ = populate(tmp_path, rounds=3)
    log.close()
    reopened = open_log(log.directory, CONFIG, clean_shutdown=True, log_start_offset=5, clock=clock)
    assert reopened.log_start_offset == 5
    assert reopened.segments[0].base_offset == 0


def test_directory_name_must_be_topic_dash_partition(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        open_log(tmp_path / "not_a_partition", CONFIG)


def test_reopen_many_times_is_stable(tmp_path: Path) -> None:
    log, _ = populate(tmp_path)
    log.close()
    names = sorted(p.name for p in log.directory.iterdir())
    contents = {n: (log.directory / n).read_bytes() for n in names if not n.endswith("index")}
    for clean in (True, False, True):
        again = reopen(log, clean=clean)
        check_partition(again)
        again.close()
    assert sorted(p.name for p in log.directory.iterdir()) == names
    assert {n: (log.directory / n).read_bytes() for n in contents} == contents


CORPUS = Path(__file__).resolve().parents[3].parent / "shared" / "kafka-corpus"
KAFKA_PARTITIONS = [
    "dipendrasaini__kafka-learnning-series/tmp/kafka-logs/invoice-0",  # 4 segments, big batches
    "asabou__kafka-demo/data/kafka/data/MyKafkaTopic3-12",  # idempotent producers, a snapshot
    "ItumelengMogase__Real-Time-Data-Pipeline-for-Patient-Admissions/kafka-data/"
    "_confluent-ksql-default__command_topic-0",  # a committed transaction
]


@pytest.mark.parametrize("clean", [True, False])
@pytest.mark.parametrize("name", KAFKA_PARTITIONS)
def test_kafka_written_partitions_open_and_recover(tmp_path: Path, name: str, clean: bool) -> None:
    """A copy of a real broker's partition: a clean open trusts Kafka's own indexes (whose
    entries may span multi-batch appends), an unclean one rebuilds them; either way nothing is
    cut, producer state equals a replay, lookups by offset and timestamp find the right data,
    and each closed segment's rebuilt time index ends where Kafka's did (§5)."""
    src = CORPUS / name
    if not src.is_dir():
        pytest.skip(f"Kafka corpus not found at {CORPUS}")
    dst = tmp_path / src.name
    dst.mkdir()
    for f in src.iterdir():
        shutil.copyfile(f, dst / f.name)  # the corpus is read-only; our copy is not
    stored = read_partition(src)
    now = max(b.max_timestamp for b in stored) + 1  # no producer has expired yet
    log = open_log(dst, LogConfig(), clean_shutdown=clean, clock=lambda: now)
    assert log.log_end_offset == stored[-1].last_offset + 1
    assert all((dst / p.name).read_bytes() == p.read_bytes() for p in src.glob("*.log"))
    model = Model()
    for b in stored:
        model.apply(b)
    state = {pid: (e.producer_epoch, e.last_seq, e.last_data_offset, e.last_offset_delta,
                   e.last_timestamp, e.coordinator_epoch,
                   -1 if e.current_txn_first_offset is None else e.current_txn_first_offset)
             for pid, e in log.producer_state.producers.items()}  # fmt: skip
    assert state == {pid: tuple(vars(p).values()) for pid, p in model.producers.items()}
    for seg in log.segments[:-1]:
        kafka_time_index = (src / seg.time_index.path.name).read_bytes()
        if kafka_time_index:
            assert seg.time_index.path.read_bytes()[-12:] == kafka_time_index[-12:]
    for b in stored[:: max(1, len(stored) // 60)]:
        first = read_partition_bytes(read(log, b.last_offset, 1).data)
        assert first == (b.base_offset, b.last_offset)
    records = [(r[0], r[1]) for b in stored for r in b.records]
    stamps = sorted({ts for _, ts in records})
    for target in [*stamps[:: max(1, len(stamps) // 25)], stamps[-1] + 1]:
        expected = next((o for o, ts in records if ts >= target), None)
        assert offset_for_timestamp(log, target) == expected


def read_partition_bytes(data: bytes) -> tuple[int, int]:
    """(base, last offset) of the first batch in fetched bytes."""
    base, length = struct.unpack_from(">qi", data)
    assert len(data) >= 12 + length
    return base, base + struct.unpack_from(">i", data, 23)[0]


@pytest.mark.parametrize("name", ["foo.log", "backup.index", "00000000000000000000-old.log",
                                  "1.timeindex"])  # fmt: skip
def test_a_file_named_like_a_segment_that_is_not_one_is_refused_naming_it(
    tmp_path: Path, name: str
) -> None:
    """Kafka's loader fails on such a file too (it cannot tell which segment it is); the error
    was a bare ``invalid literal for int()`` naming no file. ``verify`` reports it."""
    directory = tmp_path / "t-0"
    log = open_log(directory, LogConfig())
    log.append(build_batch([Record(0, 1_700_000_000_000, b"k", b"v")]))
    log.close()
    (directory / name).write_bytes(b"x")
    with pytest.raises(StorageError, match=f"{name} is not a segment file name") as refused:
        open_log(directory, LogConfig())
    assert refused.value.context["file"] == str(directory / name)
    assert [p.message for p in verify_paths([directory])] == [
        "not a segment file name (<20-digit base offset> and a segment's suffix): Kafka and "
        "kafkatier refuse to load the partition"]
