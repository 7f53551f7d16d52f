import base64
import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkatier.storage.checkpoint.metadata import (
    CLEAN_SHUTDOWN_FILE,
    META_PROPERTIES_FILE,
    ONE_UUID,
    PARTITION_METADATA_FILE,
    ZERO_UUID,
    CleanShutdownFile,
    MetaProperties,
    PartitionMetadataFile,
    new_topic_id,
    parse_partition_dir_name,
    partition_dir_name,
    uuid_from_str,
    uuid_to_str,
)
from kafkatier.storage.errors import CheckpointError

CORPUS = Path(__file__).resolve().parents[3].parent / "shared" / "kafka-corpus"
needs_corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason=f"Kafka corpus not found at {CORPUS}")
TOPIC_ID = "LJ-0nObETNu9zQf653GiTA"  # a topic id Kafka wrote (corpus partition.metadata)


# -- Uuid text ---------------------------------------------------------------------------------


def test_reserved_uuids():
    assert uuid_from_str(ZERO_UUID) == bytes(16)
    assert uuid_from_str(ONE_UUID) == bytes(15) + b"\x01"


def test_new_topic_ids_are_kafka_random_uuids():
    ids = {new_topic_id() for _ in range(2000)}
    assert len(ids) == 2000
    for text in ids:
        raw = uuid_from_str(text)
        assert len(text) == 22 and not text.startswith("-")
        assert raw[6] >> 4 == 4 and raw[8] >> 6 == 0b10  # java.util.UUID.randomUUID: v4, IETF
        assert base64.urlsafe_b64encode(raw).decode().rstrip("=") == text
    assert {ZERO_UUID, ONE_UUID}.isdisjoint(ids)


@settings(max_examples=100, deadline=None)
@given(st.binary(min_size=16, max_size=16))
def test_uuid_text_round_trip(raw):
    text = uuid_to_str(raw)
    assert len(text) == 22 and "=" not in text and "+" not in text and "/" not in text
    assert uuid_from_str(text) == raw


@pytest.mark.parametrize(
    "text", ["", "abc", "A" * 25, "AAAAAAAAAAAAAAAAAAAA+A", "AAAAAAAAAAAAAAAAAAAA A", "AAAA"]
)
def test_bad_uuid_text(text):
    with pytest.raises(ValueError):
        uuid_from_str(text)


# -- partition.metadata ------------------------------------------------------------------------


def test_partition_metadata_exact_text(tmp_path):
    meta = PartitionMetadataFile(tmp_path / PARTITION_METADATA_FILE)
    assert not meta.exists()
    meta.write(TOPIC_ID)
    assert meta.path.read_bytes() == b"version: 0\ntopic_id: LJ-0nObETNu9zQf653GiTA"
    assert meta.read() == TOPIC_ID
    assert [p.name for p in tmp_path.iterdir()] == [PARTITION_METADATA_FILE]


def test_partition_metadata_round_trip_with_new_ids(tmp_path):
    meta = PartitionMetadataFile(tmp_path / PARTITION_METADATA_FILE)
    for _ in range(20):
        topic_id = new_topic_id()
        meta.write(topic_id)
        assert meta.read() == topic_id


@pytest.mark.parametrize("bad", [ZERO_UUID, "not-a-uuid", ""])
def test_partition_metadata_write_rejects(tmp_path, bad):
    meta = PartitionMetadataFile(tmp_path / PARTITION_METADATA_FILE)
    with pytest.raises(CheckpointError) as info:
        meta.write(bad)
    assert info.value.file == str(meta.path)
    assert not meta.exists()


@pytest.mark.parametrize(
    "text",
    [
        f"version: 0\ntopic_id: {TOPIC_ID}\n",  # a trailing newline is tolerated on read
        f"version: 1\ntopic_id: {TOPIC_ID}",  # newer versions are accepted (downgrades)
        f"version:\t 0\r\ntopic_id:  {TOPIC_ID}",
    ],
)
def test_partition_metadata_lenient_read(tmp_path, text):
    path = tmp_path / PARTITION_METADATA_FILE
    path.write_text(text)
    assert PartitionMetadataFile(path).read() == TOPIC_ID


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("", 1),
        (f"version:0\ntopic_id: {TOPIC_ID}", 1),
        (f"version: -1\ntopic_id: {TOPIC_ID}", 1),
        (f"version: x\ntopic_id: {TOPIC_ID}", 1),
        (f"Version: 0\ntopic_id: {TOPIC_ID}", 1),
        ("version: 0", 2),
        (f"version: 0\ntopic: {TOPIC_ID}", 2),
        ("version: 0\ntopic_id: AAAA", 2),
        (f"version: 0\ntopic_id: {TOPIC_ID} ", 2),
        (f"version: 0\ntopic_id: {ZERO_UUID}", 2),
    ],
)
def test_partition_metadata_malformed(tmp_path, text, line):
    path = tmp_path / PARTITION_METADATA_FILE
    path.write_text(text)
    with pytest.raises(CheckpointError) as info:
        PartitionMetadataFile(path).read()
    assert (info.value.file, info.value.line) == (str(path), line)


@needs_corpus
def test_reads_every_corpus_partition_metadata():
    files = sorted(CORPUS.rglob(PARTITION_METADATA_FILE))
    assert len(files) > 100
    for path in files:
        raw = path.read_bytes()
        assert not raw.endswith(b"\n"), path  # Kafka writes no trailing newline
        expected = raw.decode().split("topic_id: ")[1]
        assert PartitionMetadataFile(path).read() == expected


# -- partition directory names -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "parsed"),
    [
        ("my-topic-0", ("my-topic", 0)),
        ("__consumer_offsets-49", ("__consumer_offsets", 49)),
        ("a.b_c-12", ("a.b_c", 12)),
        ("t-2147483647", ("t", 2147483647)),
        ("foo--1", ("foo-", 1)),  # the partition is after the last '-'
        ("t-2147483648", None),
        ("foo", None),
        ("-0", None),
        ("foo-", None),
        ("foo-x", None),
        ("foo-+1", None),
        ("t-01", None),  # Kafka never writes a number so: not t-1 (t-1's own is "t-1")
        ("t-00", None),
        ("foo-0.4f1b4a0e8a9c4c2e9d1f0a1b2c3d4e5f-delete", None),
        ("foo-0.4f1b4a0e8a9c4c2e9d1f0a1b2c3d4e5f-future", None),
        ("foo-0.4f1b4a0e8a9c4c2e9d1f0a1b2c3d4e5f-stray", None),
    ],
)
def test_parse_partition_dir_name(name, parsed):
    assert parse_partition_dir_name(name) == parsed


@settings(max_examples=100, deadline=None)
@given(st.text("ab._-Z9", min_size=1, max_size=40), st.integers(0, 2**31 - 1))
def test_partition_dir_name_round_trip(topic, partition):
    if topic in (".", "..") or topic.endswith(("-delete", "-future", "-stray")):
        return
    assert parse_partition_dir_name(partition_dir_name(topic, partition)) == (topic, partition)


@pytest.mark.parametrize(("topic", "partition"), [("bad topic", 0), ("", 0), ("..", 0), ("t", -1)])
def test_partition_dir_name_rejects(topic, partition):
    with pytest.raises(ValueError):
        partition_dir_name(topic, partition)


@needs_corpus
def test_every_corpus_partition_dir_parses():
    dirs = {p.parent for p in CORPUS.rglob("*.log")}
    assert len(dirs) > 50
    for directory in dirs:
        parsed = parse_partition_dir_name(directory.name)
        assert parsed is not None, directory
        assert partition_dir_name(*parsed) == directory.name


# -- meta.properties ---------------------------------------------------------------------------

WHEN = datetime(2025, 12, 10, 19, 14, 32, tzinfo=UTC)


def test_meta_properties_kraft_text(tmp_path):
    path = tmp_path / META_PROPERTIES_FILE
    MetaProperties(1, "universe-labs-cluster", 1, "MQHhtGhc9j1ncLM2pvl16w").write(path, now=WHEN)
    assert path.read_text() == (
        "#\n#Wed Dec 10 19:14:32 UTC 2025\n"
        "version=1\ncluster.id=universe-labs-cluster\nnode.id=1\n"
        "directory.id=MQHhtGhc9j1ncLM2pvl16w\n"
    )
    assert MetaProperties.read(path) == MetaProperties(
        1, "universe-labs-cluster", 1, "MQHhtGhc9j1ncLM2pvl16w"
    )


def test_meta_properties_date_line_format(tmp_path):
    path = tmp_path / META_PROPERTIES_FILE
    MetaProperties.new_kraft(node_id=3).write(path, sync=False)
    date_line = path.read_text().splitlines()[1]
    assert re.fullmatch(r"#[A-Z][a-z]{2} [A-Z][a-z]{2} \d\d \d\d:\d\d:\d\d UTC \d{4}", date_line)


def test_meta_properties_escapes_like_java(tmp_path):
    path = tmp_path / META_PROPERTIES_FILE
    MetaProperties(0, "a=b:c #!\\ d", None, None).write(path, now=WHEN)
    assert path.read_text().splitlines()[3] == "cluster.id=a\\=b\\:c \\#\\!\\\\ d"
    assert MetaProperties.read(path).cluster_id == "a=b:c #!\\ d"


def test_new_kraft_ids():
    meta = MetaProperties.new_kraft(node_id=7)
    assert (meta.version, meta.node_id) == (1, 7)
    assert meta.cluster_id and meta.directory_id and meta.cluster_id != meta.directory_id
    assert len(uuid_from_str(meta.directory_id)) == 16


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("version=0\nbroker.id=1001\n", MetaProperties(0, None, 1001, None)),
        ("version=0\ncluster.id=X\n", MetaProperties(0, "X", None, None)),
        ("version=1\nnode.id=2\ncluster.id=C\n", MetaProperties(1, "C", 2, None)),
        ("version = 1\nnode.id:2\ncluster.id C\n", MetaProperties(1, "C", 2, None)),
    ],
)
def test_meta_properties_read(tmp_path, text, expected):
    path = tmp_path / META_PROPERTIES_FILE
    path.write_text("#\n#date\n" + text)
    assert MetaProperties.read(path) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("version=2\nnode.id=1\ncluster.id=c\n", "version"),
        ("broker.id=1001\n", "missing version"),  # required, as Kafka reads it
        ("\x00\x9f garbage \x07\n", "missing version"),  # a damaged file
        ("version=1\ncluster.id=c\n", "node.id"),
        ("version=1\nnode.id=1\n", "cluster.id"),
        ("version=1\nnode.id=one\ncluster.id=c\n", "node.id"),
        ("version=0\nbroker.id=1.5\n", "broker.id"),
        ("version=1\nnode.id=1\ncluster.id=c\ndirectory.id=xyz\n", "directory.id"),
        ("version=1\nnode.id=1\ncluster.id=\\u12\n", "uxxxx"),
    ],
)
def test_meta_properties_errors_name_the_file(tmp_path, text, message):
    path = tmp_path / META_PROPERTIES_FILE
    path.write_text(text)
    with pytest.raises(CheckpointError, match=message) as info:
        MetaProperties.read(path)
    assert info.value.file == str(path)


def test_meta_properties_rejects_invalid_construction():
    with pytest.raises(CheckpointError):
        MetaProperties(1, None, 1, None)


@needs_corpus
def test_reads_every_corpus_meta_properties():
    files = sorted(CORPUS.rglob(META_PROPERTIES_FILE))
    assert len(files) == 7
    for path in files:
        raw = dict(
            line.split("=", 1) for line in path.read_text().splitlines() if not line.startswith("#")
        )
        meta = MetaProperties.read(path)
        assert meta.version == int(raw.get("version", "0"))
        assert meta.cluster_id == raw.get("cluster.id")
        assert meta.directory_id == raw.get("directory.id")
        node = raw.get("node.id" if meta.version == 1 else "broker.id")
        assert meta.node_id == (None if node is None else int(node))
        assert {k: v for k, v in meta.to_properties().items()} == raw


# -- .kafka_cleanshutdown ----------------------------------------------------------------------


def test_clean_shutdown_file(tmp_path):
    marker = CleanShutdownFile(tmp_path)
    assert marker.path == tmp_path / CLEAN_SHUTDOWN_FILE == tmp_path / ".kafka_cleanshutdown"
    assert not marker.exists() and marker.broker_epoch() is None
    marker.mark()
    assert marker.path.read_bytes() == b'{"version":0,"brokerEpoch":-1}'
    marker.mark(7118)
    assert marker.path.read_bytes() == b'{"version":0,"brokerEpoch":7118}'
    assert marker.exists() and marker.broker_epoch() == 7118
    assert marker.remove() is True
    assert not marker.exists() and marker.remove() is False


@pytest.mark.parametrize(
    ("content", "epoch"),
    [(b"", None), (b"{}", None), (b'{"version":0,"brokerEpoch":5,"x":1}', 5), (b"[1]", None)],
)
def test_clean_shutdown_marker_content_is_optional(tmp_path, content, epoch):
    (tmp_path / CLEAN_SHUTDOWN_FILE).write_bytes(content)
    marker = CleanShutdownFile(tmp_path)
    assert marker.exists()
    assert marker.broker_epoch() == epoch


@needs_corpus
def test_reads_every_corpus_clean_shutdown_marker():
    files = sorted(CORPUS.rglob(CLEAN_SHUTDOWN_FILE))
    assert len(files) >= 2
    for path in files:
        raw = path.read_bytes()
        expected = json.loads(raw)["brokerEpoch"] if raw else None
        marker = CleanShutdownFile(path.parent)
        assert marker.exists() and marker.broker_epoch() == expected
