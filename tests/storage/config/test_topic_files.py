"""Per-topic configuration files at the log-dir root, and conf/topic.properties."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.config.topic_files import TopicConfigStore
from kafkatier.storage.errors import ConfigError
from kafkatier.storage.java_properties import read_properties
from kafkatier.storage.log.directory import LogDirectory

REPO = Path(__file__).resolve().parents[3]


def test_conf_example_lists_every_setting_with_kafkas_default() -> None:
    documented = read_properties(REPO / "conf" / "topic.properties")
    assert documented == LogConfig().to_properties(include_defaults=True)


def test_update_persists_only_overrides_and_get_reads_them(tmp_path: Path) -> None:
    store = TopicConfigStore(tmp_path)
    assert store.get("events") == LogConfig()
    store.update("events", {"segment.bytes": "1048576"}, source="--config")
    store.update("events", {"cleanup.policy": "compact"}, source="--config")
    assert read_properties(store.path("events")) == {
        "segment.bytes": "1048576",
        "cleanup.policy": "compact",
    }
    config = store.get("events")
    assert config.segment_bytes == 1048576 and config.is_compacted
    assert store.get("other") == LogConfig()


def test_bad_value_is_rejected_and_nothing_is_written(tmp_path: Path) -> None:
    store = TopicConfigStore(tmp_path)
    with pytest.raises(ConfigError) as err:
        store.update("events", {"segment.bytes": "lots"}, source="--config")
    assert "segment.bytes" in str(err.value) and "--config" in str(err.value)
    assert not store.path("events").exists()


def test_config_file_is_not_a_partition_and_log_dir_uses_it(tmp_path: Path) -> None:
    TopicConfigStore(tmp_path).update("t", {"segment.bytes": "5000"}, source="test")
    with LogDirectory(tmp_path) as log_dir:
        log = log_dir.get_or_create("t", 0)
        assert log.config.segment_bytes == 5000
        assert list(log_dir.topics()) == ["t"]


def test_a_topic_config_is_parsed_once_per_version_of_its_file(tmp_path: Path) -> None:
    store = TopicConfigStore(tmp_path)
    assert store.get("t").segment_bytes == LogConfig().segment_bytes  # no file yet
    store.update("t", {"segment.bytes": "4096"}, "test")
    first = store.get("t")
    assert first.segment_bytes == 4096 and store.get("t") is first  # parsed once
    for size in ("8192", "4096"):  # each write is seen at once, even a return to a value
        store.update("t", {"segment.bytes": size}, "test")
        assert store.get("t").segment_bytes == int(size)
    store.path("t").unlink()
    assert store.get("t").segment_bytes == LogConfig().segment_bytes


def test_a_deleted_topics_settings_do_not_pass_to_its_successor(tmp_path: Path) -> None:
    """Settings given ahead of a topic (no partition yet) are its own: kept at its creation and
    stamped with its id, through later updates; its partitions removed (the topic deleted), the
    next topic of its name starts from Kafka's defaults, or from what it is created with."""
    store = TopicConfigStore(tmp_path)
    store.update("t", {"cleanup.policy": "compact"}, source="ahead")
    with LogDirectory(tmp_path) as logs:
        logs.create_partitions("t", 2)
        first_id = logs.topic_id("t")
        assert logs.logs[("t", 1)].config.is_compacted
    assert first_id is not None and first_id in store.path("t").read_text().splitlines()[0]
    store.update("t", {"retention.ms": "1000"}, source="later")
    assert first_id in store.path("t").read_text().splitlines()[0]
    assert store.get("t").is_compacted and store.get("t").retention_ms == 1000
    for p in (0, 1):
        shutil.rmtree(tmp_path / f"t-{p}")
    with LogDirectory(tmp_path) as logs:
        logs.create_partitions("t", 1)
        assert not logs.logs[("t", 0)].config.is_compacted
        second_id = logs.topic_id("t")
        assert second_id != first_id
    assert store.stored("t") == {}  # the new topic's record, its settings Kafka's defaults
    assert store.path("t").read_text().splitlines()[0].endswith(f"{second_id}, partitions 1")
    for p in (0,):
        shutil.rmtree(tmp_path / f"t-{p}")
    store.update("t", {"segment.bytes": "1048576"}, source="ahead")  # no partition: not stale
    assert store.get("t").segment_bytes == 1048576 and store.get("t").retention_ms != 1000


def test_an_emptied_settings_file_is_refused_not_read_as_kafkas_defaults(tmp_path: Path) -> None:
    """Every file kafkatier writes has a header line: an empty one was emptied or cut short,
    and Kafka's defaults in its place would apply 7 days of retention to a topic kept for ever
    (or stop compacting it). Reading and updating both refuse it, naming the file."""
    store = TopicConfigStore(tmp_path)
    store.update("events", {"retention.ms": "-1", "cleanup.policy": "compact"}, source="test")
    store.path("events").write_bytes(b"")
    for action in (lambda: store.get("events"),
                   lambda: store.update("events", {"segment.ms": "1000"}, source="--config")):
        with pytest.raises(ConfigError, match="settings file is empty") as err:
            action()
        assert str(store.path("events")) in str(err.value)
    assert store.path("events").read_bytes() == b""  # not replaced by the update
    store.path("events").unlink()  # the way to Kafka's defaults
    assert store.get("events") == LogConfig()


def test_topics_with_the_longest_valid_names_keep_their_own_settings(tmp_path: Path) -> None:
    """A 249-character name (Kafka's limit) does not fit in ``kafkatier-topic.<name>.properties``
    (255 bytes): such a file is named by the name's start and a hash of all of it, so two long
    names that differ only at the end keep apart, and creation records their counts."""
    store = TopicConfigStore(tmp_path)
    first, second = "a" * 248 + "1", "a" * 248 + "2"
    store.update(first, {"cleanup.policy": "compact"}, source="test")
    store.update(second, {"retention.ms": "1000"}, source="test")
    assert store.path(first) != store.path(second)
    assert all(len(store.path(t).name) + len(".tmp") <= 255 for t in (first, second))
    assert store.get(first).is_compacted and store.get(first).retention_ms != 1000
    assert store.get(second).retention_ms == 1000 and not store.get(second).is_compacted
    with LogDirectory(tmp_path) as logs:
        logs.create_partitions(first, 3)
        assert logs.logs[(first, 2)].config.is_compacted
        assert logs.partition_count(first) == 3
    assert store.stored(first) == {"cleanup.policy": "compact"}
