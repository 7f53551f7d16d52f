"""Upload of eligible segments, manifests, orphans and local retention (file:// and S3)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from tier_fixtures import append_more, only, write_tiered

from kafkatier.storage.checkpoint.metadata import PartitionMetadataFile
from kafkatier.storage.log.readonly import ReadOnlyPartition
from kafkatier.storage.verify.paths import verify_paths
from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.copy.orphans import sweep_orphans
from kafkatier.tiering.copy.upload import MAX_ATTEMPT_MS, Uploader
from kafkatier.tiering.metadata.local import LocalPartition
from kafkatier.tiering.metadata.manifest import RemoteSegment, SegmentState, attempt_prefix, now_ms
from kafkatier.tiering.metadata.manifest_store import ManifestStore
from kafkatier.tiering.sidecar.tierer import Tierer
from kafkatier.tiering.store.object_store import FsspecStore, ObjectStore


def _config(logs: Path, url: str, **kw) -> TieringConfig:
    return TieringConfig(log_dirs=(logs,), remote_url=url, orphan_grace_ms=0, **kw)


def _local_segments(logs: Path, topic: str, partition: int) -> list[tuple[int, bytes]]:
    with ReadOnlyPartition(logs, topic, partition) as part:
        return [(s.base_offset, s.log_path.read_bytes()) for s in part.segments]


@pytest.fixture
def file_store(tmp_path: Path) -> FsspecStore:
    return FsspecStore(f"file://{tmp_path / 'remote'}")


def test_uploads_every_closed_segment_but_not_the_active_one(tmp_path, file_store) -> None:
    logs = write_tiered(tmp_path / "logs", partitions=2)
    result = Tierer(_config(logs, file_store.url), file_store).run_once()
    assert result.failures == 0
    for p in (0, 1):
        local = _local_segments(logs, "tiered", p)
        assert len(local) >= 4
        rp = only(file_store, "tiered", p)
        topic_id = PartitionMetadataFile(logs / f"tiered-{p}" / "partition.metadata").read()
        assert rp.prefix == f"tiered-{topic_id}/{p}/"  # Kafka's <topic>-<topicId>, then the number
        manifest, _ = ManifestStore(file_store).load(rp)
        assert manifest.topic_id == topic_id
        finished = manifest.finished()
        assert [s.base_offset for s in finished] == [b for b, _ in local[:-1]]
        for seg, (base, data), (next_base, _) in zip(finished, local, local[1:], strict=False):
            assert seg.end_offset == next_base - 1
            remote_log = file_store.get_bytes(f"{rp.prefix}{base:020d}-{seg.attempt}/log")
            assert remote_log == data
            assert {"log", "index", "timeindex", "snapshot"} <= set(seg.files)
        assert any("txnindex" in s.files for s in finished)  # the aborted transaction
    assert result.total("uploaded_segments") == sum(
        len(_local_segments(logs, "tiered", p)) - 1 for p in (0, 1))
    again = Tierer(_config(logs, file_store.url), file_store).run_once()
    assert again.total("uploaded_segments") == 0  # nothing new: idempotent


def test_topics_without_remote_storage_are_left_alone(tmp_path, file_store) -> None:
    logs = write_tiered(tmp_path / "logs", topic="plain",
                        overrides={"remote.storage.enable": "false"})
    result = Tierer(_config(logs, file_store.url), file_store).run_once()
    assert result.partitions == []
    assert ManifestStore(file_store).partitions() == []


def test_open_transaction_bounds_eligibility_by_lso(tmp_path, file_store) -> None:
    from tier_fixtures import records

    from kafkatier.storage.log.directory import LogDirectory
    from kafkatier.storage.record.builder import build_batch

    logs = tmp_path / "logs"
    with LogDirectory(logs) as log_dir:
        log_dir.topic_configs.update("tiered", {"remote.storage.enable": "true",
                                                "segment.bytes": "1000"}, "test")
        log = log_dir.get_or_create("tiered", 0)
        log.append(build_batch(records(2, 0), producer_id=9, producer_epoch=0,
                               base_sequence=0, transactional=True))
        open_at = 0
        for step in range(1, 30):
            log.append(build_batch(records(3, step * 10)))
    with LocalPartition(logs, "tiered", 0) as part:
        assert part.last_stable_offset() == open_at
        assert part.candidates() == []
    Tierer(_config(logs, file_store.url), file_store).run_once()
    assert ManifestStore(file_store).load(only(file_store, "tiered", 0))[0].finished() == []


def test_local_retention_deletes_only_uploaded_segments_and_keeps_log_start(
    tmp_path, file_store
) -> None:
    logs = write_tiered(tmp_path / "logs", overrides={"local.retention.bytes": "3000",
                                                      "retention.bytes": "-1"})
    before = _local_segments(logs, "tiered", 0)
    result = Tierer(_config(logs, file_store.url), file_store).run_once()
    after = _local_segments(logs, "tiered", 0)
    assert result.total("local_segments_deleted") == len(before) - len(after) > 0
    assert after[-1] == before[-1]  # the active segment stays
    assert sum(len(d) for _, d in after) >= 3000 - len(after[0][1])
    manifest, _ = ManifestStore(file_store).load(only(file_store, "tiered", 0))
    assert manifest.log_start_offset == 0  # the log start offset does not move
    remote = {s.base_offset for s in manifest.finished()}
    assert {b for b, _ in before} - {b for b, _ in after} <= remote
    assert verify_paths([logs / "tiered-0"]) == []
    append_more(logs, "tiered", 0, steps=20, start=100)  # the writer reopens above a local start
    assert Tierer(_config(logs, file_store.url), file_store).run_once().failures == 0
    manifest, _ = ManifestStore(file_store).load(only(file_store, "tiered", 0))
    assert manifest.log_start_offset == 0  # still: remote copies below the local start stay
    assert remote < {s.base_offset for s in manifest.finished()}
    assert verify_paths([logs]) == []


def test_local_retention_waits_for_a_finished_copy(tmp_path) -> None:
    logs = write_tiered(tmp_path / "logs", overrides={"local.retention.ms": "0",
                                                      "retention.ms": "-1"})
    broken = FsspecStore(f"file://{tmp_path / 'remote'}")

    def failing_put(*args, **kwargs):
        raise OSError("remote down")

    broken.put_file = failing_put  # type: ignore[method-assign]
    before = _local_segments(logs, "tiered", 0)
    result = Tierer(_config(logs, broken.url), broken).run_once()
    assert result.failures == 1
    assert _local_segments(logs, "tiered", 0) == before
    manifest, _ = ManifestStore(broken).load(only(broken, "tiered", 0))
    assert manifest.finished() == []
    assert manifest.segments == []  # the failed attempt was cleaned up


def test_orphans_of_a_dead_owner_are_removed(tmp_path, file_store) -> None:
    logs = write_tiered(tmp_path / "logs")
    Tierer(_config(logs, file_store.url), file_store).run_once()
    manifests = ManifestStore(file_store)
    dead = RemoteSegment(10**6, 10**6 + 5, 0, 10, SegmentState.COPY_SEGMENT_STARTED,
                         uuid.uuid4().hex, owner="dead:1:x", updated_ms=now_ms())
    rp = only(file_store, "tiered", 0)
    manifests.update(rp, lambda m: m.segments.append(dead) is None)
    prefix = attempt_prefix(rp, dead.base_offset, dead.attempt)
    file_store.put_bytes(prefix + "log", b"partial")
    stray = attempt_prefix(rp, 5, "feedbeef") + "index"
    file_store.put_bytes(stray, b"no entry names me")
    young = sweep_orphans(file_store, rp, owner="me", grace_ms=60_000)
    assert (young.removed, young.waiting) == (0, 1)  # an uploader may still name the stray
    assert file_store.head(stray) is not None
    assert file_store.head(prefix + "log") is not None  # within its owner's grace period
    assert sweep_orphans(file_store, rp, owner="me", grace_ms=0).removed == 2
    assert file_store.head(prefix + "log") is None and file_store.head(stray) is None
    manifest, _ = manifests.load(only(manifests.store, "tiered", 0))
    assert manifest.find(dead.attempt) is None
    assert all(s.finished for s in manifest.segments)
    assert "feedbeef" in manifest.abandoned  # claimed: its uploader could never commit it


def test_new_segments_upload_on_the_next_pass(tmp_path, file_store) -> None:
    logs = write_tiered(tmp_path / "logs")
    tierer = Tierer(_config(logs, file_store.url), file_store)
    tierer.run_once()
    first = len(ManifestStore(file_store).load(only(file_store, "tiered", 0))[0].finished())
    append_more(logs, "tiered", 0, steps=20, start=100)
    assert tierer.run_once().total("uploaded_segments") > 0
    finished = ManifestStore(file_store).load(only(file_store, "tiered", 0))[0].finished()
    assert len(finished) > first
    assert [s.base_offset for s in finished[1:]] == [s.end_offset + 1 for s in finished[:-1]]


def _s3_store(s3_store) -> ObjectStore:
    result: ObjectStore = s3_store
    return result


def test_upload_to_real_s3_matches_local_bytes(tmp_path, s3_store, s3_env) -> None:
    logs = write_tiered(tmp_path / "logs", partitions=2)
    config = TieringConfig(log_dirs=(logs,), remote_url=s3_store.url,
                           endpoint_url=s3_env.endpoint, region="us-east-1")
    result = Tierer(config).run_once()
    assert result.failures == 0
    store = config.open_store()
    for p in (0, 1):
        local = dict(_local_segments(logs, "tiered", p))
        for seg in ManifestStore(store).load(only(store, "tiered", p))[0].finished():
            key = f"{only(store, 'tiered', p).prefix}{seg.base_offset:020d}-{seg.attempt}/log"
            assert store.get_bytes(key) == local[seg.base_offset]
            assert seg.files["log"].etag == store.head(key).etag  # type: ignore[union-attr]


@pytest.mark.parametrize("backend", ["file", "s3"])
def test_two_sidecars_racing_converge_without_duplicates(tmp_path, backend, request) -> None:
    import threading

    logs = write_tiered(tmp_path / "logs", partitions=2)
    if backend == "file":
        store: ObjectStore = FsspecStore(f"file://{tmp_path / 'remote'}")
        config = _config(logs, store.url)
    else:
        store = request.getfixturevalue("s3_store")
        env = request.getfixturevalue("s3_env")
        config = _config(logs, store.url, endpoint_url=env.endpoint, region="us-east-1")
        store = config.open_store()
    tierers = [Tierer(config, store), Tierer(config, config.open_store())]
    threads = [threading.Thread(target=t.run_once) for t in tierers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert tierers[0].run_once().failures == 0  # sweeps whatever the race left
    for p in (0, 1):
        manifest, _ = ManifestStore(store).load(only(store, "tiered", p))
        bases = [s.base_offset for s in manifest.segments]
        assert all(s.finished for s in manifest.segments)
        assert len(bases) == len(set(bases))
        local = _local_segments(logs, "tiered", p)
        assert sorted(bases) == [b for b, _ in local[:-1]]
        rp = only(store, "tiered", p)
        named = {f"{rp.prefix}{s.base_offset:020d}-{s.attempt}/{k}"
                 for s in manifest.segments for k in s.files}
        listed = {i.key for i in store.list(rp.prefix) if not i.key.endswith("manifest.json")}
        assert listed == named


def test_total_retention_expires_remote_copies_and_moves_the_log_start(tmp_path, file_store):
    logs = write_tiered(tmp_path / "logs", overrides={"retention.bytes": "5000",
                                                      "local.retention.bytes": "3000"})
    before = _local_segments(logs, "tiered", 0)
    result = Tierer(_config(logs, file_store.url), file_store).run_once()
    assert result.total("remote_segments_expired") > 0
    manifest, _ = ManifestStore(file_store).load(only(file_store, "tiered", 0))
    remote = manifest.finished()
    assert manifest.log_start_offset == remote[0].base_offset > 0
    after = _local_segments(logs, "tiered", 0)
    local_only = sum(len(d) for b, d in after if b > manifest.highest_offset)
    total = sum(s.size for s in remote) + local_only
    assert total >= 5000  # no more removed than the rule asks
    assert total - remote[0].size < 5000  # and nothing more could go
    gone = {b for b, _ in before} - {s.base_offset for s in remote} - {b for b, _ in after}
    assert min(gone) == 0
    prefix = only(file_store, "tiered", 0).prefix
    listed = {i.key[len(prefix):].split("/")[0] for i in file_store.list(prefix)}
    listed -= {"manifest.json"}
    assert listed == {f"{s.base_offset:020d}-{s.attempt}" for s in remote}


def _uploaded_but_uncommitted(logs: Path, store: ObjectStore):  # type: ignore[no-untyped-def]
    """An attempt whose objects are in the store and whose commit has not been written."""
    part = LocalPartition(logs, "tiered", 0)
    cand = part.candidates()[0]
    uploader = Uploader(store, "slow:1:x")
    entry = uploader._entry(part, cand)
    files = uploader._put_objects(part, cand, entry)
    return part, cand, uploader, entry, files


@pytest.mark.parametrize("backend", ["file", "s3"])
def test_a_swept_attempt_never_commits(tmp_path, backend, request) -> None:
    """A sweep that claims an unnamed attempt (a slow uploader, past the grace) and an uploader
    that commits it cannot both win: the commit is refused, nothing names the deleted objects."""
    store = request.getfixturevalue("s3_store" if backend == "s3" else "file_store")
    logs = write_tiered(tmp_path / "logs")
    part, cand, uploader, entry, files = _uploaded_but_uncommitted(logs, store)
    rp = part.remote
    assert store.list(rp.prefix)  # the objects, and no manifest names them yet
    swept = sweep_orphans(store, rp, owner="other:2:y", grace_ms=0)
    assert swept.removed == len(files) and not store.list(rp.prefix + f"{cand.base_offset:020d}")
    assert uploader._commit(part, entry, files, time.monotonic()) is None
    manifest, _ = ManifestStore(store).load(rp)
    assert manifest.find(entry.attempt) is None and entry.attempt in manifest.abandoned
    part.close()


def test_an_attempt_older_than_the_limit_gives_itself_up(tmp_path, file_store) -> None:
    logs = write_tiered(tmp_path / "logs")
    part, _cand, uploader, entry, files = _uploaded_but_uncommitted(logs, file_store)
    long_ago = time.monotonic() - MAX_ATTEMPT_MS / 1000 - 1
    assert uploader._commit(part, entry, files, long_ago) is None
    assert uploader._commit(part, entry, files, time.monotonic()) is not None
    part.close()


def test_a_young_unnamed_attempt_waits_for_the_next_sweep(tmp_path, file_store) -> None:
    logs = write_tiered(tmp_path / "logs")
    part, _cand, uploader, entry, files = _uploaded_but_uncommitted(logs, file_store)
    swept = sweep_orphans(file_store, part.remote, owner="other:2:y", grace_ms=60_000)
    assert (swept.removed, swept.waiting) == (0, 1)
    committed = uploader._commit(part, entry, files, time.monotonic())
    assert committed is not None and committed.finished
    again = sweep_orphans(file_store, part.remote, owner="other:2:y", grace_ms=0)
    assert (again.removed, again.waiting) == (0, 0)  # named now: never a stray
    part.close()


@pytest.mark.parametrize("gone", ["all", "log"])
def test_a_segment_deleted_while_uploading_is_one_clear_error(
    tmp_path: Path, file_store: ObjectStore, gone: str
) -> None:
    """The partition's files removed under an upload (its topic deleted by removing its
    directory, or another sidecar's local retention): a TieringError naming the partition and
    the file (one log line), not "max_workers must be greater than 0" or a bare
    FileNotFoundError with a traceback; nothing committed, no object left."""
    from kafkatier.tiering.errors import TieringError

    logs = write_tiered(tmp_path / "logs")
    with LocalPartition(logs, "tiered", 0) as part:
        cand = part.candidates()[0]
        paths = cand.files().values() if gone == "all" else [cand.segment.log_path]
        for path in paths:
            path.unlink()
        with pytest.raises(TieringError, match=r"tiered-0: .*\.log is gone"):
            Uploader(file_store, "me:1:x").upload(part, cand)
        assert ManifestStore(file_store).load(part.remote)[1] is None
        assert file_store.list(part.remote.prefix) == []
