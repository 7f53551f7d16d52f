"""Local retention never deletes local data on the strength of a bad manifest or a bad remote
copy: a manifest that does not parse, or one naming a ``.log`` object that is missing or differs
from what it recorded (size, entity tag), fails the partition's pass naming the object, and every
local segment stays. With the remote copy sound again, the next pass deletes as configured."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest
from tier_fixtures import only, write_tiered

from kafkatier.storage.config.topic_files import TopicConfigStore
from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.copy.upload import Uploader
from kafkatier.tiering.metadata.local import LocalPartition
from kafkatier.tiering.metadata.manifest import manifest_key, object_key
from kafkatier.tiering.metadata.manifest_copy import COPY_NAME, read_copy
from kafkatier.tiering.metadata.manifest_store import ManifestStore
from kafkatier.tiering.sidecar.tierer import Tierer
from kafkatier.tiering.store.object_store import FsspecStore, ObjectStore


def _first_log_key(store: ObjectStore) -> str:
    rp = only(store, "tiered", 0)
    manifest, _ = ManifestStore(store).load(rp)
    return object_key(rp, manifest.finished()[0], "log")


BAD: dict[str, Callable[[ObjectStore], str]] = {}  # the fault: damage the store, return the key


def _bad(name: str) -> Callable[[Callable[[ObjectStore], str]], Callable[[ObjectStore], str]]:
    def register(fault: Callable[[ObjectStore], str]) -> Callable[[ObjectStore], str]:
        BAD[name] = fault
        return fault

    return register


@_bad("manifest does not parse")
def _garbage_manifest(store: ObjectStore) -> str:
    key = manifest_key(only(store, "tiered", 0))
    store.put_bytes(key, b'{"version": 1, "segments": [')
    return key


@_bad("segment object missing")
def _missing_object(store: ObjectStore) -> str:
    key = _first_log_key(store)
    store.delete(key)
    return key


@_bad("segment object replaced")
def _replaced_object(store: ObjectStore) -> str:
    key = _first_log_key(store)
    store.put_bytes(key, store.get_bytes(key)[:-100])
    return key


def _local_logs(logs: Path) -> list[str]:
    return sorted(p.name for p in (logs / "tiered-0").glob("*.log"))


@pytest.mark.parametrize("fault", sorted(BAD))
def test_local_segments_stay_when_the_remote_side_is_bad(
    tmp_path: Path, fault: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kafkatier")  # not DEBUG: a traceback is --debug's
    logs = write_tiered(tmp_path / "logs")
    store = FsspecStore(f"file://{tmp_path / 'remote'}")
    config = TieringConfig(log_dirs=(logs,), remote_url=store.url, threads=1)
    assert Tierer(config, store).run_once().failures == 0  # uploaded, all local data kept
    before = _local_logs(logs)
    assert len(before) > 2
    key = BAD[fault](store)
    TopicConfigStore(logs).update("tiered", {"local.retention.bytes": "1"}, source="test")
    result = Tierer(config, store).run_once()
    assert result.failures == 1
    error = result.partitions[0].error or ""
    assert key in error, error
    assert _local_logs(logs) == before
    failed = [r for r in caplog.records if r.levelname == "ERROR"]
    assert failed and not any(r.exc_info for r in failed)  # one line, no traceback



@pytest.mark.parametrize("bad", [b'{"version": 1, "segments": [', b"[1]", "other partition"])
def test_a_bad_manifest_in_the_store_leaves_the_good_copy(tmp_path: Path, bad: object) -> None:
    """The partition directory's copy of its manifest is what the errors point to for setting
    the store right: a pass that reads a manifest damaged or replaced in the store (which it
    refuses) must not overwrite the copy with it."""
    logs = write_tiered(tmp_path / "logs", partitions=2)
    store = FsspecStore(f"file://{tmp_path / 'remote'}")
    config = TieringConfig(log_dirs=(logs,), remote_url=store.url, threads=1)
    assert Tierer(config, store).run_once().failures == 0
    key = manifest_key(only(store, "tiered", 0))
    good = read_copy(logs / "tiered-0", key)
    assert good is not None and good[0] == store.get_bytes(key)
    other = store.get_bytes(manifest_key(only(store, "tiered", 1)))
    store.put_bytes(key, other if bad == "other partition" else bad)  # type: ignore[arg-type]
    result = Tierer(config, store).run_once()
    assert result.failures == 1
    assert read_copy(logs / "tiered-0", key, superseded=True) == good
    assert read_copy(logs / "tiered-0", key) is None  # no longer what the store holds


def test_a_deleted_manifest_does_not_make_its_segments_strays(tmp_path: Path) -> None:
    """The manifest deleted by a hand or a lifecycle rule: a later pass (a new process, so
    only the partition directory's copy knows it) must not sweep the segments' objects as
    strays of unnamed attempts (they were the only copy of what local retention deleted), nor
    start a new manifest; the partition fails naming the manifest, and everything stays. Put
    back, the next pass goes on as before."""
    logs = write_tiered(tmp_path / "logs")
    store = FsspecStore(f"file://{tmp_path / 'remote'}")
    config = TieringConfig(log_dirs=(logs,), remote_url=store.url, threads=1,
                           orphan_grace_ms=0)  # fmt: skip
    assert Tierer(config, store).run_once().failures == 0
    key = manifest_key(only(store, "tiered", 0))
    objects = sorted(i.key for i in store.list("") if i.key != key)
    assert objects
    saved = store.get_bytes(key)
    store.delete(key)
    before = _local_logs(logs)
    result = Tierer(config, store).run_once()
    assert result.failures == 1
    error = result.partitions[0].error or ""
    assert key in error and "gone from the store" in error, error
    assert sorted(i.key for i in store.list("")) == objects
    assert _local_logs(logs) == before
    store.put_bytes(key, saved)
    assert Tierer(config, store).run_once().failures == 0
    assert set(objects) <= {i.key for i in store.list("")}


def test_a_manifest_lost_with_its_copy_does_not_make_its_segments_strays(
    tmp_path: Path,
) -> None:
    """The manifest deleted from the store and the partition directory's copy of it removed too
    (its docstring calls it a cache): no process knows the manifest any more, but objects of
    segments the local log no longer holds (local retention deleted them against it) can only
    come from one. They were swept as strays of unnamed attempts, and a new manifest started
    past them: the records only they held were lost. Now the pass fails naming the manifest."""
    logs = write_tiered(tmp_path / "logs", overrides={"local.retention.bytes": "1"})
    store = FsspecStore(f"file://{tmp_path / 'remote'}")
    config = TieringConfig(log_dirs=(logs,), remote_url=store.url, threads=1,
                           orphan_grace_ms=0)  # fmt: skip
    assert Tierer(config, store).run_once().failures == 0
    before = _local_logs(logs)
    assert before[0] != f"{0:020d}.log"  # local retention deleted the first segments
    key = manifest_key(only(store, "tiered", 0))
    saved = store.get_bytes(key)
    objects = sorted(i.key for i in store.list("") if i.key != key)
    store.delete(key)
    (logs / "tiered-0" / COPY_NAME).unlink()
    result = Tierer(config, store).run_once()
    assert result.failures == 1
    error = result.partitions[0].error or ""
    assert key in error and "only copy" in error, error
    assert sorted(i.key for i in store.list("")) == objects
    assert _local_logs(logs) == before
    store.put_bytes(key, saved)
    assert Tierer(config, store).run_once().failures == 0
    assert set(objects) <= {i.key for i in store.list("")}


def test_a_first_upload_that_died_uncommitted_is_swept_and_done_again(tmp_path: Path) -> None:
    """Without any manifest, the objects of an upload that died before its commit are of
    segments the local log still holds: strays, swept, and the segments uploaded anew."""
    logs = write_tiered(tmp_path / "logs")
    store = FsspecStore(f"file://{tmp_path / 'remote'}")
    with LocalPartition(logs, "tiered", 0) as part:
        cand = part.candidates()[0]
        uploader = Uploader(store, "dead:1:x")
        died = uploader._put_objects(part, cand, uploader._entry(part, cand))
        rp = part.remote
    assert died and ManifestStore(store).load(rp)[1] is None
    config = TieringConfig(log_dirs=(logs,), remote_url=store.url, threads=1,
                           orphan_grace_ms=0)  # fmt: skip
    result = Tierer(config, store).run_once()
    assert result.failures == 0 and result.partitions[0].orphans_removed == len(died)
    manifest, _ = ManifestStore(store).load(rp)
    assert manifest.finished()[0].base_offset == cand.base_offset
    named = {object_key(rp, s, kind) for s in manifest.finished() for kind in s.files}
    assert {i.key for i in store.list(rp.prefix)} == named | {manifest_key(rp)}


def test_a_local_log_cut_back_below_the_remote_copy_is_not_uploaded(tmp_path: Path) -> None:
    """The newest local segments removed by hand and their offsets written again with other
    records: a new segment that starts within the remote copy's range and ends past it would
    overlap a FINISHED entry of the old records (a restore then mixed the two histories). The
    pass fails the partition naming the segment, and the manifest stays as it was."""
    from kafkatier.storage.log.directory import LogDirectory
    from kafkatier.storage.record.builder import build_batch
    from kafkatier.storage.record.record import Record

    logs = write_tiered(tmp_path / "logs")
    store = FsspecStore(f"file://{tmp_path / 'remote'}")
    config = TieringConfig(log_dirs=(logs,), remote_url=store.url, threads=1)
    assert Tierer(config, store).run_once().failures == 0
    rp = only(store, "tiered", 0)
    before, _ = ManifestStore(store).load(rp)
    highest = before.highest_offset
    bases = sorted(int(p.stem) for p in (logs / "tiered-0").glob("*.log"))
    cut = [b for b in bases if b > 0][-3]  # the last two closed segments and the active one
    for path in (logs / "tiered-0").iterdir():
        if path.stem.isdigit() and int(path.stem) >= cut:
            path.unlink()
    with LogDirectory(logs) as log_dir:
        log = log_dir.get_or_create("tiered", 0)
        assert log.log_end_offset == cut
        while log.log_end_offset <= highest + 50:  # larger records: other segment boundaries
            at = log.log_end_offset
            log.append(build_batch([Record(i, 1_700_000_000_000, b"new", b"n" * 333)
                                    for i in range(2)]))  # fmt: skip
            assert log.log_end_offset == at + 2
        log.roll()
    result = Tierer(config, store).run_once()
    assert result.failures == 1
    error = result.partitions[0].error or ""
    assert "changed below what was tiered" in error, error
    after, _ = ManifestStore(store).load(rp)
    assert [(s.base_offset, s.end_offset) for s in after.finished()] == [
        (s.base_offset, s.end_offset) for s in before.finished()
    ]
