"""Retention and DeleteRecords (kafka-format.md §10): which segments go, in which order, what
happens to their files, producer snapshots, the leader-epoch cache and the checkpoints."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch

from kafkatier.storage.cleaner.retention import delete_old_segments, delete_records
from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.errors import OffsetOutOfRangeError
from kafkatier.storage.log import reader as log_reader
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.log import Log
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record
from kafkatier.storage.verify.paths import verify_paths

T0 = 1_700_000_000_000
TOPIC = "ret"
TP = (TOPIC, 0)


class ManualClock:
    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def open_dir(path: Path, clock: ManualClock, **settings: object) -> LogDirectory:
    base: dict[str, object] = {"segment_index_bytes": 4096, "retention_ms": -1}
    config = LogConfig(**{**base, **settings})  # type: ignore[arg-type]
    return LogDirectory(path, config_for=lambda _topic: config, clock=clock)


def append(log: Log, timestamp: int, count: int = 3, *, pid: int = -1) -> None:
    """One batch of ``count`` records; with ``pid`` an idempotent producer's next batch."""
    records = [Record(i, timestamp, b"k%d" % i, b"v" * 40) for i in range(count)]
    seq = -1
    if pid >= 0:
        entry = log.producer_state.last_entry(pid)
        seq = 0 if entry is None else entry.last_seq + 1
    log.append(build_batch(records, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                           base_sequence=seq))  # fmt: skip


def segmented(log: Log, timestamps: list[int], *, pid: int = -1) -> None:
    """One batch per segment, the last one left active."""
    for i, ts in enumerate(timestamps):
        append(log, ts, pid=pid)
        if i < len(timestamps) - 1:
            log.roll()


def bases(log: Log) -> list[int]:
    return [s.base_offset for s in log.segments]


def files(directory: Path, suffix: str) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(suffix))


def offsets_on_disk(directory: Path) -> list[int]:
    """Record offsets in the live ``.log`` files, read with kafka-python."""
    out = []
    for path in sorted(directory.glob("*.log")):
        data, pos = path.read_bytes(), 0
        while pos < len(data):
            size = 12 + int.from_bytes(data[pos + 8 : pos + 12], "big")
            out += [r.offset for r in DefaultRecordBatch(bytearray(data[pos : pos + size]))]
            pos += size
    return out


def errors(path: Path) -> list[str]:
    return [str(p) for p in verify_paths([path]) if p.severity == "error"]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def log_dir(tmp_path: Path, clock: ManualClock) -> Iterator[LogDirectory]:
    d = open_dir(tmp_path, clock, retention_ms=1500, file_delete_delay_ms=60_000)
    yield d
    if d.logs:
        d.close()


# ------------------------------------------------------------------------------------- time


def test_time_retention_deletes_the_expired_oldest_segments(
    log_dir: LogDirectory, clock: ManualClock
) -> None:
    log = log_dir.get_or_create(*TP)
    segmented(log, [T0, T0 + 1000, T0 + 2000, T0 + 3000])
    clock.now = T0 + 3000
    result = delete_old_segments(log)
    # now - largest > 1500: T0 (3000) and T0+1000 (2000) go; T0+2000 (1000) stays
    assert (result.segments_deleted, result.records_deleted) == (2, 6)
    assert result.reasons == ["retention.ms"]
    assert bases(log) == [6, 9] and log.log_start_offset == 6 == result.log_start_offset
    assert files(log.directory, ".log.deleted") == ["00000000000000000000.log.deleted",
                                                    "00000000000000000003.log.deleted"]  # fmt: skip
    assert offsets_on_disk(log.directory) == list(range(6, 12))
    assert [r.offset for r in log_reader.iter_records(log)] == list(range(6, 12))
    with pytest.raises(OffsetOutOfRangeError):
        log_reader.read(log, 5)
    assert errors(log_dir.path) == []


def test_time_walk_stops_at_the_first_segment_that_is_not_expired(
    log_dir: LogDirectory, clock: ManualClock
) -> None:
    log = log_dir.get_or_create(*TP)
    segmented(log, [T0, T0 + 5000, T0, T0 + 5000])
    clock.now = T0 + 5000
    assert delete_old_segments(log).segments_deleted == 1
    assert bases(log) == [3, 6, 9]


def test_time_is_judged_by_the_largest_record_timestamp_not_mtime(
    log_dir: LogDirectory, clock: ManualClock
) -> None:
    log = log_dir.get_or_create(*TP)
    segmented(log, [T0 + 10_000, T0 + 10_000])
    old = (T0 - 10**9) / 1000
    for segment in log.segments:
        os.utime(segment.log_path, (old, old))
    clock.now = T0 + 10_000
    assert delete_old_segments(log).segments_deleted == 0
    # After a clean reopen the largest timestamp comes from the time index's last entry.
    log_dir.close()
    reopened = open_dir(log_dir.path, clock, retention_ms=1500)
    log = reopened.logs[TP]
    assert log.segments[0].largest_timestamp == T0 + 10_000
    clock.now = T0 + 11_501
    assert delete_old_segments(log).segments_deleted == 2
    assert bases(log) == [6] and log.segments[0].size == 0
    reopened.close()


def test_no_timestamps_falls_back_to_the_file_mtime(tmp_path: Path, clock: ManualClock) -> None:
    d = open_dir(tmp_path, clock, retention_ms=1500)
    log = d.get_or_create(*TP)
    segmented(log, [-1, -1, -1])
    assert log.segments[0].max_timestamp == -1
    old = (T0 - 2000) / 1000
    os.utime(log.segments[0].log_path, (old, old))
    os.utime(log.segments[1].log_path, ((T0 - 1000) / 1000,) * 2)
    assert delete_old_segments(log, now_ms=T0).segments_deleted == 1  # 2000 > 1500 > 1000
    assert bases(log) == [3, 6]
    d.close()


def test_retention_ms_minus_one_keeps_everything(tmp_path: Path, clock: ManualClock) -> None:
    d = open_dir(tmp_path, clock, retention_ms=-1)
    log = d.get_or_create(*TP)
    segmented(log, [0, 0, 0])
    assert delete_old_segments(log, now_ms=T0).segments_deleted == 0
    d.close()


# ------------------------------------------------------------------------------------- size


def test_size_retention_deletes_whole_oldest_segments(tmp_path: Path, clock: ManualClock) -> None:
    d = open_dir(tmp_path, clock)
    log = d.get_or_create(*TP)
    segmented(log, [T0] * 5)
    sizes = [s.size for s in log.segments]
    assert len(set(sizes)) == 1
    size = sizes[0]
    # 2 segments over the limit, minus one byte: only one whole segment fits in the excess
    log.config = LogConfig(retention_bytes=sum(sizes) - 2 * size + 1, retention_ms=-1)
    result = delete_old_segments(log)
    assert (result.segments_deleted, result.bytes_deleted, result.reasons) == (
        1, size, ["retention.bytes"])  # fmt: skip
    assert log.size_in_bytes == 4 * size
    log.config = LogConfig(retention_bytes=2 * size, retention_ms=-1)
    assert delete_old_segments(log).segments_deleted == 2
    assert bases(log) == [9, 12] and log.log_start_offset == 9
    log.config = LogConfig(retention_bytes=2 * size + 1, retention_ms=-1)  # under the limit
    assert delete_old_segments(log).segments_deleted == 0
    assert errors(tmp_path) == []
    d.close()


def test_size_before_time(tmp_path: Path, clock: ManualClock) -> None:
    d = open_dir(tmp_path, clock)
    log = d.get_or_create(*TP)
    segmented(log, [T0, T0, T0 + 100_000, T0 + 100_000])
    size = log.segments[0].size
    log.config = LogConfig(retention_bytes=3 * size, retention_ms=50_000)
    result = delete_old_segments(log, now_ms=T0 + 100_000)
    assert result.reasons == ["retention.bytes", "retention.ms"]
    assert result.segments_deleted == 2
    d.close()


@settings(max_examples=25, deadline=None)
@given(
    timestamps=st.lists(st.integers(0, 10), min_size=1, max_size=6),
    retention_ms=st.integers(-1, 12),
    retention_segments=st.one_of(st.just(-1), st.integers(0, 7)),
)
def test_model_of_deletable_segments(
    tmp_path_factory: pytest.TempPathFactory,
    timestamps: list[int],
    retention_ms: int,
    retention_segments: int,
) -> None:
    """Against a plain model of §10: size then time, each a prefix walk; all gone => roll."""
    clock = ManualClock()
    d = open_dir(tmp_path_factory.mktemp("model"), clock)
    log = d.get_or_create(*TP)
    segmented(log, [T0 + 1000 * t for t in timestamps])
    size = log.segments[0].size
    retention_bytes = -1 if retention_segments < 0 else retention_segments * size
    retention = -1 if retention_ms < 0 else retention_ms * 1000
    log.config = LogConfig(retention_ms=retention, retention_bytes=retention_bytes)
    now = T0 + 10_000
    alive = list(range(len(timestamps)))
    if retention_bytes >= 0 and len(alive) * size >= retention_bytes:
        excess = len(alive) * size - retention_bytes
        while alive and excess >= size:
            alive.pop(0)
            excess -= size
    if retention_ms >= 0:
        while alive and now - (T0 + 1000 * timestamps[alive[0]]) > retention_ms * 1000:
            alive.pop(0)
    end = 3 * len(timestamps)
    delete_old_segments(log, now_ms=now)
    expected = [3 * i for i in alive] if alive else [end]
    assert bases(log) == expected
    assert log.log_start_offset == expected[0] and log.log_end_offset == end
    for segment in log.segments:
        segment.close_handlers()
    d.logs.clear()


# ------------------------------------------------------------------------ roll, active, empty


def test_every_segment_expired_rolls_a_new_active_segment_first(
    log_dir: LogDirectory, clock: ManualClock
) -> None:
    log = log_dir.get_or_create(*TP)
    segmented(log, [T0, T0, T0], pid=7)
    clock.now = T0 + 10_000
    result = delete_old_segments(log)
    assert result.segments_deleted == 3 and result.records_deleted == 9
    assert bases(log) == [9] and log.active_segment.size == 0
    assert (log.log_start_offset, log.log_end_offset) == (9, 9)
    assert files(log.directory, ".snapshot") == ["00000000000000000009.snapshot"]
    # producer state survives: the producer's next sequence is still accepted, a gap is not
    append(log, T0 + 10_000, pid=7)
    assert log.log_end_offset == 12
    # the new segment is not expired and an empty last segment never goes
    clock.now = T0 + 10_500
    assert delete_old_segments(log).segments_deleted == 0
    assert errors(log_dir.path) == []


def test_an_empty_active_segment_is_never_deleted(
    log_dir: LogDirectory, clock: ManualClock
) -> None:
    log = log_dir.get_or_create(*TP)
    segmented(log, [T0, T0])
    log.roll()
    clock.now = T0 + 10_000
    assert delete_old_segments(log).segments_deleted == 2
    assert bases(log) == [6] and log.active_segment.size == 0
    assert delete_old_segments(log).segments_deleted == 0
    assert bases(log) == [6]


def test_compact_policy_alone_does_not_delete_by_time_or_size(
    tmp_path: Path, clock: ManualClock
) -> None:
    d = open_dir(tmp_path, clock, cleanup_policy="compact", retention_ms=1, retention_bytes=0)
    log = d.get_or_create(*TP)
    segmented(log, [0, 0, 0])
    assert delete_old_segments(log, now_ms=T0).segments_deleted == 0
    delete_records(log, 4)  # the log start offset rule applies to every policy
    assert bases(log) == [3, 6] and log.log_start_offset == 4
    log.config = LogConfig(cleanup_policy=("compact", "delete"), retention_ms=1)
    assert delete_old_segments(log, now_ms=T0).segments_deleted == 2
    d.close()


# ------------------------------------------------------------------------- files and state


def test_deleted_files_are_removed_only_after_the_delay(
    log_dir: LogDirectory, clock: ManualClock
) -> None:
    log = log_dir.get_or_create(*TP)
    segmented(log, [T0, T0, T0 + 5000], pid=3)
    clock.now = T0 + 5000
    delete_old_segments(log)
    pending = sorted(p.name for p in log.pending_deletions.paths)
    assert pending == sorted(files(log.directory, ".deleted"))
    assert "00000000000000000000.log.deleted" in pending
    assert "00000000000000000003.snapshot.deleted" in pending
    assert {p.split(".")[1] for p in pending} >= {"log", "index", "timeindex", "snapshot"}
    # verify sees leftovers (warnings), no errors
    assert errors(log_dir.path) == [] and verify_paths([log_dir.path])
    log.config = dataclasses.replace(log.config, retention_ms=-1)  # no new deletions
    clock.now = T0 + 5000 + 59_999
    delete_old_segments(log)
    assert len(files(log.directory, ".deleted")) == len(pending)
    clock.now = T0 + 5000 + 60_000
    delete_old_segments(log)
    assert files(log.directory, ".deleted") == [] and len(log.pending_deletions) == 0
    assert verify_paths([log_dir.path]) == []


def test_zero_delay_removes_the_files_in_the_same_pass(tmp_path: Path, clock: ManualClock) -> None:
    d = open_dir(tmp_path, clock, retention_ms=10, file_delete_delay_ms=0)
    log = d.get_or_create(*TP)
    segmented(log, [T0, T0 + 100])
    delete_old_segments(log, now_ms=T0 + 50)
    assert files(log.directory, ".deleted") == [] and bases(log) == [3]
    d.close()


def test_snapshots_of_deleted_segments_go_the_next_one_stays(
    log_dir: LogDirectory, clock: ManualClock
) -> None:
    log = log_dir.get_or_create(*TP)
    segmented(log, [T0, T0, T0, T0 + 9000], pid=5)
    assert files(log.directory, ".snapshot") == [f"{o:020d}.snapshot" for o in (3, 6, 9)]
    clock.now = T0 + 9000
    delete_old_segments(log)
    assert files(log.directory, ".snapshot") == ["00000000000000000009.snapshot"]
    assert files(log.directory, ".snapshot.deleted") == [
        f"{o:020d}.snapshot.deleted" for o in (3, 6)]  # fmt: skip
    assert log.producer_state.oldest_snapshot_offset() == 9


def test_leader_epoch_cache_is_truncated_from_the_start(
    log_dir: LogDirectory, clock: ManualClock
) -> None:
    log = log_dir.get_or_create(*TP)
    segmented(log, [T0, T0, T0 + 9000])
    assert (log.directory / "leader-epoch-checkpoint").read_text() == "0\n1\n0 0\n"
    clock.now = T0 + 9000
    delete_old_segments(log)
    assert (log.directory / "leader-epoch-checkpoint").read_text() == "0\n1\n0 6\n"


def test_checkpoints_carry_the_new_start_across_a_reopen(
    tmp_path: Path, clock: ManualClock
) -> None:
    d = open_dir(tmp_path, clock)
    log = d.get_or_create(*TP)
    segmented(log, [T0, T0, T0])
    result = delete_records(log, 7, persist_start=d.checkpoint)
    assert result.segments_deleted == 2 and bases(log) == [6]
    assert (tmp_path / "log-start-offset-checkpoint").read_text() == "0\n1\nret 0 7\n"
    assert log.recovery_point >= 7
    d.checkpoint()
    # an unclean reopen (no close): the checkpoint and the files agree
    for segment in log.segments:
        segment.close_handlers()
    d.logs.clear()
    again = open_dir(tmp_path, clock)
    log = again.logs[TP]
    assert (log.log_start_offset, bases(log), log.log_end_offset) == (7, [6], 9)
    assert files(log.directory, ".deleted") == []  # removed at open, as Kafka's loader does
    with pytest.raises(OffsetOutOfRangeError):
        log_reader.read(log, 6)
    assert [r.offset for r in log_reader.iter_records(log)] == [7, 8]
    again.close()
    assert errors(tmp_path) == []


# ------------------------------------------------------------------------------ delete-records


def test_delete_records_moves_the_start_and_drops_whole_segments(log_dir: LogDirectory) -> None:
    log = log_dir.get_or_create(*TP)
    segmented(log, [T0, T0, T0])
    result = delete_records(log, 3)
    assert (result.segments_deleted, result.log_start_offset) == (1, 3)
    result = delete_records(log, 5)  # inside a segment: nothing to delete yet
    assert (result.segments_deleted, log.log_start_offset, bases(log)) == (0, 5, [3, 6])
    with pytest.raises(OffsetOutOfRangeError):
        log_reader.read(log, 4)
    assert log_reader.read(log, 5).data
    result = delete_records(log, 2)  # never moves down
    assert log.log_start_offset == 5 and result.segments_deleted == 0
    with pytest.raises(OffsetOutOfRangeError):
        delete_records(log, 10)  # beyond the high watermark
    with pytest.raises(OffsetOutOfRangeError):
        delete_records(log, -5)
    assert log.log_start_offset == 5


def test_delete_records_to_the_high_watermark_keeps_the_active_segment(
    log_dir: LogDirectory,
) -> None:
    log = log_dir.get_or_create(*TP)
    segmented(log, [T0, T0, T0])
    result = delete_records(log, -1)
    assert result.log_start_offset == 9 == log.log_end_offset
    assert bases(log) == [6]  # the last segment holds the end of the log: never by this rule
    assert list(log_reader.iter_records(log)) == []
    append(log, T0)
    assert [r.offset for r in log_reader.iter_records(log)] == [9, 10, 11]
    assert errors(log_dir.path) == []


# --------------------------------------------------------------------------- cleaner checkpoint


def test_cleaner_offsets_round_trip_and_follow_the_log_start(
    tmp_path: Path, clock: ManualClock
) -> None:
    d = open_dir(tmp_path, clock)
    log = d.get_or_create(*TP)
    segmented(log, [T0, T0, T0])
    d.checkpoint()
    assert not (tmp_path / "cleaner-offset-checkpoint").exists()  # none until a cleaning
    d.cleaner_offsets[TP] = 4
    d.close()
    assert (tmp_path / "cleaner-offset-checkpoint").read_text() == "0\n1\nret 0 4\n"
    d = open_dir(tmp_path, clock)
    assert d.cleaner_offsets == {TP: 4} and d.first_dirty_offset(TP) == 4
    delete_records(d.logs[TP], 6)
    assert d.first_dirty_offset(TP) == 6  # below the log start: cleaning resumes there
    d.close()
    assert (tmp_path / "cleaner-offset-checkpoint").read_text() == "0\n1\nret 0 6\n"
    assert errors(tmp_path) == []


def test_a_checkpointed_start_above_old_segments_deletes_them_first(
    tmp_path: Path, clock: ManualClock
) -> None:
    """DeleteRecords moved the start, the process stopped before deleting (Kafka deletes at the
    next retention check): after a reopen the log start offset rule removes the segments."""
    d = open_dir(tmp_path, clock, retention_ms=1000)
    segmented(d.get_or_create(*TP), [T0, T0, T0 + 9000])
    d.close()
    (tmp_path / "log-start-offset-checkpoint").write_text("0\n1\nret 0 7\n")
    d = open_dir(tmp_path, clock, retention_ms=1000)
    log = d.logs[TP]
    assert (bases(log), log.log_start_offset) == ([0, 3, 6], 7)
    result = delete_old_segments(log, now_ms=T0 + 9000)
    # size and time would have taken the same two, but the start offset rule runs first
    assert result.reasons == ["log-start-offset"] and result.segments_deleted == 2
    assert (bases(log), log.log_start_offset) == ([6], 7)
    d.close()
    assert errors(tmp_path) == []
