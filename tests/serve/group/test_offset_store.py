"""``__consumer_offsets`` as Kafka has it: a group's partition is Java's
``abs(groupId.hashCode()) % n`` (the values below were printed by jshell), records decode with
Kafka's schemas, the store replays the latest commit per key (a tombstone deletes), keeps its
partition count, refuses a second server on the same dir, and names the file and offset of a
record it cannot read."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from kafkatier.serve.group.offset_store import TOPIC, OffsetStore
from kafkatier.serve.group.records import (
    OffsetKey,
    OffsetValue,
    decode_key,
    decode_value,
    encode_key,
    partition_for,
)
from kafkatier.storage.errors import ConfigError, KafkaTierError
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record


@pytest.mark.parametrize(("group", "partitions", "expected"), [
    ("my-group", 50, 12),  # abs("my-group".hashCode()) % 50 in Java
    ("console-consumer-12345", 50, 158455506 % 50),
    ("polygenelubricants", 7, 0),  # hashCode() is Integer.MIN_VALUE: Utils.abs gives 0
    ("é€g", 1000003, 483300),  # UTF-16 code units, not bytes
])  # fmt: skip
def test_partition_of_a_group_is_kafkas(group: str, partitions: int, expected: int) -> None:
    assert partition_for(group, partitions) == expected


def test_value_versions_kafka_wrote() -> None:
    """Values of version 1 (with an expire timestamp) and 3 (with a leader epoch) decode."""
    v1 = struct.pack(">hq", 1, 42) + struct.pack(">h", 2) + b"md" + struct.pack(">qq", 7, 9)
    assert decode_value(v1) == OffsetValue(42, -1, "md", 7)
    v3 = struct.pack(">hqi", 3, 42, 5) + struct.pack(">h", 0) + struct.pack(">q", 7)
    assert decode_value(v3) == OffsetValue(42, 5, "", 7)
    group_metadata_key = struct.pack(">h", 2) + struct.pack(">h", 1) + b"g"
    assert decode_key(group_metadata_key) is None
    assert decode_key(encode_key(OffsetKey("g", "t", 3))) == OffsetKey("g", "t", 3)


def test_replay_latest_tombstones_and_partition_count(tmp_path: Path) -> None:
    store = OffsetStore(tmp_path, 3)
    store.commit("a", [("t", 0, OffsetValue(5, -1, "x", 1)), ("t", 1, OffsetValue(7, 2, "", 1))])
    store.commit("a", [("t", 0, OffsetValue(9, -1, "", 2))])
    store.commit("b", [("u", 0, OffsetValue(1, -1, "", 3))])
    with pytest.raises(ConfigError, match=r"offsets\.log\.dir"):
        OffsetStore(tmp_path, 3)  # a second server on the same dir
    store.close()
    partition = partition_for("a", 3)
    with LogDirectory(tmp_path) as ld:  # a tombstone, as compaction or a deletion leaves
        log = ld.get(TOPIC, partition)
        assert log is not None
        log.append(build_batch([Record(0, 4, encode_key(OffsetKey("a", "t", 1)), None)]))
    store = OffsetStore(tmp_path, 3)
    try:
        assert store.committed("a") == {("t", 0): OffsetValue(9, -1, "", 2)}
        assert store.committed("b") == {("u", 0): OffsetValue(1, -1, "", 3)}
        assert sorted(store.groups()) == ["a", "b"]
    finally:
        store.close()
    assert (tmp_path / f"kafkatier-topic.{TOPIC}.properties").read_text().count(
        "cleanup.policy=compact") == 1  # fmt: skip
    with pytest.raises(ConfigError, match=r"offsets\.topic\.num\.partitions"):
        OffsetStore(tmp_path, 4)


def test_an_unreadable_record_names_its_place(tmp_path: Path) -> None:
    OffsetStore(tmp_path, 1).close()
    with LogDirectory(tmp_path) as ld:
        log = ld.get(TOPIC, 0)
        assert log is not None
        log.append(build_batch([Record(0, 4, encode_key(OffsetKey("g", "t", 0)), b"\x00\x09")]))
    with pytest.raises(KafkaTierError, match=r"version 9 .*__consumer_offsets-0.*offset=0"):
        OffsetStore(tmp_path, 1)


def test_the_cleaner_keeps_the_latest_commit_per_key(tmp_path: Path) -> None:
    """200 commits of the same three keys in 1 KiB segments: a cleaner pass keeps one record per
    key in the closed segments, and a replay after it sees the latest commits."""
    store = OffsetStore(tmp_path, 1, segment_bytes=1024)
    try:
        for i in range(200):
            store.commit("g", [("t", i % 3, OffsetValue(i, -1, "", i))])
        before = records_on_disk(tmp_path)
        removed = store.clean()
        after = records_on_disk(tmp_path)
        assert before == 200 and removed > 150 and after == before - removed
        latest = store.committed("g")
    finally:
        store.close()
    assert latest == {("t", i % 3): OffsetValue(i, -1, "", i) for i in (197, 198, 199)}
    reopened = OffsetStore(tmp_path, 1)
    try:
        assert reopened.committed("g") == latest
    finally:
        reopened.close()


def records_on_disk(directory: Path) -> int:
    from kafkatier.storage.log.reader import iter_records

    with LogDirectory(directory) as ld:
        log = ld.get(TOPIC, 0)
        assert log is not None
        return sum(1 for _ in iter_records(log))


def test_commits_of_groups_without_members_expire(tmp_path: Path) -> None:
    """``offsets.retention.minutes``: a group without members loses its commits older than the
    retention (tombstones, so a replay agrees); a group with members keeps all of its own."""
    store = OffsetStore(tmp_path, 2)
    try:
        store.commit("idle", [("t", 0, OffsetValue(5, -1, "", 1_000)),
                              ("t", 1, OffsetValue(6, -1, "", 9_000))])  # fmt: skip
        store.commit("busy", [("t", 0, OffsetValue(7, -1, "", 1_000))])
        assert store.expire(5_000, active={"busy"}.__contains__) == 1
        assert store.committed("idle") == {("t", 1): OffsetValue(6, -1, "", 9_000)}
        assert store.committed("busy") == {("t", 0): OffsetValue(7, -1, "", 1_000)}
    finally:
        store.close()
    reopened = OffsetStore(tmp_path, 2)
    try:
        assert reopened.committed("idle") == {("t", 1): OffsetValue(6, -1, "", 9_000)}
    finally:
        reopened.close()
