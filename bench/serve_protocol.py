"""kio against kafka-python's protocol module, side by side in one run: encoding a FetchResponse
v12 (8 partitions x 1 MiB of records) and decoding a 16-partition FetchRequest v12.

Usage: ``.venv/bin/python bench/serve_protocol.py`` (prints the figures; the README's "Wire
protocol library" paragraph quotes them).
"""

from __future__ import annotations

import argparse
import datetime
import io
import os
import time
from collections.abc import Callable

from kafka.protocol.consumer.fetch import FetchRequest as KpRequest
from kafka.protocol.consumer.fetch import FetchResponse as KpResponse
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import request as kio_req
from kio.schema.fetch.v12 import response as kio_resp
from kio.schema.types import TopicName
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32, i32Timedelta, i64

PARTITIONS = 8
RECORDS = os.urandom(1 << 20)


def kio_encode() -> bytes:
    parts = tuple(
        kio_resp.PartitionData(
            partition_index=i32(p), error_code=ErrorCode.none, high_watermark=i64(1000),
            last_stable_offset=i64(1000), log_start_offset=i64(0), aborted_transactions=(),
            records=RECORDS,
        )
        for p in range(PARTITIONS)
    )
    response = kio_resp.FetchResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)), error_code=ErrorCode.none,
        responses=(kio_resp.FetchableTopicResponse(topic=TopicName("t"), partitions=parts),),
    )
    buf = io.BytesIO()
    entity_writer(kio_resp.FetchResponse)(buf, response)
    return buf.getvalue()


def kp_encode() -> bytes:
    data = KpResponse.FetchableTopicResponse.PartitionData
    parts = [
        data(partition_index=p, error_code=0, high_watermark=1000, last_stable_offset=1000,
             log_start_offset=0, aborted_transactions=[], records=RECORDS)
        for p in range(PARTITIONS)
    ]
    topic = KpResponse.FetchableTopicResponse(topic="t", partitions=parts)
    response = KpResponse(version=12, throttle_time_ms=0, error_code=0, session_id=0,
                          responses=[topic])
    return bytes(response.encode(version=12))


def fetch_request() -> bytes:
    part = KpRequest.FetchTopic.FetchPartition
    topic = KpRequest.FetchTopic(topic="t", partitions=[
        part(partition=p, current_leader_epoch=-1, fetch_offset=5, log_start_offset=-1,
             partition_max_bytes=1 << 20)
        for p in range(16)
    ])
    request = KpRequest(version=12, replica_id=-1, max_wait_ms=500, min_bytes=1,
                        max_bytes=50 << 20, isolation_level=1, session_id=0, session_epoch=-1,
                        topics=[topic], forgotten_topics_data=[], rack_id="")
    return bytes(request.encode(version=12))


def per_call(func: Callable[[], object], rounds: int) -> float:
    func()
    start = time.perf_counter()
    for _ in range(rounds):
        func()
    return (time.perf_counter() - start) / rounds


def main() -> None:
    size = len(kio_encode())
    assert size == len(kp_encode())
    for name, enc in (("kio", kio_encode), ("kafka-python", kp_encode)):
        took = per_call(enc, 20)
        print(f"{name:13s} encode FetchResponse v12 ({size} B): {took * 1e3:.2f} ms")
    raw = fetch_request()
    kio_read = entity_reader(kio_req.FetchRequest)
    took_kio = per_call(lambda: kio_read(raw, 0), 5000)
    took_kp = per_call(lambda: KpRequest.decode(raw, version=12), 5000)
    print(f"{'kio':13s} decode FetchRequest v12 (16 partitions): {took_kio * 1e6:.1f} us")
    print(f"{'kafka-python':13s} decode FetchRequest v12 (16 partitions): {took_kp * 1e6:.1f} us")


if __name__ == "__main__":
    argparse.ArgumentParser(description="kio against kafka-python, side by side.").parse_args()
    main()
