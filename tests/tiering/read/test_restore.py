"""Restore from the remote store: original bytes, verify-clean, resumable, offset/time starts."""

from __future__ import annotations

import filecmp
import os
import shutil
import time
from pathlib import Path

import pytest
from fault_proxy import FaultProxy
from tier_fixtures import T0, only, write_tiered

from kafkatier.cli.main import main
from kafkatier.storage.checkpoint.checkpoint_file import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    OffsetCheckpointFile,
)
from kafkatier.storage.checkpoint.metadata import META_PROPERTIES_FILE
from kafkatier.storage.errors import StorageError
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record
from kafkatier.storage.verify.paths import verify_paths
from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.errors import RemoteVerifyError
from kafkatier.tiering.metadata.manifest_store import ManifestStore
from kafkatier.tiering.read.restore import restore_topic
from kafkatier.tiering.sidecar.tierer import Tierer
from kafkatier.tiering.store.object_store import FsspecStore
from kafkatier.tiering.store.s3store import S3Store


@pytest.fixture
def uploaded(tmp_path: Path) -> tuple[Path, FsspecStore]:
    logs = write_tiered(tmp_path / "logs", partitions=2)
    store = FsspecStore(f"file://{tmp_path / 'remote'}")
    config = TieringConfig(log_dirs=(logs,), remote_url=store.url)
    assert Tierer(config, store).run_once().failures == 0
    return logs, store


def _same_files(source: Path, restored: Path, names: list[str]) -> None:
    for name in names:
        assert filecmp.cmp(source / name, restored / name, shallow=False), name


def test_restore_reproduces_every_uploaded_file_and_verifies(uploaded, tmp_path) -> None:
    logs, store = uploaded
    target = tmp_path / "restored"
    results = restore_topic(store, "tiered", target)
    assert [r.partition for r in results] == [0, 1]
    assert verify_paths([target]) == []
    for r in results:
        src, dst = logs / f"tiered-{r.partition}", target / f"tiered-{r.partition}"
        restored = sorted(p.name for p in dst.iterdir())
        segment_files = [n for n in restored if n.endswith((".log", ".index", ".timeindex",
                                                             ".txnindex", ".snapshot"))]
        assert any(n.endswith(".txnindex") for n in segment_files) or r.partition == 1
        _same_files(src, dst, segment_files)
        assert (dst / "partition.metadata").read_text() == (src / "partition.metadata").read_text()
    with LogDirectory(target) as log_dir:  # the engine opens it and keeps appending
        log = log_dir.get("tiered", 0)
        assert log is not None and log.config.remote_storage_enable
        assert log.log_end_offset == results[0].log_end_offset


def test_restore_from_offset_sets_log_start(uploaded, tmp_path) -> None:
    _, store = uploaded
    segs = ManifestStore(store).load(only(store, "tiered", 0))[0].finished()
    middle = segs[2].base_offset + 1
    target = tmp_path / "restored"
    [result] = restore_topic(store, "tiered", target, partitions=[0], from_offset=middle)
    assert result.log_start_offset == middle
    assert result.segments == len(segs) - 2
    assert sorted(p.name for p in (target / "tiered-0").glob("*.log"))[0] == \
        f"{segs[2].base_offset:020d}.log"
    starts = OffsetCheckpointFile(target / LOG_START_OFFSET_CHECKPOINT).read()
    assert starts == {("tiered", 0): middle}
    assert verify_paths([target]) == []
    # a whole restore into the same dir afterwards brings the earlier records back into view
    [whole] = restore_topic(store, "tiered", target, partitions=[0])
    assert whole.log_start_offset == 0 and whole.segments == len(segs)
    starts = OffsetCheckpointFile(target / LOG_START_OFFSET_CHECKPOINT).read()
    assert starts.get(("tiered", 0), 0) == 0
    with LogDirectory(target) as log_dir:
        log = log_dir.get("tiered", 0)
        assert log is not None and log.log_start_offset == 0
    assert verify_paths([target]) == []


def test_restore_from_timestamp(uploaded, tmp_path) -> None:
    _, store = uploaded
    segs = ManifestStore(store).load(only(store, "tiered", 1))[0].finished()
    ts = segs[3].max_timestamp
    [result] = restore_topic(store, "tiered", tmp_path / "r", partitions=[1], from_timestamp=ts)
    first = next(s for s in segs if s.max_timestamp >= ts)
    assert result.log_start_offset == first.base_offset
    assert verify_paths([tmp_path / "r"]) == []


def test_restore_resumes_and_rejects_corrupt_objects(uploaded, tmp_path) -> None:
    _, store = uploaded
    target = tmp_path / "restored"
    first = restore_topic(store, "tiered", target, partitions=[0])[0]
    victim = sorted((target / "tiered-0").glob("*.log"))[1]
    victim.unlink()  # an interrupted restore: one file missing
    again = restore_topic(store, "tiered", target, partitions=[0])[0]
    assert again.files_downloaded == 1
    assert again.files_skipped == first.files_downloaded - 1
    seg = ManifestStore(store).load(only(store, "tiered", 0))[0].finished()[0]
    key = f"{only(store, 'tiered', 0).prefix}{seg.base_offset:020d}-{seg.attempt}/log"
    data = bytearray(store.get_bytes(key))
    data[100] ^= 0xFF
    store.put_bytes(key, bytes(data))  # bit rot in the remote copy
    with pytest.raises(RemoteVerifyError):
        restore_topic(store, "tiered", tmp_path / "other", partitions=[0])


def test_restore_cli_against_real_s3(tmp_path, s3_store, s3_env) -> None:
    logs = write_tiered(tmp_path / "logs")
    conf = tmp_path / "sidecar.properties"
    conf.write_text(f"log.dirs={logs}\nremote.storage.url={s3_store.url}\n"
                    f"remote.storage.s3.endpoint.url={s3_env.endpoint}\n"
                    "remote.storage.s3.region=us-east-1\n")
    assert Tierer(TieringConfig.load(conf)).run_once().failures == 0
    target = tmp_path / "restored"
    assert main(["restore", "--config", str(conf), "--topic", "tiered", "--to", str(target),
                 "--quiet"]) == 0
    assert verify_paths([target]) == []
    names = [p.name for p in (target / "tiered-0").glob("*.log")]
    _same_files(logs / "tiered-0", target / "tiered-0", names)
    assert main(["restore", "--config", str(conf), "--topic", "nope", "--to", str(target),
                 "--quiet"]) == 1


def test_restore_cli_refuses_a_start_it_cannot_honour(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:  # fmt: skip
    """A negative --from-offset is a usage error; one past the remote copy's end restored
    nothing and said "0 segments" with exit 0: now one line saying so, exit 1."""
    logs = write_tiered(tmp_path / "logs")
    conf = tmp_path / "sidecar.properties"
    conf.write_text(f"log.dirs={logs}\nremote.storage.url=file://{tmp_path / 'remote'}\n")
    assert Tierer(TieringConfig.load(conf)).run_once().failures == 0
    command = ["restore", "--config", str(conf), "--topic", "tiered", "--to",
               str(tmp_path / "restored"), "--quiet", "--from-offset"]  # fmt: skip
    with pytest.raises(SystemExit) as usage:
        main([*command, "-5"])
    assert usage.value.code == 2 and "must be at least 0" in capsys.readouterr().err
    assert main([*command, "999999"]) == 1
    assert "--from-offset 999999 is past the remote copy of tiered-0" in capsys.readouterr().err


def _big_segments(path: Path, segments: int, mib: int) -> Path:
    """A tiered topic whose closed segments are ``mib`` MiB each: several S3 parts apiece."""
    value = os.urandom((1 << 20) - 200)
    with LogDirectory(path) as log_dir:
        log_dir.topic_configs.update("big", {"remote.storage.enable": "true", "retention.ms": "-1",
                                             "segment.bytes": str(mib << 20)}, "test")
        log = log_dir.get_or_create("big", 0)
        for i in range(segments * mib + 1):
            log.append(build_batch([Record(0, T0 + i, b"k%d" % i, value, ())]))
    return path


def test_multipart_segments_restore_through_resets_and_bit_flips(
    tmp_path, s3_store, s3_env
) -> None:
    """Segments of three 5 MiB parts, uploaded and restored by ranged parallel transfers; the
    download path meets a reset and two flipped bits (refused, fetched again)."""
    logs = _big_segments(tmp_path / "logs", segments=2, mib=11)
    config = TieringConfig(log_dirs=(logs,), remote_url=s3_store.url)
    assert Tierer(config, s3_store).run_once().total("uploaded_segments") == 2
    manifest = ManifestStore(s3_store).load(only(s3_store, "big", 0))[0]
    assert all(s.files["log"].etag.strip('"').endswith("-3") for s in manifest.finished())
    proxy = FaultProxy(int(s3_env.endpoint.rsplit(":", 1)[1]))
    try:
        proxy.inject("corrupt-down:3000000", "reset-down:2000000", "corrupt-down:5000")
        faulty = S3Store(s3_store.url, endpoint_url=proxy.endpoint, region="us-east-1",
                         multipart_threshold=5 << 20, multipart_chunksize=5 << 20,
                         read_timeout=2, connect_timeout=2, max_attempts=8)
        [result] = restore_topic(faulty, "big", tmp_path / "restored", threads=2)
    finally:
        proxy.close()
    assert "corrupt-down:3000000" in proxy.seen and not proxy.faults
    assert result.segments == 2
    assert verify_paths([tmp_path / "restored"]) == []
    names = [p.name for p in (tmp_path / "restored" / "big-0").iterdir() if p.suffix in
             (".log", ".index", ".timeindex", ".snapshot")]
    assert len([n for n in names if n.endswith(".log")]) == 2
    _same_files(logs / "big-0", tmp_path / "restored" / "big-0", names)


def test_restore_of_a_partition_without_remote_segments_into_a_new_dir(uploaded, tmp_path) -> None:
    """A partition whose remote segments all expired (the manifest remains, with its log start)
    restores as an empty log at that offset, into a log dir the restore creates, as a broker
    creates a missing one."""
    _, store = uploaded
    rp = only(store, "tiered", 1)

    def expire_all(manifest) -> bool:  # type: ignore[no-untyped-def]
        manifest.log_start_offset = manifest.highest_offset + 1
        manifest.segments = []
        return True

    start = ManifestStore(store).update(rp, expire_all).log_start_offset
    conf = tmp_path / "restore.properties"
    conf.write_text(f"log.dirs={tmp_path / 'logs'}\nremote.storage.url={store.url}\n")
    target = tmp_path / "not" / "yet" / "there"
    assert main(["restore", "--config", str(conf), "--topic", "tiered", "--to", str(target),
                 "--quiet"]) == 0  # fmt: skip
    assert verify_paths([target]) == []
    assert start > 0
    with LogDirectory(target) as log_dir:
        empty = log_dir.get("tiered", 1)
        assert empty is not None
        assert (empty.log_start_offset, empty.log_end_offset) == (start, start)
        assert log_dir.topic_id("tiered") == rp.topic_id


def test_a_failed_partition_leaves_the_restored_ones_openable(uploaded, tmp_path) -> None:
    """One partition's bad object fails the restore; the other, renamed into place, still gets
    the log dir's meta.properties and checkpoints (a folder no broker would open otherwise), and
    the next restore completes the failed one."""
    _, store = uploaded
    seg = ManifestStore(store).load(only(store, "tiered", 1))[0].finished()[0]
    key = f"{only(store, 'tiered', 1).prefix}{seg.base_offset:020d}-{seg.attempt}/log"
    good = store.get_bytes(key)
    store.put_bytes(key, good[:100] + bytes([good[100] ^ 0xFF]) + good[101:])
    target = tmp_path / "restored"
    with pytest.raises(RemoteVerifyError):
        restore_topic(store, "tiered", target)
    assert not (target / "tiered-1").exists()
    assert (target / META_PROPERTIES_FILE).exists()
    ends = OffsetCheckpointFile(target / RECOVERY_POINT_CHECKPOINT).read()
    assert list(ends) == [("tiered", 0)]
    assert verify_paths([target]) == []
    store.put_bytes(key, good)
    again = restore_topic(store, "tiered", target)
    assert [r.files_downloaded > 0 for r in again] == [False, True]
    assert verify_paths([target]) == []
    with LogDirectory(target) as log_dir:
        for result in again:
            log = log_dir.get("tiered", result.partition)
            assert log is not None and log.log_end_offset == result.log_end_offset > 0


def test_a_restore_in_place_keeps_a_higher_recovery_point(uploaded) -> None:
    """Completing a live partition whose local log runs past the remote copy does not move its
    recovery point back to the remote end (its flushed records would be recovered again)."""
    logs, store = uploaded
    before = OffsetCheckpointFile(logs / RECOVERY_POINT_CHECKPOINT).read()
    results = restore_topic(store, "tiered", logs)
    assert all(r.in_place and r.files_downloaded == 0 for r in results)
    assert all(r.log_end_offset < before[("tiered", r.partition)] for r in results)
    assert OffsetCheckpointFile(logs / RECOVERY_POINT_CHECKPOINT).read() == before


def test_every_object_of_a_new_restore_counts_as_downloaded(tmp_path) -> None:
    """Empty objects (the indexes of segments smaller than ``index.interval.bytes``) are
    downloads, not files already in place."""
    logs = write_tiered(tmp_path / "logs", overrides={"index.interval.bytes": "100000"})
    store = FsspecStore(f"file://{tmp_path / 'remote'}")
    config = TieringConfig(log_dirs=(logs,), remote_url=store.url)
    assert Tierer(config, store).run_once().failures == 0
    [result] = restore_topic(store, "tiered", tmp_path / "r")
    assert any(p.stat().st_size == 0 for p in (tmp_path / "r" / "tiered-0").glob("*.index"))
    assert result.files_skipped == 0 and result.files_downloaded > 0


def test_a_topic_with_the_longest_valid_name_uploads_and_restores(
    tmp_path, s3_store, s3_env
) -> None:
    """249 characters, Kafka's limit: the partition directory's name has 251, so every name
    kafkatier derives from it (staged, partial, settings file) must stay within 255 bytes. In
    S3 its folder ``<topic>-<topic id>`` is a key's part (a ``file://`` store cannot hold it:
    a directory name of 272 bytes)."""
    topic = "r" * 249
    logs = write_tiered(tmp_path / "logs", topic=topic, partitions=2)
    conf = tmp_path / "sidecar.properties"
    conf.write_text(f"log.dirs={logs}\nremote.storage.url={s3_store.url}\n"
                    f"remote.storage.s3.endpoint.url={s3_env.endpoint}\n"
                    "remote.storage.s3.region=us-east-1\n")  # fmt: skip
    assert Tierer(TieringConfig.load(conf)).run_once().failures == 0
    target = tmp_path / "restored"
    assert main(["restore", "--config", str(conf), "--topic", topic, "--to", str(target),
                 "--quiet"]) == 0  # fmt: skip
    assert verify_paths([target]) == []
    with LogDirectory(target) as log_dir:
        assert log_dir.partition_count(topic) == 2
        assert log_dir.config_for(topic).remote_storage_enable  # its settings restored


def test_a_restore_of_every_partition_records_the_topic_partition_count(tmp_path) -> None:
    """The topic's recorded partition count travels in the manifests: a restore of every
    partition records it in the new log dir, so a writer there refuses the topic once a
    partition directory goes missing (before, the restored topic had no count and a lost last
    partition made it a smaller topic); a restore of some partitions records none."""
    logs = write_tiered(tmp_path / "logs", partitions=3)
    with LogDirectory(logs) as log_dir:
        log_dir.create_partitions("tiered", 3)  # an older topic gets its count recorded
    store = FsspecStore(f"file://{tmp_path / 'remote'}")
    assert Tierer(TieringConfig(log_dirs=(logs,), remote_url=store.url), store).run_once(
    ).failures == 0  # fmt: skip
    assert {ManifestStore(store).load(only(store, "tiered", p))[0].topic_partitions
            for p in range(3)} == {3}  # fmt: skip
    some = tmp_path / "some"
    restore_topic(store, "tiered", some, partitions=[0, 1])
    with LogDirectory(some) as log_dir:
        assert log_dir.partition_count("tiered") == 2  # highest + 1: nothing recorded
    every = tmp_path / "every"
    restore_topic(store, "tiered", every)
    with LogDirectory(every) as log_dir:
        topic_id = log_dir.topic_id("tiered")
        assert topic_id is not None
        assert log_dir.topic_configs.recorded_partitions("tiered", topic_id) == 3
    shutil.rmtree(every / "tiered-2")
    with LogDirectory(every) as log_dir, pytest.raises(StorageError, match="partitions 2"):
        log_dir.partition_count("tiered")


@pytest.mark.parametrize("claimed", [10**9, 0, -3])
def test_a_manifest_naming_an_impossible_partition_count_records_none(
    uploaded, tmp_path, claimed
) -> None:
    """A manifest whose ``topic_partitions`` is wrong (hand-edited, or a topic that lost
    partitions) records no count and costs no walk over the partitions it names."""
    _, store = uploaded
    for p in range(2):
        def claim(manifest) -> bool:  # type: ignore[no-untyped-def]
            manifest.topic_partitions = claimed
            return True

        ManifestStore(store).update(only(store, "tiered", p), claim)
    target = tmp_path / "restored"
    started = time.monotonic()
    restore_topic(store, "tiered", target)
    assert time.monotonic() - started < 30
    with LogDirectory(target) as log_dir:
        topic_id = log_dir.topic_id("tiered")
        assert topic_id is not None
        assert log_dir.topic_configs.recorded_partitions("tiered", topic_id) is None
        assert log_dir.partition_count("tiered") == 2


def _committed(log_dir: Path, partition: int) -> list[tuple[int, bytes | None]]:
    from kafkatier.storage.arrow.log import read_arrow
    from kafkatier.storage.log.reader import IsolationLevel

    with LogDirectory(log_dir) as logs:
        log = logs.get("tiered", partition)
        assert log is not None
        table = read_arrow(log, isolation=IsolationLevel.READ_COMMITTED)
    return list(zip(table["offset"].to_pylist(), table["value"].to_pylist(), strict=True))


def test_a_damaged_or_missing_index_object_is_rebuilt_not_refused(uploaded, tmp_path) -> None:
    """An index object damaged or lost in the store made its partition unrestorable, although
    its records are all in the ``.log`` objects. They are left out and the partition's first
    open rebuilds them (as Kafka rebuilds lost indexes): the aborted transactions of the
    transaction index too, so read_committed still hides what was aborted."""
    logs, store = uploaded
    rp = only(store, "tiered", 0)
    segs = ManifestStore(store).load(rp)[0].finished()
    aborted = [s for s in segs if s.files["txnindex"].size > 0]
    assert aborted, "the fixture has aborted transactions"
    seg = aborted[0]
    prefix = f"{rp.prefix}{seg.base_offset:020d}-{seg.attempt}/"
    store.delete(prefix + "txnindex")
    store.put_bytes(prefix + "timeindex", b"\0" * 12)  # not what the manifest says
    target = tmp_path / "restored"
    [result] = restore_topic(store, "tiered", target, partitions=[0])
    assert result.restored
    directory = target / "tiered-0"
    assert not (directory / f"{seg.base_offset:020d}.index").exists()  # left to recovery
    source = [(o, v) for o, v in _committed(logs, 0) if o < result.log_end_offset]
    assert _committed(target, 0) == source
    assert verify_paths([target]) == []  # after the open that rebuilt them
    rebuilt = directory / f"{seg.base_offset:020d}.txnindex"
    assert rebuilt.read_bytes() == (logs / "tiered-0" / rebuilt.name).read_bytes()
