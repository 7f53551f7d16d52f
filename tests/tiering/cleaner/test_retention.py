"""Total retention of tiered partitions (remote plus local): by time on a manual clock, by size
and by DeleteRecords; the remote and local log starts agree afterwards, and a remote read and
the local reader return the same records from the new start. The expected starts are computed
here from the segments as written, by Kafka's rules, not taken from the code under test."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from tier_fixtures import TIERED, fill, only, write_tiered

from kafkatier.storage.checkpoint.checkpoint_file import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    OffsetCheckpointFile,
)
from kafkatier.storage.checkpoint.leader_epoch import LeaderEpochFileCache
from kafkatier.storage.cleaner.clean_pass import clean_log_dir
from kafkatier.storage.cleaner.retention import delete_old_segments, delete_records
from kafkatier.storage.config.topic_files import TopicConfigStore
from kafkatier.storage.errors import OffsetOutOfRangeError
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.reader import iter_records
from kafkatier.storage.log.readonly import ReadOnlyPartition, checkpointed_log_starts
from kafkatier.storage.verify.paths import verify_paths
from kafkatier.tiering.cleaner import local_log_start as remote_retention_local
from kafkatier.tiering.cleaner.retention import raise_log_start
from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.metadata.local import LEADER_EPOCH_CHECKPOINT
from kafkatier.tiering.metadata.manifest import object_key
from kafkatier.tiering.metadata.manifest_copy import ManifestCopies
from kafkatier.tiering.metadata.manifest_store import ManifestCache, ManifestStore
from kafkatier.tiering.read.remote_reader import RemoteLogReader
from kafkatier.tiering.read.restore import restore_topic
from kafkatier.tiering.sidecar import tierer
from kafkatier.tiering.sidecar.status import collect_status
from kafkatier.tiering.sidecar.tierer import PassResult, Tierer
from kafkatier.tiering.store.object_store import FsspecStore, ObjectStore

TP = ("tiered", 0)
KEEP_ALL = {"retention.bytes": "-1", "retention.ms": "-1", "local.retention.bytes": "6000"}


def _tier(logs: Path, store: ObjectStore, monkeypatch: pytest.MonkeyPatch | None = None,
          now: int | None = None) -> PassResult:
    if monkeypatch is not None and now is not None:
        monkeypatch.setattr(tierer, "now_ms", lambda: now)
    config = TieringConfig(log_dirs=(logs,), remote_url=getattr(store, "url", ""),
                           orphan_grace_ms=0, threads=1)
    result = Tierer(config, store).run_once()
    assert result.failures == 0, [p.error for p in result.partitions]
    return result


def _segments(logs: Path) -> list[tuple[int, int, int, int]]:
    """(base, next base or log end, size, largest timestamp) of each local segment."""
    with ReadOnlyPartition(logs, *TP) as part:
        segs = part.segments
        ends = [s.base_offset for s in segs[1:]] + [part.log_end_offset()]
        return [(s.base_offset, e, s.size, s.largest_timestamp) for s, e in zip(segs, ends,
                                                                               strict=True)]


@pytest.fixture
def uploaded(tmp_path: Path) -> tuple[Path, FsspecStore, list[tuple[int, int, int, int]]]:
    """A tiered partition, uploaded, with local retention already ahead of the log start."""
    logs = write_tiered(tmp_path / "logs", steps=80, overrides=KEEP_ALL)
    written = _segments(logs)
    store = FsspecStore(f"file://{tmp_path / 'remote'}")
    result = _tier(logs, store)
    assert result.total("local_segments_deleted") >= 2
    assert result.total("remote_segments_expired") == 0
    return logs, store, written


def _set(logs: Path, **settings: str) -> None:
    TopicConfigStore(logs).update("tiered", {k.replace("_", "."): v for k, v in
                                             settings.items()}, "test")


def _local_start(logs: Path) -> int:
    """The log start local readers use: the first segment, raised by the checkpoint."""
    with ReadOnlyPartition(logs, *TP, checkpointed_log_starts(logs).get(TP, 0)) as part:
        return part.log_start_offset


def _remote_records(store: ObjectStore, start: int, stop: int) -> list[tuple[int, bytes | None]]:
    reader = RemoteLogReader(store, only(store, *TP))
    return [(r.offset, r.value) for b in reader.batches_from(start, stop) if not b.is_control
            for r in b.records() if start <= r.offset < stop]


def _assert_agreement(logs: Path, store: ObjectStore, start: int) -> None:
    """Remote and local log starts are ``start``; both readers give the same records."""
    manifest, _ = ManifestStore(store).load(only(store, *TP))
    assert manifest.log_start_offset == start
    assert checkpointed_log_starts(logs)[TP] == start
    assert _local_start(logs) == start
    assert all(s.end_offset >= start for s in manifest.segments)  # expired copies are gone
    for seg in manifest.finished():
        for kind in seg.files:
            assert store.head(object_key(only(store, *TP), seg, kind)) is not None
    remote = RemoteLogReader(store, only(store, *TP))
    assert remote.first_offset == start
    with LogDirectory(logs) as log_dir:
        log = log_dir.logs[TP]
        assert log.log_start_offset == start
        with pytest.raises(OffsetOutOfRangeError):
            list(iter_records(log, start - 1))
        local = [(r.offset, r.value) for r in iter_records(log, start, remote.end_offset)]
    assert local  # the ranges overlap: something to compare
    assert _remote_records(store, start, remote.end_offset) == local
    assert verify_paths([logs]) == []


def test_retention_by_time_on_a_manual_clock(uploaded, monkeypatch) -> None:
    logs, store, written = uploaded
    retention = 100
    first = [s[0] for s in written].index(_local_start(logs))
    assert first + 2 < len(written) - 1  # two local segments to expire, not the active one
    cutoff = written[first + 2]  # this segment's newest record is just young enough
    now = cutoff[3] + retention
    expected = cutoff[0]
    assert _local_start(logs) < expected  # remote expiry overtakes local retention
    _set(logs, retention_ms=str(retention), local_retention_bytes="-2")
    result = _tier(logs, store, monkeypatch, now)
    assert result.total("remote_segments_expired") == sum(1 for s in written if s[0] < expected)
    _assert_agreement(logs, store, expected)
    before = _segments(logs)
    _tier(logs, store, monkeypatch, now)  # a second pass at the same time changes nothing
    assert _segments(logs) == before
    _assert_agreement(logs, store, expected)


def test_retention_by_size_counts_remote_and_local_bytes(uploaded) -> None:
    logs, store, written = uploaded
    first = [s[0] for s in written].index(_local_start(logs))
    limit = sum(s[2] for s in written[first + 2:])
    total, expected = sum(s[2] for s in written), 0
    for _base, end, size, _ in written:  # Kafka: drop the oldest while the rest stays >= limit
        if total - size < limit:
            break
        total -= size
        expected = end
    assert expected > written[first][0]  # remote expiry overtakes local retention
    _set(logs, retention_bytes=str(limit), local_retention_bytes="-2")
    _tier(logs, store)
    _assert_agreement(logs, store, expected)
    status = {(s.topic, s.partition): s for s in collect_status(
        TieringConfig(log_dirs=(logs,), remote_url=store.url), store)}[TP]
    assert status.remote_start == expected
    assert status.local_start == expected
    manifest, _ = ManifestStore(store).load(only(store, *TP))
    kept = manifest.finished()
    remaining = sum(s.size for s in kept) + sum(s[2] for s in written if s[0] >= status.remote_end)
    assert remaining >= limit > remaining - kept[0].size  # one more would have gone too far


def test_delete_records_on_a_tiered_topic_reaches_the_remote_log(uploaded) -> None:
    logs, store, written = uploaded
    local_first = _local_start(logs)
    target = next(b for b, e, _, _ in written if b > local_first) + 3  # inside a segment
    with LogDirectory(logs) as log_dir:
        log = log_dir.logs[TP]
        result = delete_records(log, target, persist_start=log_dir.checkpoint)
        assert result.segments_deleted == 0  # left to the sidecar on a tiered topic
        assert log.log_start_offset == target
    assert _segments(logs)[0][0] == local_first
    assert checkpointed_log_starts(logs)[TP] == target  # local readers honour it already
    assert _local_start(logs) == target
    status = {(s.topic, s.partition): s for s in collect_status(
        TieringConfig(log_dirs=(logs,), remote_url=store.url), store)}[TP]
    assert status.local_start == target  # inside a segment: not that segment's base
    result = _tier(logs, store)
    assert result.total("remote_segments_expired") == sum(1 for s in written if s[1] <= target)
    assert _segments(logs)[0][0] == max(b for b, _, _, _ in written if b <= target)
    _assert_agreement(logs, store, target)
    restored = restore_topic(store, "tiered", logs.parent / "restored")
    assert restored[0].log_start_offset == target
    assert verify_paths([logs.parent / "restored"]) == []


def test_status_leaves_out_remote_segments_below_the_log_start(uploaded) -> None:
    """A pass killed after it raised the manifest's log start, before the expired copies went
    (``after-remote-start``): ``status`` counts only the segments at or above the start, which
    readers and restores use (it counted the doomed ones until their deletion began)."""
    logs, store, _ = uploaded
    manifests = ManifestStore(store, cache=ManifestCache(ManifestCopies([logs])))  # as a sidecar
    finished = manifests.load(only(store, *TP))[0].finished()
    assert len(finished) > 3
    raise_log_start(manifests, only(store, *TP), finished[2].base_offset)
    status = {(s.topic, s.partition): s for s in collect_status(
        TieringConfig(log_dirs=(logs,), remote_url=store.url), store)}[TP]  # fmt: skip
    assert status.remote_start == finished[2].base_offset
    assert status.remote_segments == len(finished) - 2
    assert status.remote_bytes == sum(s.size for s in finished[2:])


def test_segments_below_a_delete_records_start_are_not_uploaded(tmp_path) -> None:
    """DeleteRecords before the first pass: the segments wholly below the new start are never
    uploaded (they would only expire in the same pass); the one holding the start is, whole."""
    logs = write_tiered(tmp_path / "logs", steps=80, overrides=KEEP_ALL)
    written = _segments(logs)
    target = written[len(written) // 2][0] + 3  # inside a segment
    with LogDirectory(logs) as log_dir:
        delete_records(log_dir.logs[TP], target, persist_start=log_dir.checkpoint)
    store = FsspecStore(f"file://{tmp_path / 'remote'}")
    result = _tier(logs, store)
    assert result.total("remote_segments_expired") == 0
    live = [(b, e) for b, e, _, _ in written[:-1] if e > target]  # all but the active one
    finished = ManifestStore(store).load(only(store, *TP))[0].finished()
    assert [(s.base_offset, s.end_offset + 1) for s in finished] == live
    assert result.total("uploaded_segments") == len(live)
    assert set(finished[0].files) >= {"log", "index", "timeindex", "snapshot"}
    _assert_agreement(logs, store, target)


def test_a_log_start_moved_remotely_is_honoured_locally(uploaded) -> None:
    logs, store, written = uploaded
    target = written[-3][0]
    # e.g. another sidecar's DeleteRecords
    raise_log_start(ManifestStore(store), only(store, *TP), target)
    epochs_before = LeaderEpochFileCache(logs / "tiered-0" / LEADER_EPOCH_CHECKPOINT).entries
    _tier(logs, store)
    _assert_agreement(logs, store, target)
    points = OffsetCheckpointFile(logs / RECOVERY_POINT_CHECKPOINT).read()
    assert points[TP] >= target
    epochs = LeaderEpochFileCache(logs / "tiered-0" / LEADER_EPOCH_CHECKPOINT).entries
    assert epochs and epochs[0][1] >= target
    assert epochs[-1].epoch == epochs_before[-1].epoch
    raise_log_start(ManifestStore(store), only(store, *TP), target - 5)  # never down
    assert ManifestStore(store).load(only(store, *TP))[0].log_start_offset == target


def test_writer_side_retention_leaves_tiered_segments_to_the_sidecar(tmp_path) -> None:
    logs = write_tiered(tmp_path / "logs", steps=40,
                        overrides={"retention.ms": "1", "retention.bytes": "10"})
    before = _segments(logs)
    with LogDirectory(logs) as log_dir:
        result = delete_old_segments(log_dir.logs[TP], now_ms=2**50)
        assert result.segments_deleted == 0
        summaries = clean_log_dir(log_dir, now_ms=2**50, compactor=None)
        assert summaries[0].segments_deleted == 0
    assert _segments(logs) == before
    _set(logs, remote_storage_enable="false",  # the same log untiered: retention deletes
         remote_log_delete_on_disable="true")
    with LogDirectory(logs) as log_dir:
        assert delete_old_segments(log_dir.logs[TP], now_ms=2**50).segments_deleted > 0


def test_checkpoint_rewrite_retries_when_the_writer_wins_the_race(tmp_path) -> None:
    path = tmp_path / LOG_START_OFFSET_CHECKPOINT
    OffsetCheckpointFile(path).write({("other", 0): 7})
    calls = []

    def change(staged: Path) -> bool:
        calls.append(staged)
        if len(calls) == 1:  # a writer checkpoints between our read and our rename
            OffsetCheckpointFile(path).write({("other", 0): 9})
        file = OffsetCheckpointFile(staged)
        file.write({**file.read(), TP: 42})
        return True

    assert remote_retention_local._rewrite(path, change) == 1
    assert len(calls) == 2
    assert OffsetCheckpointFile(path).read() == {("other", 0): 9, TP: 42}
    assert not list(tmp_path.glob(f"*{remote_retention_local.STAGING_SUFFIX}"))


def test_remote_retention_beside_a_live_writer(tmp_path) -> None:
    logs = tmp_path / "logs"
    store = FsspecStore(f"file://{tmp_path / 'remote'}")
    stop = threading.Event()
    with LogDirectory(logs) as log_dir:
        log_dir.topic_configs.update("tiered", {**TIERED, "retention.bytes": "6000"}, "test")
        log = log_dir.get_or_create(*TP)

        def write() -> None:
            for round_ in range(30):
                fill(log, 2, start=round_ * 2)
                log_dir.flush()  # the writer rewrites the checkpoints from its own memory
            stop.set()

        writer = threading.Thread(target=write)
        writer.start()
        expired = 0
        while not stop.is_set():
            expired += _tier(logs, store).total("remote_segments_expired")
        writer.join()
    expired += _tier(logs, store).total("remote_segments_expired")
    assert expired > 0
    manifest, _ = ManifestStore(store).load(only(store, *TP))
    start = manifest.log_start_offset
    assert start > 0
    written = _segments(logs)
    assert written[0][0] == start  # local segments below the remote start went too
    assert _local_start(logs) == start
    assert checkpointed_log_starts(logs)[TP] == start
    assert sum(s.size for s in manifest.finished()) + sum(
        s[2] for s in written if s[0] > manifest.highest_offset) >= 6000
    assert verify_paths([logs]) == []
