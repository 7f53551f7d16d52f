"""Record spans sent from their files or memory (serve/zero_copy.py): the spliced frame is byte
for byte the frame encoded with the records themselves, in flexible and older Fetch versions;
and a server answering many fetches closes every span's descriptor."""

from __future__ import annotations

import datetime
import os
from pathlib import Path
from typing import Any

import pytest
from group_clients import PARTITIONS, PER_PARTITION, TOPIC, write_topic
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType
from serve_clients import kafka_python_rows
from test_datasource import kafka_python_rows as disk_rows

from kafkatier.serve.apis.versions import FETCH
from kafkatier.serve.protocol import build, encode_response, payload_module
from kafkatier.serve.zero_copy import FileSpan, MemorySpan, Span, splice


def fetch_response(version: int, records: list[bytes]) -> Any:
    module = payload_module(FETCH, version, EntityType.response)
    parts = tuple(
        build(module.PartitionData, partition_index=i, error_code=ErrorCode.none,
              high_watermark=100, last_stable_offset=100, log_start_offset=0,
              aborted_transactions=None, records=r)
        for i, r in enumerate(records)
    )  # fmt: skip
    topic = build(module.FetchableTopicResponse, topic="t", topic_id=None, partitions=parts)
    return build(module.FetchResponse, throttle_time=datetime.timedelta(0),
                 error_code=ErrorCode.none, session_id=0, responses=(topic,))  # fmt: skip


def _span(kind: str, path: Path, data: bytes, at: int, size: int) -> Span:
    """A local segment's span (sent by sendfile) or a remote run's view (written from memory)."""
    if kind == "file":
        return FileSpan.open(path, at, size)
    return MemorySpan(memoryview(data)[at : at + size])


@pytest.mark.parametrize("kind", ["file", "memory"])
@pytest.mark.parametrize("version", [4, 11, 12, 16])  # int32 lengths up to 11, compact after
@pytest.mark.parametrize("sizes", [[61], [200, 5000], [130_000, 0, 70]])
def test_a_spliced_frame_is_the_frame_with_the_records(
    tmp_path: Path, version: int, sizes: list[int], kind: str
) -> None:
    data = os.urandom(sum(sizes) + 100)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    spans: list[Span | None] = []
    records, at = [], 7
    for size in sizes:
        records.append(data[at:at + size])
        spans.append(_span(kind, path, data, at, size) if size else None)
        at += size
    try:
        placeholders = [s.token if s else b"" for s in spans]
        encoded = encode_response(9, fetch_response(version, placeholders))
        module = payload_module(FETCH, version, EntityType.response)
        parts = splice(encoded, [s for s in spans if s], module.FetchResponse.__flexible__)
        sent = b"".join(p if isinstance(p, bytes) else p.read() for p in parts)
        assert sent == encode_response(9, fetch_response(version, records))
    finally:
        for span in spans:
            if span:
                span.close()


def test_many_fetches_leave_no_descriptor_open(tmp_path: Path, serve: Any) -> None:
    log_dir = tmp_path / "logs"
    write_topic(log_dir)
    before = len(os.listdir("/proc/self/fd"))
    with serve(log_dir) as port:
        for _ in range(3):
            rows = kafka_python_rows(port, {TOPIC: PARTITIONS}, False)
            assert len(rows) == PARTITIONS * PER_PARTITION
    assert len(os.listdir("/proc/self/fd")) <= before + 2  # the server is stopped: all closed


@pytest.mark.parametrize("version", [11, 12])
def test_a_fetch_naming_a_topic_twice_is_answered_in_request_order(
    tmp_path: Path, serve: Any, version: int
) -> None:
    """Apache Kafka's Java consumer rotates the partitions it fetches, so one request may name
    a topic twice (a, b, a): the answer keeps the request's order, a topic entry for each run,
    as Kafka's does, and each partition's records (sent from their files) are its own. Before,
    the partitions were grouped by topic while the record spans were spliced in request order:
    the server closed the connection ("a record span's token is not in the encoded response")."""
    import socket

    from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse
    from kafka.record import MemoryRecords
    from topics import produce_codecs

    produce_codecs(tmp_path / "logs")
    part = FetchRequest.FetchTopic.FetchPartition
    asked = [("codec-none", 0), ("codec-lz4", 0), ("codec-none", 1), ("codec-lz4", 2)]
    fetch = FetchRequest(version=version, replica_id=-1, max_wait_ms=0, min_bytes=1,
                         max_bytes=50 << 20, isolation_level=0, session_id=0, session_epoch=-1,
                         topics=[FetchRequest.FetchTopic(topic=t, partitions=[
                             part(partition=p, current_leader_epoch=-1, fetch_offset=0,
                                  log_start_offset=-1, partition_max_bytes=1 << 20)])
                                 for t, p in asked],
                         forgotten_topics_data=[], rack_id="")  # fmt: skip
    fetch.with_header(correlation_id=5)
    with serve(tmp_path / "logs") as port, socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(bytes(fetch.encode(version=version, header=True, framed=True)))
        size = int.from_bytes(sock.recv(4, socket.MSG_WAITALL), "big")
        raw = sock.recv(size, socket.MSG_WAITALL)
    answer = FetchResponse.decode(raw, version=version, header=True)
    got = [(t.topic, p.partition_index) for t in answer.responses for p in t.partitions]
    assert got == asked
    on_disk = disk_rows(tmp_path / "logs", "codec-(none|lz4)")
    for topic in answer.responses:
        for p in topic.partitions:
            records, values = MemoryRecords(p.records), []
            while (batch := records.next_batch()) is not None:
                values += [(r.offset, r.value) for r in batch]
            mine = [(r[2], r[4]) for r in on_disk if r[:2] == (topic.topic, p.partition_index)]
            assert p.error_code == 0 and values == mine and mine
