"""kafkatier.storage.verify.paths: a log dir written by the real writer verifies clean; each
injected
fault is reported alone, naming its file (and position); the Kafka corpus is reported truthfully
(exactly the files its ``_MISSING.txt`` lists)."""

from __future__ import annotations

import dataclasses
import hashlib
import shutil
import struct
from collections.abc import Iterator
from pathlib import Path

import crc32c
import pytest
from cleaner_fixtures import TOPIC as COMPACTED
from cleaner_fixtures import ManualClock, append, compact_config, open_log
from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatch
from verify_fixtures import (
    CORPUS,
    TXN_A,
    corpus_log_dirs,
    snappy_for_kafka_python,
    write_log_dir,
)

from kafkatier.storage.cleaner.compact import compact_log
from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.dump.state import dump_index
from kafkatier.storage.index.txn_index import TransactionIndex
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.producer.snapshot import encode_snapshot, read_snapshot
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record
from kafkatier.storage.verify.files import Kind
from kafkatier.storage.verify.paths import NotKafkaPathError, verify_paths
from kafkatier.storage.verify.problem import Problem, VerifyStats
from kafkatier.storage.wire import segment_file_name


@pytest.fixture(scope="module", autouse=True)
def _kafka_python_snappy() -> Iterator[None]:
    with snappy_for_kafka_python():
        yield


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_log_dir(tmp_path_factory.mktemp("verify") / "logs")


@pytest.fixture
def logs(pristine: Path, tmp_path: Path) -> Path:
    """A fresh copy to damage."""
    return Path(shutil.copytree(pristine, tmp_path / "logs"))


def seg(logs: Path, base: int, suffix: str, partition: int = 0) -> Path:
    return logs / f"events-{partition}" / segment_file_name(base, suffix)


def bases(logs: Path, partition: int = 0) -> list[int]:
    return sorted(int(p.name[:20]) for p in (logs / f"events-{partition}").glob("*.log"))


def batch_positions(log: Path) -> list[tuple[int, DefaultRecordBatch]]:
    """(position, batch) of every batch, read with kafka-python (independent of kafkatier)."""
    data, out, position = log.read_bytes(), [], 0
    while position < len(data):
        (length,) = struct.unpack_from(">i", data, position + 8)
        out.append((position, DefaultRecordBatch(data[position : position + 12 + length])))
        position += 12 + length
    return out


def only(problems: list[Problem]) -> Problem:
    assert len(problems) == 1, "\n".join(map(str, problems))
    return problems[0]


# --------------------------------------------------------------------------------- clean


def test_clean_log_dir_counts_every_batch_and_record(logs: Path) -> None:
    stats = VerifyStats()
    assert verify_paths([logs], stats=stats) == []
    batches = records = 0
    for log in logs.rglob("*.log"):
        memory = MemoryRecords(log.read_bytes())
        while memory.has_next():
            batch = memory.next_batch()
            batches += 1
            records += sum(1 for _ in batch)
    assert (stats.partitions, stats.segments) == (2, len(bases(logs)) + len(bases(logs, 1)))
    assert (stats.batches, stats.records) == (batches, records)
    assert len(bases(logs)) >= 4, "the fixture must give a middle segment to damage"


def test_every_partition_and_file_verifies_alone(logs: Path) -> None:
    for path in sorted(logs.rglob("*")):
        assert verify_paths([path]) == [], path


def test_verify_modifies_nothing(logs: Path) -> None:
    def state() -> dict[str, tuple[str, int]]:
        return {
            str(p): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in logs.rglob("*")
            if p.is_file()
        }

    before = state()
    seg(logs, bases(logs)[-1], ".index").unlink()  # a missing index is not re-created either
    del before[str(seg(logs, bases(logs)[-1], ".index"))]
    verify_paths([logs])
    assert state() == before


def test_unclean_writer_output_with_preallocated_active_indexes(tmp_path: Path) -> None:
    """Flushed but never closed: the active segment keeps its 10 MiB zero-filled indexes."""
    log_dir = LogDirectory(tmp_path / "logs", config_for=lambda _t: LogConfig(segment_bytes=2000))
    log = log_dir.get_or_create("t", 0)
    for i in range(40):
        log.append(build_batch([Record(0, 1000 + i, b"k", b"v" * 30)], producer_id=5,
                               producer_epoch=0, base_sequence=i))  # fmt: skip
    log_dir.flush()
    active = sorted((tmp_path / "logs" / "t-0").glob("*.index"))[-1]
    assert active.stat().st_size == 10 * 1024 * 1024
    assert verify_paths([tmp_path / "logs"]) == []


def test_index_file_alone_without_its_log(logs: Path) -> None:
    log = seg(logs, bases(logs)[1], ".log")
    log.unlink()
    problem = only(verify_paths([log.with_suffix(".index")]))
    assert problem.file == str(log) and "segment data missing" in problem.message


def test_unusable_paths_raise(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        verify_paths([tmp_path / "nope"])
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(NotKafkaPathError):
        verify_paths([tmp_path / "notes.txt"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(NotKafkaPathError):
        verify_paths([tmp_path / "empty"])


# ------------------------------------------------------------------------ faults in .log


def test_flipped_crc_byte(logs: Path) -> None:
    log = seg(logs, bases(logs)[1], ".log")
    position, _ = batch_positions(log)[1]
    data = bytearray(log.read_bytes())
    data[position + 17] ^= 0xFF
    log.write_bytes(data)
    problem = only(verify_paths([logs]))
    assert (problem.file, problem.position) == (str(log), position)
    assert "CRC" in problem.message


@pytest.mark.parametrize("which", ["middle", "active"])
def test_truncated_mid_batch(logs: Path, which: str) -> None:
    base = bases(logs)[1] if which == "middle" else bases(logs)[-1]
    log = seg(logs, base, ".log")
    position, batch = batch_positions(log)[-1]
    with open(log, "r+b") as f:
        f.truncate(position + batch.size_in_bytes // 2)
    problem = only(verify_paths([logs]))
    assert (problem.file, problem.position) == (str(log), position)
    assert "incomplete batch" in problem.message


def test_records_that_do_not_decode(logs: Path) -> None:
    """A batch whose CRC holds but whose record count lies (re-checksummed)."""
    log = seg(logs, bases(logs)[2], ".log")
    position, batch = batch_positions(log)[-1]
    data = bytearray(log.read_bytes())
    struct.pack_into(">i", data, position + 57, batch.records_count + 1)
    end = position + batch.size_in_bytes
    struct.pack_into(">I", data, position + 17, crc32c.crc32c(bytes(data[position + 21 : end])))
    log.write_bytes(data)
    problem = only(verify_paths([logs]))
    assert (problem.file, problem.position) == (str(log), position)
    assert "do not decode" in problem.message


def test_offsets_going_backwards(logs: Path) -> None:
    """baseOffset is outside the CRC: rewrite a segment's first batch to reuse old offsets."""
    base = bases(logs)[2]
    log = seg(logs, base, ".log")
    data = bytearray(log.read_bytes())
    struct.pack_into(">q", data, 0, base - 5)
    log.write_bytes(data)
    problems = [p for p in verify_paths([logs]) if p.file == str(log) and p.position == 0]
    messages = " | ".join(p.message for p in problems)
    assert "offsets go backwards" in messages and "below the segment's base offset" in messages


def test_batch_that_breaks_producer_state(logs: Path) -> None:
    """A's second transactional batch, re-checksummed without its transactional bit: Kafka
    rejects a plain batch while the producer's transaction is open."""
    found = [
        (log, position, batch)
        for log in sorted((logs / "events-0").glob("*.log"))
        for position, batch in batch_positions(log)
        if batch.producer_id == TXN_A and not batch.is_control_batch
    ]
    log, position, batch = found[1]
    data = bytearray(log.read_bytes())
    (attributes,) = struct.unpack_from(">h", data, position + 21)
    struct.pack_into(">h", data, position + 21, attributes & ~0x10)
    end = position + batch.size_in_bytes
    struct.pack_into(">I", data, position + 17, crc32c.crc32c(bytes(data[position + 21 : end])))
    log.write_bytes(data)
    problem = only(verify_paths([logs]))
    assert (problem.file, problem.position) == (str(log), position)
    assert "transaction is open" in problem.message


def test_deleted_middle_log(logs: Path) -> None:
    log = seg(logs, bases(logs)[1], ".log")
    log.unlink()
    problem = only(verify_paths([logs]))
    assert problem.file == str(log) and problem.position is None
    assert "segment data missing" in problem.message


def test_deleted_middle_segment_with_all_its_index_files(logs: Path) -> None:
    """Only the producer snapshot at its base is left to show the segment existed."""
    base = bases(logs)[1]
    for suffix in (".log", ".index", ".timeindex", ".txnindex"):
        seg(logs, base, suffix).unlink(missing_ok=True)
    problem = only(verify_paths([logs]))
    assert problem.file == str(seg(logs, base, ".log"))
    assert "segment missing" in problem.message


# --------------------------------------------------------------------- faults in indexes


@pytest.mark.parametrize("field", ["position", "offset"])
def test_corrupt_offset_index_entry(logs: Path, field: str) -> None:
    index = seg(logs, bases(logs)[0], ".index")
    data = bytearray(index.read_bytes())
    relative, position = struct.unpack_from(">ii", data, 8)
    if field == "position":
        position += 1
    else:
        relative -= 1
    struct.pack_into(">ii", data, 8, relative, position)
    index.write_bytes(data)
    problem = only(verify_paths([logs]))
    assert (problem.file, problem.position) == (str(index), 8)


@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
@pytest.mark.parametrize("which", [0, -1])
def test_deleted_index_file(logs: Path, suffix: str, which: int) -> None:
    index = seg(logs, bases(logs)[which], suffix)
    index.unlink()
    problem = only(verify_paths([logs]))
    assert problem.file == str(index) and "missing" in problem.message


def test_untrimmed_index_of_a_rolled_segment(logs: Path) -> None:
    index = seg(logs, bases(logs)[0], ".index")
    size = index.stat().st_size
    with open(index, "ab") as f:
        f.write(bytes(8 * 100))
    problem = only(verify_paths([logs]))
    assert (problem.file, problem.position) == (str(index), size)
    assert "zero-filled" in problem.message


def test_preallocated_index_of_the_active_segment_is_fine(logs: Path) -> None:
    for suffix, entry in ((".index", 8), (".timeindex", 12)):
        with open(seg(logs, bases(logs)[-1], suffix), "ab") as f:
            f.write(bytes(entry * 1000))
    assert verify_paths([logs]) == []


def test_time_index_missing_its_final_entry(logs: Path) -> None:
    index = seg(logs, bases(logs)[1], ".timeindex")
    with open(index, "r+b") as f:
        f.truncate(index.stat().st_size - 12)
    problem = only(verify_paths([logs]))
    assert problem.file == str(index) and "largest timestamp" in problem.message


def test_time_index_entry_with_a_wrong_timestamp(logs: Path) -> None:
    index = seg(logs, bases(logs)[0], ".timeindex")
    data = bytearray(index.read_bytes())
    (timestamp,) = struct.unpack_from(">q", data, 0)
    struct.pack_into(">q", data, 0, timestamp - 1)
    index.write_bytes(data)
    problem = only(verify_paths([logs]))
    assert (problem.file, problem.position) == (str(index), 0)


def test_wrong_txn_index_entry(logs: Path) -> None:
    [index] = (logs / "events-0").glob("*.txnindex")
    data = bytearray(index.read_bytes())
    (lso,) = struct.unpack_from(">q", data, 26)
    struct.pack_into(">q", data, 26, lso + 1)
    index.write_bytes(data)
    problem = only(verify_paths([logs]))
    assert (problem.file, problem.position) == (str(index), 0)
    assert f"producer {TXN_A}" in problem.message and "differs" in problem.message


def test_missing_txn_index(logs: Path) -> None:
    [index] = (logs / "events-0").glob("*.txnindex")
    index.unlink()
    problem = only(verify_paths([logs]))
    assert problem.file == str(index) and "missing" in problem.message


def test_txn_index_entry_in_the_wrong_segment(logs: Path) -> None:
    [index] = (logs / "events-0").glob("*.txnindex")
    other = seg(logs, bases(logs)[-1], ".txnindex")
    shutil.move(index, other)
    problems = verify_paths([logs])
    assert {p.file for p in problems} == {str(index), str(other)}, problems


# --------------------------------------------------------------------- snapshots, checkpoints


def test_corrupt_snapshot_bytes(logs: Path) -> None:
    snapshot = sorted((logs / "events-0").glob("*.snapshot"))[0]
    data = bytearray(snapshot.read_bytes())
    data[20] ^= 0x01
    snapshot.write_bytes(data)
    problem = only(verify_paths([logs]))
    assert (problem.file, problem.position) == (str(snapshot), 2)
    assert "CRC" in problem.message


def test_snapshot_that_disagrees_with_the_log(logs: Path) -> None:
    """A well-formed snapshot (valid CRC) whose state the log does not give."""
    snapshot = sorted((logs / "events-0").glob("*.snapshot"))[1]
    entries = read_snapshot(snapshot)
    i = next(i for i, e in enumerate(entries) if e.producer_id == TXN_A)
    entries[i] = type(entries[i])(**{**vars(entries[i]), "last_sequence": 77})
    snapshot.write_bytes(encode_snapshot(entries))
    problem = only(verify_paths([logs]))
    assert (problem.file, problem.position) == (str(snapshot), 10 + 46 * i)
    assert "last_sequence 77" in problem.message


def test_snapshot_beyond_the_log_end(logs: Path) -> None:
    last = sorted((logs / "events-0").glob("*.snapshot"))[-1]
    beyond = last.with_name(segment_file_name(int(last.name[:20]) + 100, ".snapshot"))
    shutil.copy(last, beyond)
    problem = only(verify_paths([logs]))
    assert problem.file == str(beyond) and "beyond the log end" in problem.message


@pytest.mark.parametrize(
    ("line", "expected"),
    [("events 1 x", "line 4: malformed"), ("events 1 99999", "outside the partition's log")],
)
def test_bad_checkpoint_line(logs: Path, line: str, expected: str) -> None:
    checkpoint = logs / "recovery-point-offset-checkpoint"
    lines = checkpoint.read_text().splitlines()
    lines[3] = line
    checkpoint.write_text("\n".join(lines) + "\n")
    problem = only(verify_paths([logs]))
    assert problem.file == str(checkpoint) and expected in problem.message


def test_leader_epoch_checkpoint_that_disagrees(logs: Path) -> None:
    checkpoint = logs / "events-1" / "leader-epoch-checkpoint"
    checkpoint.write_text("0\n1\n3 0\n")
    problem = only(verify_paths([logs]))
    assert problem.file == str(checkpoint) and "leader epoch 0" in problem.message


def test_leader_epoch_checkpoint_out_of_order(logs: Path) -> None:
    checkpoint = logs / "events-1" / "leader-epoch-checkpoint"
    checkpoint.write_text("0\n2\n0 0\n0 5\n")
    problem = only(verify_paths([logs]))
    assert problem.file == str(checkpoint) and "line 4" in problem.message


def test_garbled_metadata_files(logs: Path) -> None:
    (logs / "events-1" / "partition.metadata").write_text("version: 0\ntopic_id: ???")
    (logs / "meta.properties").unlink()
    problems = verify_paths([logs])
    assert sorted(p.file for p in problems) == sorted(
        [str(logs / "events-1" / "partition.metadata"), str(logs / "meta.properties")]
    )


def test_leftover_of_an_interrupted_operation_is_a_warning(logs: Path) -> None:
    log = seg(logs, bases(logs)[0], ".log")
    shutil.copy(log, log.with_name(log.name + ".deleted"))
    problem = only(verify_paths([logs]))
    assert problem.severity == "warning"


# --------------------------------------------------------------------------------- corpus


def _missing(log_dir: Path) -> set[str]:
    """The files ``_MISSING.txt`` lists inside this log dir."""
    root = CORPUS / log_dir.relative_to(CORPUS).parts[0]
    listed = [line.split("\t")[0] for line in (root / "_MISSING.txt").read_text().splitlines()]
    return {str(root / name) for name in listed if name and (root / name).is_relative_to(log_dir)}


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"Kafka corpus not found at {CORPUS}")
@pytest.mark.parametrize("log_dir", corpus_log_dirs(), ids=lambda p: p.relative_to(CORPUS).parts[0])
def test_corpus_problems_are_exactly_the_missing_files(log_dir: Path) -> None:
    stats = VerifyStats()
    problems = verify_paths([log_dir], stats=stats)
    assert {p.file for p in problems} == _missing(log_dir)
    assert all(p.severity == "error" and "missing" in p.message for p in problems)
    assert len(problems) == len({p.file for p in problems})
    assert stats.batches > 0


# ------------------------------------------------------------------------ compacted logs


def _compacted_log_dir(path: Path) -> Path:
    """Three segments, the first two compacted by Kafka's rules (kafka-format.md §11.3): the
    first value of key q (idempotent producer 5) and producer 7's aborted batch are gone, so the
    snapshot at 7 and the copied ABORT entry of segment 0 name batches that no longer exist;
    producer 8's aborted batch, its last, is kept empty. Producer 6 writes the active segment."""
    clock = ManualClock()
    log_dir, log = open_log(path, compact_config(segment_bytes=600), clock)
    t = clock.now
    append(log, [(b"q", b"v1")], timestamp=t, producer=(5, 0, 0))
    append(log, [(b"p7", b"a")], timestamp=t, producer=(7, 0, 0), transactional=True)
    log.write_txn_marker(7, 0, commit=False)
    append(log, [(b"p8", b"a")], timestamp=t, producer=(8, 0, 0), transactional=True)
    for i in range(3):
        append(log, [(b"plain%d" % i, b"x")], timestamp=t)
    log.roll()
    append(log, [(b"q", b"v2")], timestamp=t + 1, producer=(5, 0, 1))
    append(log, [(b"p7", b"c")], timestamp=t + 1, producer=(7, 0, 1), transactional=True)
    log.write_txn_marker(7, 0, commit=True)
    log.write_txn_marker(8, 0, commit=False)
    append(log, [(b"plain0", b"y")], timestamp=t + 1)
    append(log, [(b"q", b"v3")], timestamp=t + 2, producer=(5, 0, 2))
    append(log, [(b"plain1", b"z")], timestamp=t + 2)
    log.roll()
    append(log, [(b"active", b"a")], timestamp=t + 3, producer=(6, 0, 0))
    result = compact_log(log, now_ms=clock.now, first_dirty_offset=None)
    assert result.cleaned and result.end_offset == 14
    log_dir.cleaner_offsets[(COMPACTED, 0)] = result.end_offset
    log_dir.close()
    return path


@pytest.fixture(scope="module")
def compacted_pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _compacted_log_dir(tmp_path_factory.mktemp("compacted") / "logs")


@pytest.fixture
def compacted(compacted_pristine: Path, tmp_path: Path) -> Path:
    """A fresh copy of the compacted log dir to damage; returns its partition dir."""
    return Path(shutil.copytree(compacted_pristine, tmp_path / "logs")) / f"{COMPACTED}-0"


def _offsets_held(partition: Path) -> set[int]:
    """Every offset some batch still spans, read with kafka-python."""
    held: set[int] = set()
    for log in partition.glob("*.log"):
        for _, batch in batch_positions(log):
            held.update(range(batch.base_offset, batch.base_offset + batch.last_offset_delta + 1))
    return held


def _rewrite_snapshot(path: Path, producer: int, **changes: int) -> int:
    """Change one producer's entry (valid CRC); returns the entry's byte position."""
    entries = read_snapshot(path)
    i = next(i for i, e in enumerate(entries) if e.producer_id == producer)
    entries[i] = dataclasses.replace(entries[i], **changes)
    path.write_bytes(encode_snapshot(entries))
    return 10 + 46 * i


def _rewrite_txn_entry(path: Path, field: str, value: int) -> None:
    data = bytearray(path.read_bytes())
    struct.pack_into(">q", data, {"producer": 2, "first": 10, "last": 18}[field], value)
    path.write_bytes(data)


def test_compacted_log_verifies_clean(compacted: Path) -> None:
    held = _offsets_held(compacted)
    stale = {e.producer_id: e for e in read_snapshot(compacted / segment_file_name(7, ".snapshot"))}
    assert stale[5].last_offset == 0 and 0 not in held  # the snapshot names a removed batch
    [copied] = TransactionIndex(compacted / segment_file_name(0, ".txnindex"), 0).all_entries()
    assert copied.first_offset == 1 and 1 not in held  # the ABORT entry was copied as it was
    assert verify_paths([compacted.parent]) == []
    (compacted.parent / "cleaner-offset-checkpoint").unlink()  # the batches alone show cleaning
    assert verify_paths([compacted.parent]) == []
    assert verify_paths([compacted]) == []


@pytest.mark.parametrize(
    ("producer", "changes", "expected"),
    [
        (5, {"last_offset": 6}, "holds that offset in a batch of no producer"),
        (5, {"last_offset": 3}, "holds that offset in a batch of producer 8"),
        (5, {"last_offset": 7}, "not below the snapshot's offset 7"),
        (7, {"producer_epoch": 3}, "above the epoch 0"),
        (8, {"current_txn_first_offset": 2}, "holds that offset in an ABORT marker of producer 7"),
        (8, {"current_txn_first_offset": -1}, "open from 3"),
    ],
)
def test_wrong_snapshot_entry_in_the_compacted_section(
    compacted: Path, producer: int, changes: dict[str, int], expected: str
) -> None:
    snapshot = compacted / segment_file_name(7, ".snapshot")
    position = _rewrite_snapshot(snapshot, producer, **changes)
    problem = only(verify_paths([compacted.parent]))
    assert (problem.file, problem.position) == (str(snapshot), position)
    assert f"producer {producer}:" in problem.message and expected in problem.message


def test_corrupt_snapshot_in_the_compacted_section(compacted: Path) -> None:
    snapshot = compacted / segment_file_name(7, ".snapshot")
    data = bytearray(snapshot.read_bytes())
    data[20] ^= 0x01
    snapshot.write_bytes(data)
    problem = only(verify_paths([compacted.parent]))
    assert (problem.file, problem.position) == (str(snapshot), 2) and "CRC" in problem.message


def test_snapshot_above_the_compacted_section_is_compared_exactly(compacted: Path) -> None:
    snapshot = compacted / segment_file_name(15, ".snapshot")
    position = _rewrite_snapshot(snapshot, 6, last_sequence=9)
    problem = only(verify_paths([compacted.parent]))
    assert (problem.file, problem.position) == (str(snapshot), position)
    assert "last_sequence 9 (the log says 0)" in problem.message


@pytest.mark.parametrize(
    ("base", "field", "value", "expected"),
    [
        (0, "producer", 9, "holds an ABORT marker of producer 7"),
        (0, "last", 6, "holds a batch of no producer"),
        (7, "first", 4, "not consistent with the replay"),
    ],
)
def test_wrong_txn_index_entry_in_the_compacted_section(
    compacted: Path, base: int, field: str, value: int, expected: str
) -> None:
    index = compacted / segment_file_name(base, ".txnindex")
    _rewrite_txn_entry(index, field, value)
    problem = only(verify_paths([compacted.parent]))
    assert (problem.file, problem.position) == (str(index), 0)
    assert expected in problem.message


def test_missing_txn_index_in_the_compacted_section(compacted: Path) -> None:
    """Producer 8's aborted batch is kept (emptied), so its ABORT entry must be too."""
    index = compacted / segment_file_name(7, ".txnindex")
    index.unlink()
    problem = only(verify_paths([compacted.parent]))
    assert problem.file == str(index) and "producer 8" in problem.message
    assert "is missing" in problem.message


def test_txn_index_entry_moved_to_an_earlier_compacted_segment(compacted: Path) -> None:
    first, second = (compacted / segment_file_name(b, ".txnindex") for b in (0, 7))
    first.write_bytes(first.read_bytes() + second.read_bytes())
    second.unlink()
    problems = verify_paths([compacted.parent])
    assert sorted(p.file for p in problems) == [str(first), str(second)], problems
    assert any("beyond this segment" in p.message for p in problems)


def test_untouched_abort_entry_whose_lso_names_a_compacted_batch(tmp_path: Path) -> None:
    """Producer 2 aborts in the active (never cleaned) segment while producer 1's transaction,
    begun in the cleaned segment, is open: the entry's LSO is that transaction's first offset,
    whose batch compaction then removed (its key recurs). Only the LSO may trail the replay."""
    clock = ManualClock()
    log_dir, log = open_log(tmp_path, compact_config(), clock)
    append(log, [(b"k", b"1")], timestamp=clock.now, producer=(1, 0, 0), transactional=True)
    append(log, [(b"k", b"2")], timestamp=clock.now, producer=(1, 0, 1), transactional=True)
    log.roll()
    append(log, [(b"b", b"x")], timestamp=clock.now, producer=(2, 0, 0), transactional=True)
    log.write_txn_marker(2, 0, commit=False)
    log.write_txn_marker(1, 0, commit=True)
    assert compact_log(log, now_ms=clock.now, first_dirty_offset=None).end_offset == 2
    log_dir.close()
    partition = tmp_path / f"{COMPACTED}-0"
    [entry] = TransactionIndex(partition / segment_file_name(2, ".txnindex"), 2).all_entries()
    assert (entry.first_offset, entry.last_stable_offset) == (2, 0)
    assert 0 not in _offsets_held(partition)
    assert verify_paths([tmp_path]) == []
    index = partition / segment_file_name(2, ".txnindex")
    _rewrite_txn_entry(index, "first", 3)  # its own transaction is untouched: compared exactly
    problem = only(verify_paths([tmp_path]))
    assert (problem.file, problem.position) == (str(index), 0)
    assert "(producer 2, first 3," in problem.message and "first 2" in problem.message


def test_compacted_log_whose_epoch_bump_survives_only_in_an_emptied_marker(
    tmp_path: Path,
) -> None:
    """The coordinator aborts producer 2's second transaction with a bumped epoch; cleaning
    drops the aborted data and later empties the marker (§1.8), which the replay ignores (§7.4),
    so the replay's state keeps epoch 0 while the snapshot says 1: still a log Kafka writes."""
    clock = ManualClock()
    log_dir, log = open_log(tmp_path, compact_config(delete_retention_ms=0), clock)
    append(log, [(b"keep", b"1")], timestamp=clock.now, producer=(2, 0, 0), transactional=True)
    log.write_txn_marker(2, 0, commit=True)
    append(log, [(b"k", b"1")], timestamp=clock.now, producer=(2, 0, 1), transactional=True)
    log.write_txn_marker(2, 1, commit=False)
    log.roll()
    checkpoint = None
    for i in range(3):
        append(log, [(b"x%d" % i, b"y")], timestamp=clock.now)
        log.roll()
        checkpoint = compact_log(log, now_ms=clock.now, first_dirty_offset=checkpoint).end_offset
        clock.now += 10
    log_dir.close()
    partition = tmp_path / f"{COMPACTED}-0"
    [snapshot] = partition.glob("*.snapshot")
    assert [e.producer_epoch for e in read_snapshot(snapshot)] == [1]
    epochs = {
        (batch.producer_epoch, batch.records_count)
        for log_file in partition.glob("*.log")
        for _, batch in batch_positions(log_file)
        if batch.producer_id == 2
    }
    assert epochs == {(0, 1), (1, 0)}  # epoch 1 only in the emptied ABORT marker
    assert verify_paths([tmp_path]) == []


def test_compacted_log_whose_first_segment_was_emptied(tmp_path: Path) -> None:
    """An aborted transaction across a roll, and a cleaner that reached only the first segment
    (remote compaction of the segments uploaded so far): it dropped the aborted data there,
    emptying the segment, while the snapshot at the roll still names the producer's open
    transaction. No cleaner-offset-checkpoint (a restored copy has none): the emptied segment
    itself shows the cleaner's work. Found by the fault soak (bench/soak.py)."""
    clock = ManualClock()
    log_dir, log = open_log(tmp_path, compact_config(), clock)
    for i in range(3):
        append(log, [(b"k%d" % i, b"v")], timestamp=clock.now, producer=(2, 0, i),
               transactional=True)  # fmt: skip
    log.roll()
    append(log, [(b"k9", b"v")], timestamp=clock.now, producer=(2, 0, 3), transactional=True)
    log.write_txn_marker(2, 0, commit=False)
    append(log, [(b"after", b"v")], timestamp=clock.now)
    log_dir.close()
    partition = tmp_path / f"{COMPACTED}-0"
    [entry] = read_snapshot(partition / segment_file_name(3, ".snapshot"))
    assert entry.current_txn_first_offset == 0
    assert verify_paths([tmp_path]) == []
    for suffix in (".log", ".index", ".timeindex"):  # what the cleaner left of segment 0
        (partition / segment_file_name(0, suffix)).write_bytes(b"")
    assert verify_paths([tmp_path]) == []
    assert verify_paths([partition]) == []


def test_local_log_whose_start_lost_its_snapshot_to_local_retention(tmp_path: Path) -> None:
    """A transaction begun in a segment local retention deleted, and no snapshot at the new
    local start (a recovery dropped it; Kafka keeps none there either): the later snapshot's
    transaction start and coordinator epoch lie below what a replay can see, and are Kafka's
    (found by the fault soak). A start inside the visible log must still match."""
    clock = ManualClock()
    log_dir, log = open_log(tmp_path, LogConfig.from_properties({}, source="test"), clock)
    append(log, [(b"a", b"v")], timestamp=clock.now, producer=(2, 0, 0), transactional=True)
    log.roll()
    for i in (1, 2):
        append(log, [(b"b", b"v")], timestamp=clock.now, producer=(2, 0, i), transactional=True)
    log.roll()
    log.write_txn_marker(2, 0, commit=True)
    append(log, [(b"c", b"v")], timestamp=clock.now)
    log_dir.close()
    partition = tmp_path / f"{COMPACTED}-0"
    snapshot = partition / segment_file_name(3, ".snapshot")
    [entry] = read_snapshot(snapshot)
    assert (entry.current_txn_first_offset, entry.last_offset) == (0, 2)
    for suffix in (".log", ".index", ".timeindex"):  # local retention
        (partition / segment_file_name(0, suffix)).unlink()
    (partition / segment_file_name(1, ".snapshot")).unlink()  # and no snapshot at the start
    assert verify_paths([tmp_path]) == []
    _rewrite_snapshot(snapshot, 2, current_txn_first_offset=2)  # inside the log: must be 1
    problem = only(verify_paths([tmp_path]))
    assert problem.file == str(snapshot) and "current_txn_first_offset 2" in problem.message


def test_a_data_batch_marked_control_is_reported(tmp_path: Path) -> None:
    """The control bit set on a data batch and the CRC computed again: its records' keys are
    no control keys, which ``dump`` and a consumer refuse to read; verify reports the batch
    (it passed)."""
    logs = tmp_path / "logs"
    with LogDirectory(logs) as log_dir:
        log = log_dir.get_or_create("events", 0)
        log.append(build_batch([Record(0, 1_700_000_000_000, None, b"v" * 20)]))
        log.append(build_batch([Record(1, 1_700_000_000_000, b"ab", b"w")]))
        log.roll()
    path = seg(logs, 0, ".log")
    data = bytearray(path.read_bytes())
    for position, batch in batch_positions(path):
        attributes = struct.unpack_from(">h", data, position + 21)[0]
        struct.pack_into(">h", data, position + 21, attributes | 0x20)  # isControl
        end = position + batch.size_in_bytes
        struct.pack_into(">I", data, position + 17,
                         crc32c.crc32c(bytes(data[position + 21 : end])))  # fmt: skip
    path.write_bytes(data)
    problems = [p for p in verify_paths([logs]) if p.file == str(path)]
    assert [p.position for p in problems if "control record key" in p.message] == [
        position for position, _ in batch_positions(path)
    ]


def test_a_record_at_the_epoch_gives_a_time_index_entry_of_zeros_that_verifies(
    tmp_path: Path,
) -> None:
    """A rolled segment whose largest timestamp is 0, at its first offset: Kafka's time index
    appends (0, 0), twelve zero bytes, which verify took for an untrimmed unused slot (and
    then for no entry at all) and dump for unused space."""
    with LogDirectory(tmp_path) as logs:
        log = logs.get_or_create("t", 0)
        log.append(build_batch([Record(0, 0, b"k", b"at the epoch")]))
        log.roll()
        log.append(build_batch([Record(0, 1_700_000_000_000, b"k", b"later")]))
    index = tmp_path / "t-0" / segment_file_name(0, ".timeindex")
    assert index.read_bytes() == b"\0" * 12
    assert verify_paths([tmp_path]) == []
    entries = list(dump_index(index, Kind.TIME_INDEX, 0))
    assert [(e.get("timestamp"), e.get("offset")) for e in entries] == [(0, 0)], entries
