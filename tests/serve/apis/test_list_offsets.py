"""ListOffsets and Fetch at the edges of a partition, through kafka-python: earliest is the log
start (raised by the log dir's log-start-offset-checkpoint), latest is the high watermark or,
for read_committed, the last stable offset (an open transaction holds it back); a fetch below
the log start or past the log end is OFFSET_OUT_OF_RANGE, which the client resets from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kafkatier.storage.checkpoint.checkpoint_file import (
    LOG_START_OFFSET_CHECKPOINT,
    OffsetCheckpointFile,
)
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record

T0 = 1_700_000_000_000
LOG_START, LSO, HW = 3, 10, 12


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    """t-0: offsets 0-9 plain, 10-11 an open transaction; log start raised to 3."""
    log_dir = tmp_path / "logs"
    with LogDirectory(log_dir) as ld:
        log = ld.get_or_create("t", 0)
        for i in range(LSO):
            log.append(build_batch([Record(i, T0 + 1000 * i, b"k%d" % i, b"v%d" % i)]))
        log.append(build_batch([Record(i, T0 + 1000 * i, None, b"open") for i in (10, 11)],
                               producer_id=7, producer_epoch=0, base_sequence=0,
                               transactional=True))  # fmt: skip
    OffsetCheckpointFile(log_dir / LOG_START_OFFSET_CHECKPOINT).write({("t", 0): LOG_START})
    return log_dir


def consumer(port: int, **extra: Any) -> Any:
    from kafka import KafkaConsumer

    return KafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", group_id=None,
                         enable_auto_commit=False, **extra)  # fmt: skip


def test_earliest_and_latest_by_isolation_level(log_dir: Path, serve: Any) -> None:
    from kafka import TopicPartition

    tp = TopicPartition("t", 0)
    with serve(log_dir) as port:
        for isolation, latest in (("read_uncommitted", HW), ("read_committed", LSO)):
            c = consumer(port, isolation_level=isolation)
            try:
                assert c.beginning_offsets([tp]) == {tp: LOG_START}
                assert c.end_offsets([tp]) == {tp: latest}
                found = c.offsets_for_times({tp: T0 + 1000 * LOG_START - 1})[tp]
                assert (found.offset, found.timestamp) == (LOG_START, T0 + 1000 * LOG_START)
                assert c.offsets_for_times({tp: T0 + 1000 * HW}) == {tp: None}
                # offset 10 is in the open transaction: past read_committed's last fetchable
                # offset, so not an answer there (Partition.fetchOffsetForTimestamp's filter)
                in_txn = c.offsets_for_times({tp: T0 + 1000 * LSO})[tp]
                want = None if isolation == "read_committed" else LSO
                assert (None if in_txn is None else in_txn.offset) == want
            finally:
                c.close()


@pytest.mark.parametrize("position", [0, LOG_START - 1, HW + 1, 10**9])
def test_a_fetch_out_of_range_resets_to_earliest(
    log_dir: Path, serve: Any, position: int
) -> None:
    from kafka import TopicPartition

    tp = TopicPartition("t", 0)
    with serve(log_dir) as port:
        c = consumer(port, auto_offset_reset="earliest", isolation_level="read_committed")
        try:
            c.assign([tp])
            c.seek(tp, position)
            records: list[Any] = []
            for _ in range(20):
                records.extend(r for rs in c.poll(timeout_ms=500).values() for r in rs)
                if records and records[-1].offset == LSO - 1:
                    break
            assert [r.offset for r in records] == list(range(LOG_START, LSO))
        finally:
            c.close()


def test_a_fetch_out_of_range_without_reset_policy_is_an_error(
    log_dir: Path, serve: Any
) -> None:
    from kafka import TopicPartition
    from kafka.errors import OffsetOutOfRangeError

    tp = TopicPartition("t", 0)
    with serve(log_dir) as port:
        c = consumer(port, auto_offset_reset="none")
        try:
            c.assign([tp])
            c.seek(tp, 1)
            with pytest.raises(OffsetOutOfRangeError):
                for _ in range(20):
                    c.poll(timeout_ms=500)
        finally:
            c.close()


def test_max_timestamp(tmp_path: Path, serve: Any) -> None:
    """ListOffsets v7's MAX_TIMESTAMP through confluent-kafka's AdminClient: the first record
    with the largest timestamp, in a closed segment and in the active one."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    stamps = {"m": [5, 9, 3, 9, 1], "n": [1, 2, 3, 8, 8]}  # per offset
    with LogDirectory(tmp_path) as ld:
        for topic, values in stamps.items():
            log = ld.get_or_create(topic, 0)
            for i, ts in enumerate(values):
                log.append(build_batch([Record(i, T0 + ts, b"k", b"v")]))
                if topic == "m" and i == 2:
                    log.roll()  # m's maximum is in a closed segment and the active one
    with serve(tmp_path) as port:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        for topic, want in (("m", 1), ("n", 3)):
            tp = TopicPartition(topic, 0)
            [future] = admin.list_offsets({tp: OffsetSpec.max_timestamp()}).values()
            found = future.result(timeout=20)
            assert (found.offset, found.timestamp) == (want, T0 + stamps[topic][want])


def test_a_partition_named_twice_is_an_invalid_request(log_dir: Path, serve: Any) -> None:
    """As a broker answers a ListOffsets v1+ naming a partition twice (its
    ``duplicatePartitions``): INVALID_REQUEST for every copy, the others answered. Clients
    never send one (they merge); it was answered twice."""
    import datetime
    import io
    import struct

    from kio.schema.errors import ErrorCode
    from kio.schema.list_offsets.v7 import request as req
    from kio.schema.list_offsets.v7.response import ListOffsetsResponse
    from kio.schema.types import BrokerId, TopicName
    from kio.serial import entity_reader, entity_writer
    from serve_clients import raw_socket
    from test_connection import read_frame

    part = lambda i: req.ListOffsetsPartition(partition_index=i, current_leader_epoch=-1,  # noqa: E731
                                              timestamp=-2)  # fmt: skip
    topics = (req.ListOffsetsTopic(name=TopicName("t"), partitions=(part(0), part(0))),
              req.ListOffsetsTopic(name=TopicName("u"), partitions=(part(0),)))  # fmt: skip
    body = req.ListOffsetsRequest(replica_id=BrokerId(-1), isolation_level=0, topics=topics)
    buf = io.BytesIO()
    header = req.ListOffsetsRequest.__header_schema__
    entity_writer(header)(buf, header(request_api_key=2, request_api_version=7,
                                      correlation_id=3, client_id="raw"))  # fmt: skip
    entity_writer(req.ListOffsetsRequest)(buf, body)
    with serve(log_dir) as port, raw_socket(port) as sock:
        sock.sendall(struct.pack(">i", len(buf.getvalue())) + buf.getvalue())
        frame = read_frame(sock)
    _, used = entity_reader(ListOffsetsResponse.__header_schema__)(frame, 0)
    response, _ = entity_reader(ListOffsetsResponse)(frame, used)
    assert response.throttle_time == datetime.timedelta(0)
    t, u = response.topics
    assert [(p.error_code, p.offset) for p in t.partitions] == [(ErrorCode.invalid_request, -1)] * 2
    assert [p.error_code for p in u.partitions] == [ErrorCode.unknown_topic_or_partition]
