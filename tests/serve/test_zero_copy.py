"""Record spans sent from their files (serve/zero_copy.py): the spliced frame is byte for byte
the frame encoded with the records themselves, in flexible and older Fetch versions; and a
server answering many fetches closes every span's descriptor."""

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

from kafkatier.serve.apis.versions import FETCH
from kafkatier.serve.protocol import build, encode_response, payload_module
from kafkatier.serve.zero_copy import FileSpan, splice


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


@pytest.mark.parametrize("version", [4, 11, 12, 16])  # int32 lengths up to 11, compact after
@pytest.mark.parametrize("sizes", [[61], [200, 5000], [130_000, 0, 70]])
def test_a_spliced_frame_is_the_frame_with_the_records(
    tmp_path: Path, version: int, sizes: list[int]
) -> None:
    data = os.urandom(sum(sizes) + 100)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    spans, records, at = [], [], 7
    for size in sizes:
        records.append(data[at:at + size])
        spans.append(FileSpan.open(path, at, size) if size else None)
        at += size
    try:
        placeholders = [s.token if s else b"" for s in spans]
        encoded = encode_response(9, fetch_response(version, placeholders))
        module = payload_module(FETCH, version, EntityType.response)
        parts = splice(encoded, [s for s in spans if s], module.FetchResponse.__flexible__)
        sent = b"".join(p.read() if isinstance(p, FileSpan) else p for p in parts)
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
