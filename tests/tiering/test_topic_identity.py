"""Topic identity across the tiers: a topic deleted and created again under its name (another
topic id, KIP-516) never gets the old topic's remote state, data or reads, and the old data is
kept, reported and deleted only when asked. Stores written before topic ids were part of the
remote layout keep working (tests/data/legacy-store, written by that release)."""

from __future__ import annotations

import hashlib
import shutil
import tarfile
from pathlib import Path

import pytest
from tier_fixtures import TIERED, append_more, fill, write_tiered

from kafkatier.cli.main import main
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.readonly import ReadOnlyPartition
from kafkatier.storage.verify.paths import verify_paths
from kafkatier.tiering.cleaner.clean_pass import RemotePass
from kafkatier.tiering.cleaner.retention import raise_log_start
from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.errors import TopicIdMismatchError
from kafkatier.tiering.metadata.identity import RemotePartition, topic_id_of
from kafkatier.tiering.metadata.manifest import manifest_key
from kafkatier.tiering.metadata.manifest_store import ManifestStore
from kafkatier.tiering.read.remote_reader import joined_batches
from kafkatier.tiering.read.restore import restore_topic
from kafkatier.tiering.sidecar.status import collect_status
from kafkatier.tiering.sidecar.tierer import Tierer
from kafkatier.tiering.store.object_store import FsspecStore

LEGACY = Path(__file__).resolve().parents[1] / "data" / "legacy-store" / "legacy-store.tar.gz"


def files_of(root: Path) -> dict[str, str]:
    """Every file under ``root`` by relative path, with the SHA-256 of its bytes."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}  # fmt: skip


def local_batches(logs: Path, partition: int = 0) -> list[tuple[int, bytes]]:
    with ReadOnlyPartition(logs, "tiered", partition) as part:
        return [(b.base_offset, bytes(b.buffer)) for s in part.segments for b in s.batches()]


def tier(logs: Path, store: FsspecStore) -> TieringConfig:
    config = TieringConfig(log_dirs=(logs,), remote_url=store.url, orphan_grace_ms=0)
    assert Tierer(config, store).run_once().failures == 0
    return config


@pytest.fixture
def recreated(tmp_path: Path):
    """``tiered`` tiered, its remote log start moved past offset 0 (the old topic's
    DeleteRecords), then deleted and created again with less data: another topic id, offsets
    overlapping the old ones."""
    logs = write_tiered(tmp_path / "logs", steps=40)
    store = FsspecStore(f"file://{tmp_path / 'remote'}")
    tier(logs, store)
    (old,) = ManifestStore(store).partitions()
    raise_log_start(ManifestStore(store), old, 50)
    shutil.rmtree(logs / "tiered-0")
    write_tiered(logs, steps=14)
    return logs, store, old


def test_a_topic_recreated_while_its_writer_runs_keeps_its_first_segments(tmp_path: Path) -> None:
    """The old topic's log start stays in the log dir's checkpoint until a writer rewrites it:
    a sidecar pass between the new partition's creation and its writer's first checkpoint
    took the old start (50) for the new topic and deleted its first segments, unuploaded.
    The writer now drops the old entries before the new directory appears."""
    logs = write_tiered(tmp_path / "logs", steps=40)
    store = FsspecStore(f"file://{tmp_path / 'remote'}")
    tier(logs, store)
    (old,) = ManifestStore(store).partitions()
    raise_log_start(ManifestStore(store), old, 50)
    tier(logs, store)  # the local side follows: the checkpoint says 50
    starts = logs / "log-start-offset-checkpoint"
    assert "tiered 0 50" in starts.read_text().splitlines()
    shutil.rmtree(logs / "tiered-0")  # the topic deleted, as here: its directory removed
    with LogDirectory(logs) as writer:
        config = writer.topic_configs.update("tiered", TIERED, "test")  # as produce does
        writer.create_partitions("tiered", 1)
        writer.logs[("tiered", 0)].config = config
        fill(writer.logs[("tiered", 0)], 30)  # the new topic, past offset 50
        new = [s.base_offset for s in writer.logs[("tiered", 0)].segments]
        assert new[0] == 0 and new[-1] > 50
        assert "tiered 0 50" not in starts.read_text().splitlines()
        tier(logs, store)  # a pass while the writer holds the partition open
        with ReadOnlyPartition(logs, "tiered", 0) as part:
            assert part.log_start_offset == 0
            assert [s.base_offset for s in part.segments] == new


def test_the_sidecar_leaves_a_recreated_topic_and_the_old_remote_data_alone(recreated) -> None:
    logs, store, old = recreated
    new_id = topic_id_of(logs / "tiered-0")
    assert new_id and new_id != old.topic_id
    old_manifest = store.get_bytes(manifest_key(old))
    local_before = files_of(logs / "tiered-0")
    config = tier(logs, store)
    # nothing of the old incarnation applied: no local file deleted, the log start not moved
    after = files_of(logs / "tiered-0")
    assert {k: v for k, v in after.items() if k in local_before} == local_before
    with ReadOnlyPartition(logs, "tiered", 0) as part:
        assert part.log_start_offset == 0
    assert store.get_bytes(manifest_key(old)) == old_manifest  # the old data untouched
    new = RemotePartition.of("tiered", 0, new_id)
    assert new.prefix == f"tiered-{new_id}/0/"
    manifest, _ = ManifestStore(store).load(new)
    assert manifest.log_start_offset == 0 and manifest.finished()
    # reads join the new incarnation's remote copy with its local files, never the old one's
    assert [(b.base_offset, bytes(b.buffer)) for b in joined_batches(store, logs, "tiered", 0, 0)
            ] == local_batches(logs)  # fmt: skip
    status = {(s.topic_id, s.stale) for s in collect_status(config, store)}
    assert status == {(new_id, False), (old.topic_id, True)}
    moved = RemotePartition("tiered", 0, "A" * 22)  # the old manifest where another id's goes
    store.put_bytes(manifest_key(moved), old_manifest)
    with pytest.raises(TopicIdMismatchError, match=f"topic id {old.topic_id}, not A"):
        ManifestStore(store).load(moved)
    with pytest.raises(TopicIdMismatchError):
        ManifestStore(store).update(moved, lambda m: True)


def test_restore_takes_one_incarnation_and_never_mixes_two(recreated, tmp_path: Path) -> None:
    logs, store, old = recreated
    tier(logs, store)
    new_id = topic_id_of(logs / "tiered-0")
    fresh = tmp_path / "fresh"
    with pytest.raises(TopicIdMismatchError, match="2 incarnations of tiered"):
        restore_topic(store, "tiered", fresh)  # which one? refused before writing anything
    assert not fresh.exists() or not any(fresh.iterdir())
    live = files_of(logs)
    with pytest.raises(TopicIdMismatchError, match="would mix two topics"):
        restore_topic(store, "tiered", logs, topic_id=old.topic_id)
    assert files_of(logs) == live  # the live topic untouched
    (done,) = restore_topic(store, "tiered", fresh, topic_id=old.topic_id)
    assert topic_id_of(fresh / "tiered-0") == old.topic_id and done.log_start_offset == 50
    assert verify_paths([fresh]) == []
    newer = tmp_path / "newer"
    (done,) = restore_topic(store, "tiered", newer, topic_id=new_id)
    assert topic_id_of(newer / "tiered-0") == new_id
    restored = dict(local_batches(newer))
    assert restored and all(restored[o] == b for o, b in local_batches(logs) if o in restored)


def test_delete_stale_removes_only_the_old_incarnation(recreated) -> None:
    logs, store, old = recreated
    config = tier(logs, store)
    new_id = topic_id_of(logs / "tiered-0")
    kept = RemotePass(config, store).run()  # without the flag: reported, not compacted, kept
    assert all(o.stale_topic_id is None for o in kept) and store.list(old.prefix)
    segments = len(ManifestStore(store).load(old)[0].segments)
    outcomes = RemotePass(config, store).run(delete_stale=True)
    assert [(o.stale_topic_id, o.stale_segments_deleted, o.error) for o in outcomes] == [
        (old.topic_id, segments, None)]
    assert store.list(old.prefix) == []
    assert [s.topic_id for s in collect_status(config, store)] == [new_id]
    assert RemotePass(config, store).run(delete_stale=True) == []  # nothing left to delete


@pytest.fixture
def legacy(tmp_path: Path):
    """A log dir and the store its sidecar wrote, by the release before topic ids."""
    with tarfile.open(LEGACY) as tar:
        tar.extractall(tmp_path, filter="data")
    return tmp_path / "logs", FsspecStore(f"file://{tmp_path / 'remote'}")


def test_a_store_written_before_topic_ids_keeps_working(legacy, tmp_path: Path) -> None:
    logs, store = legacy
    ids = {p: topic_id_of(logs / f"tiered-{p}") for p in (0, 1)}
    assert ManifestStore(store).partitions() == [
        RemotePartition("tiered", p, ids[p], legacy=True) for p in (0, 1)]
    append_more(logs, "tiered", 0, 20, start=500)  # new segments to upload
    config = TieringConfig(log_dirs=(logs,), remote_url=store.url, orphan_grace_ms=0)
    result = Tierer(config, store).run_once()
    assert result.failures == 0 and result.total("uploaded_segments") > 0
    assert store.list_prefixes("") == ["tiered-0/", "tiered-1/"]  # used in place
    manifest, _ = ManifestStore(store).load(RemotePartition("tiered", 0, ids[0], legacy=True))
    with ReadOnlyPartition(logs, "tiered", 0) as part:
        closed = [s.base_offset for s in part.segments[:-1]]
    assert [s.base_offset for s in manifest.finished()] == closed
    assert [(b.base_offset, bytes(b.buffer)) for b in joined_batches(store, logs, "tiered", 0, 0)
            ] == local_batches(logs)  # fmt: skip
    assert not any(s.stale for s in collect_status(config, store))
    results = restore_topic(store, "tiered", tmp_path / "restored")
    assert [r.partition for r in results] == [0, 1]
    assert verify_paths([tmp_path / "restored"]) == []
    assert topic_id_of(tmp_path / "restored" / "tiered-0") == ids[0]


def test_a_topic_recreated_over_a_store_written_before_topic_ids(legacy) -> None:
    logs, store = legacy
    old_ids = {topic_id_of(logs / f"tiered-{p}") for p in (0, 1)}
    before = files_of(Path(store.url.removeprefix("file://")))
    for p in (0, 1):
        shutil.rmtree(logs / f"tiered-{p}")
    write_tiered(logs, partitions=2, steps=14)
    new_id = topic_id_of(logs / "tiered-0")
    assert new_id not in old_ids
    config = tier(logs, store)
    remote = Path(store.url.removeprefix("file://"))
    assert {k: v for k, v in files_of(remote).items() if k in before} == before
    folders = ["tiered-0/", "tiered-1/", f"tiered-{new_id}/"]
    assert sorted(store.list_prefixes("")) == sorted(folders)  # an id may start with "0"
    stale = sorted((s.partition, s.topic_id) for s in collect_status(config, store) if s.stale)
    assert stale == [(0, *old_ids), (1, *old_ids)]


def test_the_commands_name_the_incarnations(recreated, tmp_path: Path, capsys) -> None:
    logs, store, old = recreated
    tier(logs, store)
    conf = tmp_path / "sidecar.properties"
    conf.write_text(f"log.dirs={logs}\nremote.storage.url={store.url}\n")
    assert main(["status", "--config", str(conf)]) == 0
    out = capsys.readouterr().out
    assert f"tiered-0 (stale: topic id {old.topic_id})" in out
    code = main(["restore", "--config", str(conf), "--topic", "tiered", "--to",
                 str(tmp_path / "fresh"), "--quiet"])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1 and "choose one with --topic-id" in err[0], err
    assert main(["restore", "--config", str(conf), "--topic", "tiered", "--to",
                 str(tmp_path / "fresh"), "--topic-id", old.topic_id, "--quiet"]) == 0
    assert topic_id_of(tmp_path / "fresh" / "tiered-0") == old.topic_id
    assert main(["clean", str(logs), "--delete-stale"]) == 2  # it goes with --remote
    assert main(["clean", "--remote", "--config", str(conf), "--delete-stale"]) == 0
    assert f"[remote, stale topic id {old.topic_id}]:" in capsys.readouterr().out
    assert store.list(old.prefix) == []


def test_two_log_dirs_sharing_one_store_keep_apart(tmp_path: Path) -> None:
    """Two deployments with a topic of the same name (each its own id) on one remote prefix:
    each tiers, reads and restores its own; to each, the other's data is stale, never used."""
    store = FsspecStore(f"file://{tmp_path / 'remote'}")
    here, there = write_tiered(tmp_path / "a", steps=30), write_tiered(tmp_path / "b", steps=20)
    ids = {topic_id_of(here / "tiered-0"), topic_id_of(there / "tiered-0")}
    assert len(ids) == 2
    config_here, _ = tier(here, store), tier(there, store)
    assert len(ManifestStore(store).partitions()) == 2
    for logs in (here, there):
        assert [(b.base_offset, bytes(b.buffer)) for b in joined_batches(store, logs, "tiered", 0,
                0)] == local_batches(logs)  # fmt: skip
    assert {(s.topic_id, s.stale) for s in collect_status(config_here, store)} == {
        (topic_id_of(here / "tiered-0"), False), (topic_id_of(there / "tiered-0"), True)}


def test_more_partitions_and_a_log_dir_moved_keep_the_topic(tmp_path: Path) -> None:
    """A topic whose partition count grew keeps one id, so one remote folder; a log dir
    restored elsewhere keeps it too, and its sidecar carries on in the same folder."""
    store = FsspecStore(f"file://{tmp_path / 'remote'}")
    logs = write_tiered(tmp_path / "logs", steps=30)
    tier(logs, store)
    append_more(logs, "tiered", 1, 30, start=0)  # a partition added to the topic
    tier(logs, store)
    topic_id = topic_id_of(logs / "tiered-0")
    assert topic_id_of(logs / "tiered-1") == topic_id
    assert ManifestStore(store).partitions() == [
        RemotePartition("tiered", p, topic_id) for p in (0, 1)]
    moved = tmp_path / "moved"
    restore_topic(store, "tiered", moved)
    append_more(moved, "tiered", 0, 30, start=900)
    result = Tierer(TieringConfig(log_dirs=(moved,), remote_url=store.url), store).run_once()
    assert result.failures == 0 and result.total("uploaded_segments") > 0
    assert [rp.topic_id for rp in ManifestStore(store).partitions()] == [topic_id] * 2


def test_a_deleted_topics_remote_data_is_deleted_when_it_is_named(tmp_path: Path) -> None:
    """A topic deleted and not created again: its remote data was kept for ever, and no command
    removed it. Only naming it does (a log dir lost with its disk looks the same), and only
    where no log dir holds the topic."""
    logs = write_tiered(tmp_path / "logs", steps=40)
    store = FsspecStore(f"file://{tmp_path / 'remote'}")
    config = tier(logs, store)
    (rp,) = ManifestStore(store).partitions()
    segments = len(ManifestStore(store).load(rp)[0].segments)
    assert RemotePass(config, store).run("tiered", delete_stale=True) == []  # still held here
    shutil.rmtree(logs / "tiered-0")
    assert RemotePass(config, store).run(delete_stale=True) == []  # not named: kept
    assert store.list(rp.prefix)
    outcomes = RemotePass(config, store).run("tiered", delete_stale=True)
    assert [(o.stale_topic_id, o.stale_segments_deleted, o.error) for o in outcomes] == [
        (rp.topic_id, segments, None)]
    assert store.list(rp.prefix) == [] and collect_status(config, store) == []
