"""LogDirectory's flushes of many partitions: one syncfs of the filesystem in place of an fsync
per file where it is trusted, the same marks and recovery points either way, and the fsyncs
back when syncfs fails or few partitions need a flush."""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kafkatier.storage import fsutil
from kafkatier.storage.checkpoint.checkpoint_file import (
    RECOVERY_POINT_CHECKPOINT,
    OffsetCheckpointFile,
)
from kafkatier.storage.checkpoint.metadata import CleanShutdownFile
from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.config.spec import LONG_MAX
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.flusher import SYNCFS_MIN_LOGS
from kafkatier.storage.log.log import Log
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record

NOW = 1_700_000_000_000
TOPIC = "t"


def small(_topic: str) -> LogConfig:
    return LogConfig(segment_bytes=600, segment_index_bytes=4096)


def batch(n: int) -> bytes:
    return build_batch([Record(i, NOW + i, None, b"x" * 50) for i in range(n)])


class Syncs:
    """The paths this process fsyncs and how often it calls syncfs (the real calls still run)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, syncfs: Callable[[int], None]) -> None:
        self.fsynced: list[str] = []
        self.syncfs_calls = 0
        real_fsync = os.fsync

        def fsync(fd: Any) -> None:
            fd = fd if isinstance(fd, int) else fd.fileno()
            self.fsynced.append(os.readlink(f"/proc/self/fd/{fd}"))
            real_fsync(fd)

        def counted_syncfs(fd: int) -> None:
            self.syncfs_calls += 1
            syncfs(fd)

        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(fsutil, "syncfs", counted_syncfs)

    def logs_fsynced(self) -> int:
        return sum(1 for path in self.fsynced if path.endswith(".log"))


def write(logs: LogDirectory, partitions: int, roll_every: int = 0) -> None:
    """A batch to each partition; every ``roll_every``-th one also rolls (a batch of 6 records
    outgrows the 600-byte segments)."""
    for p in range(partitions):
        log = logs.get_or_create(TOPIC, p)
        log.append(batch(6 if roll_every and p % roll_every == 0 else 1))


def durable_state(logs: LogDirectory) -> list[tuple[int, int, bool]]:
    return [(log.recovery_point, len(log.segments), log.has_unflushed_data) for log in logs]


def log_dir_trusting(path: Path, trusted: bool, monkeypatch: pytest.MonkeyPatch) -> LogDirectory:
    """A log dir (small segments) that trusts syncfs or not, as a filesystem would make it."""
    with monkeypatch.context() as patch:
        patch.setattr(fsutil, "syncfs_trusted", lambda path: trusted)
        return LogDirectory(path, config_for=small)


needs_syncfs = pytest.mark.skipif(
    not fsutil.syncfs_trusted(Path(__file__).parent), reason="syncfs is not trusted here"
)


@needs_syncfs
def test_one_syncfs_replaces_the_fsyncs_of_many_partitions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    states = []
    for trusted in (True, False):
        logs = log_dir_trusting(tmp_path / str(trusted), trusted, monkeypatch)
        syncs = Syncs(monkeypatch, fsutil.syncfs)
        for _ in range(3):
            write(logs, SYNCFS_MIN_LOGS, roll_every=4)
            logs.flush_data()
        if trusted:
            assert syncs.syncfs_calls == 3 and syncs.logs_fsynced() == 0
        else:
            assert syncs.syncfs_calls == 0 and syncs.logs_fsynced() >= 3 * SYNCFS_MIN_LOGS
        states.append(durable_state(logs))
        logs.close()
    assert states[0] == states[1]  # the same marks cleared, the same recovery points moved
    assert all(not unflushed for _, _, unflushed in states[0])
    assert {point for point, segments, _ in states[0] if segments > 1} != {0}  # rolls flushed


def test_a_few_partitions_keep_their_fsyncs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logs = LogDirectory(tmp_path, config_for=small)
    syncs = Syncs(monkeypatch, fsutil.syncfs)
    write(logs, SYNCFS_MIN_LOGS - 1)
    logs.flush()
    assert syncs.syncfs_calls == 0 and syncs.logs_fsynced() == SYNCFS_MIN_LOGS - 1
    logs.close()


@needs_syncfs
def test_a_failed_syncfs_gives_way_to_fsyncs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def failing(fd: int) -> None:
        raise OSError(errno.EIO, "syncfs: Input/output error")

    logs = LogDirectory(tmp_path, config_for=small)
    syncs = Syncs(monkeypatch, failing)
    write(logs, SYNCFS_MIN_LOGS)
    with caplog.at_level(logging.WARNING):
        logs.flush_data()
    assert syncs.syncfs_calls == 1 and syncs.logs_fsynced() == SYNCFS_MIN_LOGS
    assert "fsyncing each file from now on" in caplog.text
    write(logs, SYNCFS_MIN_LOGS)
    logs.flush()
    assert syncs.syncfs_calls == 1 and syncs.logs_fsynced() == 2 * SYNCFS_MIN_LOGS
    assert all(not unflushed for _, _, unflushed in durable_state(logs))
    logs.close()


def closed_state(root: Path) -> tuple[dict[Any, int], list[str]]:
    """What a clean close left: the recovery points checkpointed, and the files of every
    partition (producer snapshots at the log end included)."""
    points = OffsetCheckpointFile(root / RECOVERY_POINT_CHECKPOINT).read()
    files = sorted(str(p.relative_to(root)) for p in root.glob("*-*/*") if p.is_file())
    return points, files


@needs_syncfs
def test_a_clean_close_of_many_partitions_is_one_syncfs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    states = []
    for trusted in (True, False):
        logs = log_dir_trusting(tmp_path / str(trusted), trusted, monkeypatch)
        write(logs, SYNCFS_MIN_LOGS, roll_every=4)
        syncs = Syncs(monkeypatch, fsutil.syncfs)
        logs.close()
        snapshots = [path for path in syncs.fsynced if path.endswith(".snapshot")]
        if trusted:
            assert syncs.syncfs_calls == 1 and syncs.logs_fsynced() == 0 and not snapshots
        else:
            assert syncs.syncfs_calls == 0 and syncs.logs_fsynced() >= SYNCFS_MIN_LOGS
            assert len(snapshots) == SYNCFS_MIN_LOGS
        assert CleanShutdownFile(tmp_path / str(trusted)).exists()
        states.append(closed_state(tmp_path / str(trusted)))
    assert states[0] == states[1]
    assert set(states[0][0].values()) - {0}  # the recovery points moved to the log ends
    reopened = LogDirectory(tmp_path / "True", config_for=small)
    assert reopened.had_clean_shutdown
    ends = {log.partition: log.log_end_offset for log in reopened}
    assert ends == {p: 6 if p % 4 == 0 else 1 for p in range(SYNCFS_MIN_LOGS)}
    reopened.close()


@needs_syncfs
def test_a_failed_syncfs_at_close_fsyncs_every_partitions_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing(fd: int) -> None:
        raise OSError(errno.EIO, "syncfs: Input/output error")

    logs = LogDirectory(tmp_path, config_for=small)
    write(logs, SYNCFS_MIN_LOGS)
    syncs = Syncs(monkeypatch, failing)
    logs.close()
    assert syncs.syncfs_calls == 1
    for partition in range(SYNCFS_MIN_LOGS):
        directory = tmp_path / f"{TOPIC}-{partition}"
        for path in directory.iterdir():
            assert str(path) in syncs.fsynced, path
        assert str(directory) in syncs.fsynced
    assert CleanShutdownFile(tmp_path).exists()


@needs_syncfs
def test_creating_many_partitions_is_one_syncfs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logs = LogDirectory(tmp_path)
    syncs = Syncs(monkeypatch, fsutil.syncfs)
    logs.create_partitions(TOPIC, SYNCFS_MIN_LOGS)
    assert syncs.syncfs_calls == 1
    assert not [path for path in syncs.fsynced if "-delete/" in path or path.endswith("-delete")]
    assert sorted(tp for tp in logs.logs) == [(TOPIC, p) for p in range(SYNCFS_MIN_LOGS)]
    syncs.fsynced.clear()
    logs.create_partitions("few", SYNCFS_MIN_LOGS - 1)  # below the threshold: fsyncs, as before
    assert syncs.syncfs_calls == 1
    staged_metadata = [path for path in syncs.fsynced if path.endswith("partition.metadata")]
    assert len(staged_metadata) == SYNCFS_MIN_LOGS - 1
    logs.close()


def _indexed(_topic: str) -> LogConfig:
    """Every batch gets an index entry (``index.interval.bytes=1``)."""
    return LogConfig(index_interval_bytes=1, segment_index_bytes=4096)


def _file_offsets(log: Any) -> list[int]:
    """The active segment's offset-index entries as its file holds them."""
    index = log.active_segment.offset_index
    data = index.path.read_bytes()[: 8 * index.entries]
    return [log.active_segment.base_offset + int.from_bytes(data[i : i + 4], "big")
            for i in range(0, len(data), 8)]  # fmt: skip


@needs_syncfs
def test_a_flush_by_syncfs_covers_the_index_entries_kept_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer keeps its last index entries in memory (``index/base.py``); a flush that moves
    the recovery points to the end by one syncfs writes them into their files first, and a
    covered flush of a log whose entries were not written writes and syncs them itself."""
    logs = LogDirectory(tmp_path, config_for=_indexed)
    syncs = Syncs(monkeypatch, fsutil.syncfs)
    for _ in range(3):
        for p in range(SYNCFS_MIN_LOGS):
            logs.get_or_create(TOPIC, p).append(batch(2))
    assert all(log.active_segment.offset_index.unwritten == 2 for log in logs)
    logs.flush()
    assert syncs.syncfs_calls == 1
    for log in logs:
        assert log.recovery_point == log.log_end_offset == 6
        assert log.active_segment.offset_index.unwritten == 0
        assert _file_offsets(log) == [3, 5]  # the first batch follows no bytes: no entry
    log = logs.get_or_create(TOPIC, 0)
    log.append(batch(2))
    log.flush(covered=True)  # as after a syncfs that began before the entry was written
    assert log.active_segment.offset_index.unwritten == 0 and _file_offsets(log) == [3, 5, 7]
    logs.close()


def _detail(logs: LogDirectory) -> list[tuple[Any, ...]]:
    """Every mark a flush moves, per partition: the recovery point, each segment's flag, the
    roll, the files and directory waiting for an fsync."""
    return [
        (log.topic, log.partition, log.recovery_point, [s.unsynced for s in log.segments],
         log.durability.rolled_to, list(log.durability.unsynced_files),
         log.durability.dir_unsynced)
        for log in logs
    ]  # fmt: skip


@needs_syncfs
def test_finishing_a_begun_flush_moves_the_marks_a_flush_moves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``flush_data_later``'s finish (one syncfs, then each partition's marks in one pass)
    against ``flush_data``, over partitions in every state a writer leaves: appended to,
    rolled, their leader epoch changed (a file written without fsync), due a full flush by
    ``flush.messages``, untouched, new."""

    def config(topic: str) -> LogConfig:
        due = 4 if topic == "due" else LONG_MAX
        return LogConfig(segment_bytes=600, segment_index_bytes=4096, flush_messages=due)

    states = []
    for later in (True, False):
        logs = LogDirectory(tmp_path / str(later), config_for=config)
        for round_ in range(4):
            for topic in (TOPIC, "due"):
                for p in range(SYNCFS_MIN_LOGS + 2):
                    log = logs.get_or_create(topic, p)
                    if p % 3 == round_ % 3:
                        continue  # untouched this round
                    if p % 5 == 1:
                        log.leader_epoch = round_ + 1  # its checkpoint written, not synced
                    log.append(batch(6 if p % 4 == 0 else 1))
            logs.get_or_create("new", round_)
            if later:
                logs.flush_data_later().finish()
            else:
                logs.flush_data()
            states.append(_detail(logs))
        logs.close()
    assert states[:4] == states[4:]
    assert {point for _, _, point, *_ in states[3]} != {0}  # rolls and flush.messages moved some
    assert all(not any(unsynced) for _, _, _, unsynced, *_ in states[3])


def _snapshot_files(logs: list[Log]) -> tuple[dict[int, set[int]], dict[int, set[int]]]:
    """Each partition's snapshots as its producer state knows them, and as files on disk."""
    known = {log.partition: {o for o, _ in log.producer_state.snapshot_files()} for log in logs}
    on_disk = {
        log.partition: {int(p.name[:20]) for p in log.directory.glob("*.snapshot")} for log in logs
    }
    return known, on_disk


@pytest.mark.parametrize("trusted", [True, False])
def test_a_clean_close_deletes_the_stray_snapshots_the_open_forgot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trusted: bool
) -> None:
    """Each open forgets every partition's stray producer snapshots but the clean-shutdown one
    (Kafka's removeStraySnapshots); their files wait for the clean close, which deletes them
    after its own snapshots (``ProducerStateManager.delete_stray_files``), whichever way it
    closes many partitions (one syncfs, or each partition's fsyncs)."""
    pending = 0
    for round_ in range(3):
        logs = log_dir_trusting(tmp_path, trusted, monkeypatch)
        write(logs, SYNCFS_MIN_LOGS)
        opened = list(logs)
        known, on_disk = _snapshot_files(opened)
        assert all(known[p] <= on_disk[p] for p in known)
        pending += sum(len(on_disk[p] - known[p]) for p in known)
        logs.close()
        known, on_disk = _snapshot_files(opened)
        assert len(on_disk) == SYNCFS_MIN_LOGS and on_disk == known
        assert all(len(snapshots) <= 2 for snapshots in on_disk.values()), round_
    assert pending == SYNCFS_MIN_LOGS  # the third open forgot each partition's first snapshot
