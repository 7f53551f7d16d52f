"""Metadata: this server as the one broker and controller (node 0 at the advertised listener),
every topic of the log dirs with its partitions and the topic id of its ``partition.metadata``;
an unknown topic is UNKNOWN_TOPIC_OR_PARTITION, and nothing is created."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest

from kafkatier.storage.checkpoint.metadata import PartitionMetadataFile, uuid_from_str
from kafkatier.storage.config.topic_files import TopicConfigStore
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record


def make_topics(log_dir: Path) -> dict[str, uuid.UUID]:
    with LogDirectory(log_dir) as ld:
        for topic, partitions in (("a", 2), ("b.c", 3)):
            for p in range(partitions):
                ld.get_or_create(topic, p)
    return {
        t: uuid.UUID(bytes=uuid_from_str(PartitionMetadataFile(
            log_dir / f"{t}-0" / "partition.metadata").read()))
        for t in ("a", "b.c")
    }


def test_kafka_python_sees_the_broker_topics_and_ids(tmp_path: Path, serve: Any) -> None:
    from kafka import KafkaConsumer

    ids = make_topics(tmp_path)
    with serve(tmp_path) as port:
        c = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", group_id=None)
        try:
            assert c.topics() == {"a", "b.c"}
            assert c.partitions_for_topic("a") == {0, 1}
            assert c.partitions_for_topic("b.c") == {0, 1, 2}
            cluster = c._client.cluster  # the client's parsed Metadata response
            assert [(b.node_id, b.host, b.port) for b in cluster.brokers()] == [
                (0, "127.0.0.1", port)
            ]
            assert {t: cluster.topic_id(t) for t in ids} == ids
        finally:
            c.close()
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == [
        "a-0", "a-1", "b.c-0", "b.c-1", "b.c-2"
    ]


def test_confluent_sees_topics_and_an_unknown_one_is_an_error(tmp_path: Path, serve: Any) -> None:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient

    make_topics(tmp_path)
    with serve(tmp_path) as port:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        found = admin.list_topics(timeout=10)
        assert found.controller_id == 0 and list(found.brokers) == [0]
        assert {t: sorted(m.partitions) for t, m in found.topics.items()} == {
            "a": [0, 1], "b.c": [0, 1, 2]
        }
        missing = admin.list_topics(topic="nope", timeout=10).topics["nope"]
        assert missing.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert not (tmp_path / "nope-0").exists()


def test_a_partition_missing_below_the_highest_is_listed_offline(
    tmp_path: Path, serve: Any
) -> None:  # fmt: skip
    """``b.c-1`` gone from the log dir: the topic still has three partitions, the missing one
    without a leader (LEADER_NOT_AVAILABLE), and librdkafka reads the third one's records (left
    out, the topic looked like two partitions and partition 2 was never read)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition
    from confluent_kafka.admin import AdminClient

    make_topics(tmp_path)
    with LogDirectory(tmp_path) as ld:
        ld.get_or_create("b.c", 2).append(build_batch([Record(0, 1_700_000_000_000, b"k", b"v")]))
    shutil.rmtree(tmp_path / "b.c-1")
    with serve(tmp_path) as port:
        topic = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"}).list_topics(
            topic="b.c", timeout=10).topics["b.c"]
        assert sorted(topic.partitions) == [0, 1, 2]
        assert topic.partitions[1].error.code() == KafkaError.LEADER_NOT_AVAILABLE
        assert topic.partitions[1].leader == -1 and topic.partitions[2].leader == 0
        c = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": "g",
                      "enable.auto.commit": False})  # fmt: skip
        try:
            c.assign([TopicPartition("b.c", 2, 0)])
            got = None
            for _ in range(40):
                got = c.poll(0.5)
                if got is not None and got.error() is None:
                    break
            assert got is not None and got.error() is None and got.value() == b"v"
        finally:
            c.close()


def test_a_missing_last_partition_is_listed_offline_by_the_recorded_count(
    tmp_path: Path, serve: Any
) -> None:
    """The topic's file records 3 partitions (``topic_files``): with ``t-2`` moved away the
    topic is still three partitions, the last without a leader, not a topic of two."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient
    from serve_clients import fetch_one, list_offset_one, raw_socket

    with LogDirectory(tmp_path) as ld:
        ld.create_partitions("t", 3)
    shutil.rmtree(tmp_path / "t-2")
    with serve(tmp_path) as port:
        topic = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"}).list_topics(
            topic="t", timeout=10).topics["t"]  # fmt: skip
        assert sorted(topic.partitions) == [0, 1, 2]
        assert topic.partitions[2].error.code() == KafkaError.LEADER_NOT_AVAILABLE
        assert topic.partitions[1].leader == 0
        with raw_socket(port) as sock:  # reads: Kafka's answer for a replica whose dir failed
            assert fetch_one(sock, "t", 0, partition=2).error_code == 56  # KAFKA_STORAGE_ERROR
            assert list_offset_one(sock, "t", 2).error_code == 56
            assert list_offset_one(sock, "t", 1).error_code == 0
            assert list_offset_one(sock, "u", 0).error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION


def test_describe_cluster(tmp_path: Path, serve: Any) -> None:
    """kafka-python's admin client (DescribeCluster, Metadata only as a fallback), and the
    request itself encoded by kafka-python's protocol classes, each version served."""
    import socket

    from kafka import KafkaAdminClient
    from kafka.protocol.admin import DescribeClusterRequest, DescribeClusterResponse

    make_topics(tmp_path)
    cluster_id = (tmp_path / "meta.properties").read_text().split("cluster.id=")[1].split()[0]
    with serve(tmp_path) as port:
        admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}")
        try:
            found = admin.describe_cluster()
        finally:
            admin.close()
        assert (found["cluster_id"], found["controller_id"]) == (cluster_id, 0)
        assert [(b["broker_id"], b["host"], b["port"]) for b in found["brokers"]] == [
            (0, "127.0.0.1", port)
        ]
        for version, endpoint_type, error in ((0, 1, 0), (1, 1, 0), (2, 1, 0), (1, 2, 114)):
            request = DescribeClusterRequest(version=version, endpoint_type=endpoint_type,
                                             include_cluster_authorized_operations=False)
            request.with_header(correlation_id=version)
            with socket.create_connection(("127.0.0.1", port)) as sock:
                sock.sendall(bytes(request.encode(version=version, header=True, framed=True)))
                size = int.from_bytes(sock.recv(4, socket.MSG_WAITALL), "big")
                raw = sock.recv(size, socket.MSG_WAITALL)
            answer = DescribeClusterResponse.decode(raw, version=version, header=True)
            assert answer.error_code == error
            if not error:
                assert answer.cluster_id == cluster_id
                assert [(b.broker_id, b.port) for b in answer.brokers] == [(0, port)]


def test_describe_topic_configs(tmp_path: Path, serve: Any) -> None:
    """confluent-kafka's AdminClient: the topic's own settings from its properties file,
    Kafka's defaults for the rest; an unknown topic is an error."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource

    make_topics(tmp_path)
    settings = {"segment.bytes": "1048576", "cleanup.policy": "compact"}
    TopicConfigStore(tmp_path).update("a", settings, source="test")
    with serve(tmp_path) as port:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        [future] = admin.describe_configs([ConfigResource("topic", "a")]).values()
        entries = future.result(timeout=20)
        assert entries["segment.bytes"].value == "1048576"
        assert entries["cleanup.policy"].value == "compact"
        assert entries["segment.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
        assert entries["retention.ms"].value == "604800000"  # Kafka's default
        assert entries["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
        assert all(e.is_read_only for e in entries.values())
        for unlimited in ("message.timestamp.before.max.ms", "message.timestamp.after.max.ms"):
            assert entries[unlimited].value == str(2**63 - 1)  # a broker's "no limit"
        broker = {"producer.id.expiration.ms", "log.cleaner.dedupe.buffer.size",
                  "log.cleaner.io.buffer.size", "log.cleaner.io.buffer.load.factor"}  # fmt: skip
        assert not broker & set(entries)  # server.properties settings, no topic's
        [missing] = admin.describe_configs([ConfigResource("topic", "nope")]).values()
        with pytest.raises(KafkaException):
            missing.result(timeout=20)
        TopicConfigStore(tmp_path).path("a").write_bytes(b"")  # emptied: said, not defaults
        [damaged] = admin.describe_configs([ConfigResource("topic", "a")]).values()
        with pytest.raises(KafkaException, match="settings file is empty"):
            damaged.result(timeout=20)


def test_authorized_operations_are_what_serve_lets_a_client_do(
    tmp_path: Path, serve: Any
) -> None:
    """KIP-430 through librdkafka's admin client: asked for, the authorized operations were
    null; Kafka answers what the client may do (with no authorizer, everything the resource
    supports). serve is read-only: reading and describing, no writes; not asked, none."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AclOperation, AdminClient

    make_topics(tmp_path)
    with serve(tmp_path) as port:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        cluster = admin.describe_cluster(include_authorized_operations=True).result(timeout=10)
        [topic] = admin.describe_topics(TopicCollection(["a"]),
                                        include_authorized_operations=True).values()  # fmt: skip
        plain = admin.describe_cluster().result(timeout=10)
    assert set(cluster.authorized_operations) == {AclOperation.DESCRIBE}
    assert set(topic.result(timeout=10).authorized_operations) == {
        AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS}
    assert plain.authorized_operations is None
