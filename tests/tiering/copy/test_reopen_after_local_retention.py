"""Reopening the writer after local retention deleted uploaded segments, then tiering and
restoring: the restored log (complete from offset 0) must verify clean.

The producer resumed here committed its first transaction in a segment local retention deleted,
and it is idle past ``producer.id.expiration.ms`` (the fixture's timestamps are from 2023), so
the reopened writer drops it at load, as Kafka does (kafka-format.md §7.1); its new transaction
then starts a fresh entry whose snapshots carry coordinator epoch -1 until its marker, while a
replay of the whole restored log still knows the epoch of the first marker."""

from __future__ import annotations

from pathlib import Path

from tier_fixtures import T0, fill, only, records, write_tiered

from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.producer.snapshot import read_snapshot
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.verify.paths import verify_paths
from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.metadata.manifest_store import ManifestStore
from kafkatier.tiering.read.restore import restore_topic
from kafkatier.tiering.sidecar.tierer import Tierer
from kafkatier.tiering.store.object_store import FsspecStore

PID = 5003  # fill's first transaction (step 3), committed with coordinator epoch 0


def _resume_producer(logs: Path) -> None:
    with LogDirectory(logs) as log_dir:
        log = log_dir.get_or_create("tiered", 0)
        assert log.segments[0].base_offset > 0  # the first segments are gone locally
        assert PID not in log.producer_state.producers  # expired at load
        for i in range(30):  # long enough to span segment rolls while open
            log.append(
                build_batch(
                    records(2, 5000 + 2 * i),
                    producer_id=PID,
                    producer_epoch=0,
                    base_sequence=2 + 2 * i,
                    transactional=True,
                )
            )
        log.write_txn_marker(PID, 0, commit=True, timestamp=T0 + 5100)
        fill(log, 20, start=40)


def test_restore_verifies_after_reopen_past_local_retention(tmp_path: Path) -> None:
    logs = write_tiered(tmp_path / "logs", overrides={"local.retention.bytes": "0"})
    store = FsspecStore(f"file://{tmp_path / 'remote'}")
    tierer = Tierer(TieringConfig(log_dirs=(logs,), remote_url=store.url), store)
    first = tierer.run_once()
    assert first.failures == 0 and first.total("local_segments_deleted") > 0
    _resume_producer(logs)
    assert verify_paths([logs]) == []
    assert tierer.run_once().failures == 0
    target = tmp_path / "restored"
    [result] = restore_topic(store, "tiered", target)
    assert result.log_start_offset == 0
    assert result.segments == len(ManifestStore(store).load(only(store, "tiered", 0))[0].finished())
    fresh = [
        e
        for snap in (target / "tiered-0").glob("*.snapshot")
        for e in read_snapshot(snap)
        if e.producer_id == PID and e.current_txn_first_offset >= 0
    ]
    assert fresh and {e.coordinator_epoch for e in fresh} == {-1}
    assert verify_paths([target]) == []
