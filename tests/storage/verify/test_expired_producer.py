"""verify and producers the writer expired (kafka-format.md §7.1: dropped at load when idle for
``producer.id.expiration.ms`` with no open transaction): a producer that resumes after expiry
starts a fresh entry, whose snapshots carry coordinator epoch -1 until its next marker, while
verify's replay (blind to wall-clock expiry) still knows the epoch of the earlier marker."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.log import Log
from kafkatier.storage.producer.snapshot import SnapshotEntry, encode_snapshot, read_snapshot
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record
from kafkatier.storage.verify.paths import verify_paths

T0 = 1_700_000_000_000  # far more than producer.id.expiration.ms (1 day) before now
PID = 7000
CONFIG = {"segment.bytes": "600"}


def _txn(log: Log, first_seq: int, batches: int, *, at: int) -> int:
    for i in range(batches):
        recs = [Record(j, T0 + at + i, f"k{i}".encode(), b"v" * 60, ()) for j in range(2)]
        log.append(
            build_batch(
                recs,
                producer_id=PID,
                producer_epoch=0,
                base_sequence=first_seq + 2 * i,
                transactional=True,
            )
        )
    return first_seq + 2 * batches


def _write(path: Path, *, reopen_between: bool) -> Path:
    """PID commits a transaction (coordinator epoch 3), then, maybe after a reopen that expires
    it, runs a second transaction across several segment rolls and commits it."""
    with LogDirectory(path) as log_dir:
        log_dir.topic_configs.update("t", CONFIG, "test")
        log = log_dir.get_or_create("t", 0)
        seq = _txn(log, 0, 3, at=0)
        log.write_txn_marker(PID, 0, commit=True, coordinator_epoch=3, timestamp=T0 + 10)
        if not reopen_between:
            _txn(log, seq, 12, at=100)
    if reopen_between:
        with LogDirectory(path) as log_dir:
            log = log_dir.get_or_create("t", 0)
            assert PID not in log.producer_state.producers  # expired at load, as Kafka does
            _txn(log, seq, 12, at=100)
    with LogDirectory(path) as log_dir:
        log_dir.get_or_create("t", 0).write_txn_marker(PID, 0, commit=True, coordinator_epoch=3)
    return path


def _entries(path: Path) -> dict[Path, SnapshotEntry]:
    return {
        snap: entry
        for snap in sorted((path / "t-0").glob("*.snapshot"))
        for entry in read_snapshot(snap)
        if entry.producer_id == PID
    }


def _resumed(path: Path) -> list[Path]:
    """Snapshots taken in the second transaction (the first ends with its marker at 6)."""
    return [snap for snap, e in _entries(path).items() if e.current_txn_first_offset > 6]


def test_producer_resumed_after_expiry_verifies(tmp_path: Path) -> None:
    logs = _write(tmp_path / "logs", reopen_between=True)
    resumed = _resumed(logs)
    assert resumed and all(_entries(logs)[s].coordinator_epoch == -1 for s in resumed)
    assert verify_paths([logs]) == []


def _set_epoch(snapshot: Path, epoch: int) -> None:
    entries = [
        e if e.producer_id != PID else dataclasses.replace(e, coordinator_epoch=epoch)
        for e in read_snapshot(snapshot)
    ]
    snapshot.write_bytes(encode_snapshot(entries))


def test_unknown_coordinator_epoch_right_after_a_marker_is_reported(tmp_path: Path) -> None:
    """No data batch follows the marker: the entry cannot have been recreated, so -1 is wrong."""
    logs = _write(tmp_path / "logs", reopen_between=False)
    assert verify_paths([logs]) == []
    [snap] = [s for s, e in _entries(logs).items() if e.current_txn_first_offset < 0]
    _set_epoch(snap, -1)
    messages = [p.message for p in verify_paths([logs]) if p.file == str(snap)]
    assert messages == [f"producer {PID}: coordinator_epoch -1 (the log says 3)"]


def test_other_wrong_coordinator_epoch_still_reported(tmp_path: Path) -> None:
    logs = _write(tmp_path / "logs", reopen_between=True)
    snap = _resumed(logs)[0]
    _set_epoch(snap, 1)
    messages = [p.message for p in verify_paths([logs]) if p.file == str(snap)]
    assert messages == [f"producer {PID}: coordinator_epoch 1 (the log says 3)"]
