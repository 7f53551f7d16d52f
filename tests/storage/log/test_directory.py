"""LogDirectory: the log dir's root files (kafka-format.md §8) and clean/unclean reopen:
meta.properties, recovery-point and log-start checkpoints in Kafka's text format, the
clean-shutdown marker and partition.metadata topic ids."""

from __future__ import annotations

import json
import re
import shutil
import threading
from pathlib import Path

import pytest
from crash_writer import check_partition, read_partition

from kafkatier.storage.checkpoint.checkpoint_file import OffsetCheckpointFile
from kafkatier.storage.checkpoint.leader_epoch import LEADER_EPOCH_CHECKPOINT, LeaderEpochFileCache
from kafkatier.storage.checkpoint.metadata import MetaProperties
from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.config.topic_files import TopicConfigStore
from kafkatier.storage.errors import CheckpointError, ConfigError
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.producer.snapshot import list_snapshot_files
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record

NOW = 1_700_000_000_000
UUID = re.compile(r"[A-Za-z0-9_-]{22}")


def small(_topic: str) -> LogConfig:
    return LogConfig(segment_bytes=600, segment_index_bytes=4096)


def batch(n: int) -> bytes:
    return build_batch([Record(i, NOW + i, None, b"x" * 50) for i in range(n)])


def checkpoint_lines(path: Path) -> tuple[list[str], set[str]]:
    """(version and count lines, entry lines): entry order is unspecified (Kafka's map order)."""
    lines = path.read_text().split("\n")
    assert lines[-1] == "", "every line ends with a newline"
    return lines[:2], set(lines[2:-1])


def test_meta_properties_is_created_once(tmp_path: Path) -> None:
    LogDirectory(tmp_path).close()
    path = tmp_path / "meta.properties"
    meta = MetaProperties.read(path)
    assert (meta.version, meta.node_id) == (1, 0)
    assert meta.cluster_id is not None and UUID.fullmatch(meta.cluster_id)
    text = path.read_text()
    assert text.startswith("#") and "version=1\n" in text and "node.id=0\n" in text
    LogDirectory(tmp_path).close()
    assert path.read_text() == text


def test_checkpoints_are_written_on_flush_and_close(tmp_path: Path) -> None:
    log_dir = LogDirectory(tmp_path, config_for=small)
    t0, t1, u0 = (log_dir.get_or_create(*tp) for tp in (("t", 0), ("t", 1), ("u", 0)))
    for _ in range(5):
        t0.append(batch(2))
    u0.append(batch(3))
    recovery = tmp_path / "recovery-point-offset-checkpoint"
    assert not recovery.exists()
    log_dir.flush()
    assert checkpoint_lines(recovery) == (["0", "3"], {"t 0 10", "t 1 0", "u 0 3"})
    assert (tmp_path / "log-start-offset-checkpoint").read_text() == "0\n0\n"
    t1.append(batch(4))  # not flushed: the checkpoint still says 0
    assert checkpoint_lines(recovery)[1] == {"t 0 10", "t 1 0", "u 0 3"}
    log_dir.close()
    assert checkpoint_lines(recovery)[1] == {"t 0 10", "t 1 4", "u 0 3"}
    assert t0.recovery_point == 10


def test_clean_shutdown_marker(tmp_path: Path) -> None:
    marker = tmp_path / ".kafka_cleanshutdown"
    log_dir = LogDirectory(tmp_path, config_for=small)
    assert not log_dir.had_clean_shutdown
    log_dir.get_or_create("t", 0).append(batch(2))
    assert not marker.exists()
    log_dir.close()
    assert json.loads(marker.read_text()) == {"version": 0, "brokerEpoch": -1}
    reopened = LogDirectory(tmp_path, config_for=small)
    assert reopened.had_clean_shutdown
    assert not marker.exists()  # removed at open: a crash from now on is unclean
    reopened.get("t", 0).append(batch(1))  # type: ignore[union-attr]
    for log in reopened:  # a crash: handles gone, nothing written
        for segment in log.segments:
            segment.close_handlers()
    crashed = LogDirectory(tmp_path, config_for=small)
    assert not crashed.had_clean_shutdown
    log = crashed.get("t", 0)
    assert log is not None and log.log_end_offset == 3
    check_partition(log)
    crashed.close()


def _flush_threads() -> int:
    return sum(t.name.startswith("log-flush") for t in threading.enumerate())


def test_opening_syncs_nothing_and_runs_in_the_callers_thread(tmp_path: Path) -> None:
    """Neither a clean open nor a recovery syncs anything as it opens (a recovery's producer
    snapshots wait for the log's next flush, as a roll's), so the partitions open in the
    caller's thread: from the flush threads they only queued for the GIL (1,024 partitions
    took twice as long)."""
    with LogDirectory(tmp_path, config_for=small) as log_dir:
        log_dir.create_partitions("t", 20)
        for p in range(20):
            log_dir.get("t", p).append(batch(p % 5 + 1))  # type: ignore[union-attr]
    before = _flush_threads()
    reopened = LogDirectory(tmp_path, config_for=small)
    assert reopened.had_clean_shutdown and _flush_threads() == before
    assert {log.partition: log.log_end_offset for log in reopened} == {
        p: p % 5 + 1 for p in range(20)
    }
    for log in reopened:
        log.append(batch(1))
        for segment in log.segments:  # a crash: handles gone, nothing written
            segment.close_handlers()
    reopened._flusher.stop()
    crashed = LogDirectory(tmp_path, config_for=small)
    assert not crashed.had_clean_shutdown and _flush_threads() == before
    assert {log.partition: log.log_end_offset for log in crashed} == {
        p: p % 5 + 2 for p in range(20)
    }
    for log in crashed:  # the recovery's snapshot at the end, for the next flush to sync
        check_partition(log)
        end = log.directory / f"{log.log_end_offset:020d}.snapshot"
        assert log.durability.unsynced_files == [end]
    crashed.flush_data()
    assert all(not log.durability.unsynced_files for log in crashed)
    crashed.close()


def test_leaving_with_an_exception_writes_no_marker(tmp_path: Path) -> None:
    try:
        with LogDirectory(tmp_path, config_for=small) as log_dir:
            log_dir.get_or_create("t", 0).append(batch(2))
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert not (tmp_path / ".kafka_cleanshutdown").exists()
    with LogDirectory(tmp_path, config_for=small) as log_dir:
        assert not log_dir.had_clean_shutdown
        assert log_dir.get("t", 0).log_end_offset == 2  # type: ignore[union-attr]
    assert (tmp_path / ".kafka_cleanshutdown").exists()


def test_partition_metadata_topic_id_is_shared_by_a_topics_partitions(tmp_path: Path) -> None:
    log_dir = LogDirectory(tmp_path)
    for tp in (("t", 0), ("t", 1), ("u", 0)):
        log_dir.get_or_create(*tp)
    texts = {
        name: (tmp_path / name / "partition.metadata").read_text() for name in ("t-0", "t-1", "u-0")
    }
    match = re.fullmatch(r"version: 0\ntopic_id: ([A-Za-z0-9_-]{22})", texts["t-0"])
    assert match, "two lines, no trailing newline"
    assert texts["t-1"] == texts["t-0"] != texts["u-0"]
    log_dir.close()
    reopened = LogDirectory(tmp_path)
    reopened.get_or_create("t", 2)
    assert (tmp_path / "t-2" / "partition.metadata").read_text() == texts["t-0"]
    assert reopened.topic_id("t") == match.group(1)
    assert reopened.topics() == {"t": 3, "u": 1}
    reopened.close()


def test_log_start_offset_checkpoint_round_trips(tmp_path: Path) -> None:
    log_dir = LogDirectory(tmp_path, config_for=small)
    log_dir.get_or_create("t", 0).append(batch(5))
    log_dir.close()
    (tmp_path / "log-start-offset-checkpoint").write_text("0\n1\nt 0 3\n")  # DeleteRecords
    reopened = LogDirectory(tmp_path, config_for=small)
    log = reopened.get("t", 0)
    assert log is not None and log.log_start_offset == 3
    reopened.close()
    assert (tmp_path / "log-start-offset-checkpoint").read_text() == "0\n1\nt 0 3\n"


def test_recovery_starts_at_the_checkpointed_recovery_point(tmp_path: Path) -> None:
    log_dir = LogDirectory(tmp_path, config_for=small)
    log = log_dir.get_or_create("t", 0)
    for _ in range(12):
        log.append(batch(3))
    log_dir.flush()
    for _ in range(3):
        log.append(batch(3))
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 3
    for segment in log.segments:  # crash
        segment.close_handlers()
    first = read_partition(tmp_path / "t-0")[1]  # in the first, flushed segment
    path = tmp_path / "t-0" / f"{first.segment:020d}.log"
    data = bytearray(path.read_bytes())
    data[first.position + 50] ^= 1
    path.write_bytes(bytes(data))
    reopened = LogDirectory(tmp_path, config_for=small)
    log = reopened.get("t", 0)
    assert log is not None and log.log_end_offset == 45  # below the recovery point: trusted
    assert [s.base_offset for s in log.segments] == bases


@pytest.mark.parametrize("name", ["recovery-point-offset-checkpoint",
                                  "log-start-offset-checkpoint"])  # fmt: skip
def test_a_damaged_recovery_point_or_log_start_checkpoint_is_reset_as_kafka_does(
    tmp_path: Path, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Kafka's LogManager warns and resets these two (recovery points to 0, log starts to the
    first segment's base); the whole log dir was refused, every writer and clean with it. The
    cleaner's offsets stay strict (Kafka takes such a log dir offline)."""
    log_dir = LogDirectory(tmp_path, config_for=small)
    log_dir.get_or_create("t", 0).append(batch(5))
    log_dir.close()
    (tmp_path / name).write_bytes(b"0\n1\nt 0 \x00\x00garbage\n")
    with LogDirectory(tmp_path, config_for=small) as reopened:
        log = reopened.get("t", 0)
        assert log is not None and log.log_start_offset == 0 and log.log_end_offset == 5
        log.append(batch(2))
    assert any("resetting" in r.getMessage() and name in r.getMessage() for r in caplog.records)
    OffsetCheckpointFile(tmp_path / name).read()  # written anew, whole
    (tmp_path / "cleaner-offset-checkpoint").write_bytes(b"0\n1\nt 0 \x00\n")
    with pytest.raises(CheckpointError, match="cleaner-offset-checkpoint"):
        LogDirectory(tmp_path, config_for=small)


def test_topic_settings_come_from_the_resolver_or_the_topic_config_files(tmp_path: Path) -> None:
    TopicConfigStore(tmp_path).update("t", {"segment.bytes": "1000"}, source="test")
    log_dir = LogDirectory(tmp_path)
    assert log_dir.get_or_create("t", 0).config.segment_bytes == 1000
    assert log_dir.get_or_create("u", 0).config.segment_bytes == 1 << 30
    log_dir.close()
    custom = LogDirectory(tmp_path, config_for=small)
    assert custom.get("t", 0).config.segment_bytes == 600  # type: ignore[union-attr]
    custom.close()


def test_a_partition_dir_left_without_metadata_gets_its_topics_id(tmp_path: Path) -> None:
    """A crash between creating a partition dir and writing partition.metadata."""
    log_dir = LogDirectory(tmp_path)
    log_dir.get_or_create("t", 0)
    log_dir.close()
    (tmp_path / "t-1").mkdir()
    (tmp_path / "u-0").mkdir()
    reopened = LogDirectory(tmp_path)
    texts = {n: (tmp_path / n / "partition.metadata").read_text() for n in ("t-0", "t-1", "u-0")}
    assert texts["t-1"] == texts["t-0"] != texts["u-0"]
    reopened.close()


def test_a_partition_another_writer_created_meanwhile_is_opened_not_created(
    tmp_path: Path,
) -> None:
    stale = LogDirectory(tmp_path, config_for=small)
    with LogDirectory(tmp_path, config_for=small) as other:
        other.create_partitions("t", 2)
        other.logs[("t", 1)].append(batch(3))
    stale.create_partitions("t", 3)  # 0 and 1 exist on disk: opened; 2 is new
    assert [stale.logs[("t", p)].log_end_offset for p in range(3)] == [0, 3, 0]
    ids = {(tmp_path / f"t-{p}" / "partition.metadata").read_text() for p in range(3)}
    assert len(ids) == 1
    stale.close()


def test_a_topic_colliding_with_another_once_dots_are_underscores_is_refused(
    tmp_path: Path,
) -> None:
    """Kafka's ``Topic.hasCollision``: ``my.topic`` and ``my_topic`` cannot both exist (their
    metric names are the same); the second is refused before anything of it is created."""
    with LogDirectory(tmp_path) as log_dir:
        log_dir.create_partitions("my.topic", 2)
        with pytest.raises(ConfigError, match=r"'my_topic' collides with .* 'my\.topic'"):
            log_dir.create_partitions("my_topic", 1)
        log_dir.create_partitions("my.topic", 2)  # itself: no collision
        log_dir.create_partitions("my-topic", 1)  # '-' is not '.': Kafka allows it
    assert not (tmp_path / "my_topic-0").exists()


@pytest.mark.parametrize("count", [1, 40])  # one at a time, and many (staged unsynced, one syncfs)
def test_a_created_partition_knows_what_its_files_hold(tmp_path: Path, count: int) -> None:
    """A partition just created starts from what its files hold without reading them back: no
    producer snapshot, and the leader-epoch checkpoint's entries (epoch 0 from offset 0)."""
    with LogDirectory(tmp_path) as logs:
        logs.create_partitions("t", count)
        for p in range(count):
            made = logs.get("t", p)
            assert made is not None
            on_disk = LeaderEpochFileCache(made.directory / LEADER_EPOCH_CHECKPOINT).entries
            assert made.leader_epoch_cache.entries == on_disk == [(0, 0)]
            assert made.leader_epoch == 0 and not made.leader_epoch_cache.dirty
            assert made.producer_state.snapshot_files() == []
            assert list_snapshot_files(made.directory) == []
            made.append(batch(3))  # and appends as any other
    with LogDirectory(tmp_path) as logs:  # reopened: what was appended, with the same epochs
        for p in range(count):
            log = logs.get("t", p)
            assert log is not None and log.log_end_offset == 3
            assert log.leader_epoch_cache.entries == [(0, 0)]


def test_a_partition_created_again_drops_the_deleted_ones_checkpoint_entries(
    tmp_path: Path,
) -> None:
    """A topic deleted by removing its directory leaves its entries in the checkpoints; the
    partition created again under its name must not inherit them (a tiering sidecar reading
    the old log start deleted the new partition's first segments), and the files say so before
    it is created, not only at the writer's next checkpoint."""
    with LogDirectory(tmp_path, config_for=small) as log_dir:
        log_dir.get_or_create("t", 0).append(batch(5))
        log_dir.get_or_create("u", 0).append(batch(5))
    names = ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
             "cleaner-offset-checkpoint")  # fmt: skip
    for name in names:
        (tmp_path / name).write_text("0\n2\nt 0 3\nu 0 4\n")
    shutil.rmtree(tmp_path / "t-0")
    writer = LogDirectory(tmp_path, config_for=small)
    log = writer.get_or_create("t", 0)
    for name in names:  # already rewritten, the other partition's entries kept
        lines = checkpoint_lines(tmp_path / name)[1]
        assert "t 0 3" not in lines and "u 0 4" in lines, name
    assert log.log_start_offset == 0
    log.append(batch(5))
    writer.close()
    for name in names:
        assert "t 0 3" not in checkpoint_lines(tmp_path / name)[1], name
