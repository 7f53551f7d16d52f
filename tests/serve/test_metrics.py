"""``kafkatier serve``'s Prometheus metrics (``serve.metrics.port``), scraped over HTTP while
kafka-python consumes: connections, requests and errors per API, the bytes served from local
segments, a bad frame, and a group's lag from its committed offsets."""

from __future__ import annotations

import datetime
import socket
import struct
import time
from pathlib import Path

from group_clients import PARTITIONS, PER_PARTITION, TOPIC, write_topic
from serve_server import scrape, server_thread


def test_metrics_count_what_clients_did(tmp_path: Path) -> None:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    log_dir = tmp_path / "logs"
    write_topic(log_dir)
    segment_bytes = sum(p.stat().st_size for p in log_dir.glob(f"{TOPIC}-*/*.log"))
    with server_thread(log_dir, serve__metrics__port="0") as thread:
        port, metrics = thread.server.bound["PLAINTEXT"], thread.server.metrics_port
        assert metrics is not None
        consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", group_id="lagging",
                                 enable_auto_commit=False, auto_offset_reset="earliest")
        tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        seen = 0
        deadline = time.monotonic() + 20
        while seen < PARTITIONS * PER_PARTITION and time.monotonic() < deadline:
            seen += sum(len(r) for r in consumer.poll(timeout_ms=200).values())
        consumer.commit({tps[0]: OffsetAndMetadata(10, "", -1)})
        consumer.seek(tps[1], 10_000)  # past the end: OFFSET_OUT_OF_RANGE, then a reset
        consumer.poll(timeout_ms=500)
        with socket.create_connection(("127.0.0.1", port)) as bad:
            bad.sendall(struct.pack(">i", 3))  # a frame too small to be a request
            bad.recv(1)
        found = scrape(metrics)
        consumer.close()
    assert seen == PARTITIONS * PER_PARTITION
    assert found["kafkatier_serve_connections_total"] >= 2
    assert found["kafkatier_serve_bad_frames_total"] == 1
    assert found['kafkatier_serve_requests_total{api="Fetch"}'] >= 1
    assert found['kafkatier_serve_requests_total{api="OffsetCommit"}'] == 1
    assert found['kafkatier_serve_errors_total{api="Fetch",error="OFFSET_OUT_OF_RANGE"}'] >= 1
    assert found['kafkatier_serve_bytes_total{tier="local"}'] >= segment_bytes
    assert found['kafkatier_serve_bytes_total{tier="remote"}'] == 0
    lag = f'kafkatier_serve_group_lag{{group="lagging",topic="{TOPIC}",partition="0"}}'
    assert found[lag] == PER_PARTITION - 10


def test_error_codes_finds_every_level_and_only_errors() -> None:
    """Top-level, per-topic and per-partition codes, in tuples and nested entities; zeros and
    fields that cannot hold entities are skipped."""
    import uuid

    from kio.schema.errors import ErrorCode
    from kio.schema.metadata.v12 import response as md

    from kafkatier.serve.metrics import error_codes

    def part(i: int, code: ErrorCode) -> md.MetadataResponsePartition:
        return md.MetadataResponsePartition(
            error_code=code, partition_index=i, leader_id=0, leader_epoch=0,
            replica_nodes=(0,), isr_nodes=(0,), offline_replicas=(),
        )  # fmt: skip

    topics = (
        md.MetadataResponseTopic(
            error_code=ErrorCode.none, name="a", topic_id=uuid.uuid4(), is_internal=False,
            partitions=(part(0, ErrorCode.none), part(1, ErrorCode.leader_not_available)),
            topic_authorized_operations=0,
        ),
        md.MetadataResponseTopic(
            error_code=ErrorCode.unknown_topic_or_partition, name="b", topic_id=uuid.uuid4(),
            is_internal=False, partitions=(), topic_authorized_operations=0,
        ),
    )  # fmt: skip
    response = md.MetadataResponse(
        throttle_time=datetime.timedelta(0), brokers=(), cluster_id=None,
        controller_id=0, topics=topics,
    )  # fmt: skip
    assert sorted(error_codes(response)) == sorted(
        [ErrorCode.leader_not_available, ErrorCode.unknown_topic_or_partition]
    )
    assert list(error_codes(None)) == []
