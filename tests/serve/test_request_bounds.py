"""The walk before kio: tagged fields a schema does not know are dropped, known ones kept
(KIP-482: a reader skips a tag it does not know); requests are encoded by kio's own writer and
then given the extra tags by hand."""

from __future__ import annotations

import datetime
import io
import struct
import uuid
from typing import Any

import pytest
from kio.serial import entity_writer
from kio.static.constants import EntityType

from kafkatier.serve.protocol import decode_request, payload_module
from kafkatier.serve.request_bounds import checked_request

UNKNOWN_TAG = b"\x01\x07\x02ZZ"  # one tagged field: tag 7, two bytes
FETCH_OFFSET = 0x0102030405060708  # found again in the encoded bytes


def encoded(request: Any, correlation: int = 5) -> bytes:
    """A request frame (no size prefix) as kio writes it, with an empty header tag section."""
    header = struct.pack(">hhih", request.__api_key__, request.__version__, correlation, 1)
    buf = io.BytesIO()
    entity_writer(type(request))(buf, request)
    return header + b"t\x00" + buf.getvalue()


def fetch_v13(cluster_id: str | None) -> Any:
    m = payload_module(1, 13, EntityType.request)
    partition = m.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=FETCH_OFFSET,
                                 last_fetched_epoch=-1, log_start_offset=-1,
                                 partition_max_bytes=1 << 20)  # fmt: skip
    return m.FetchRequest(
        cluster_id=cluster_id, replica_id=-1, max_wait=datetime.timedelta(milliseconds=500),
        min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
        topics=(m.FetchTopic(topic_id=uuid.UUID(int=7), partitions=(partition,)),),
        forgotten_topics_data=(), rack_id="",
    )


def with_unknown_tags(frame: bytes, where: str) -> bytes:
    """``frame`` with tag 7 added to the header's, a partition's or the body's tag section
    (each empty or holding known tags before)."""
    if where == "header":
        at = 10 + 1  # past key, version, correlation, client id "t"
        return frame[:at] + UNKNOWN_TAG + frame[at + 1 :]
    if where == "partition":  # its fixed fields end 24 bytes after the fetch offset's start
        at = frame.index(struct.pack(">q", FETCH_OFFSET)) + 24
        return frame[:at] + UNKNOWN_TAG + frame[at + 1 :]
    if frame[-1] == 0:  # an empty body section
        return frame[:-1] + UNKNOWN_TAG
    start = frame.rindex(b"\x01\x00")  # the body section holding tag 0 (cluster_id) only
    return frame[:start] + b"\x02" + frame[start + 1 :] + UNKNOWN_TAG[1:]


@pytest.mark.parametrize("cluster_id", [None, "c1"])
@pytest.mark.parametrize("where", ["header", "partition", "body"])
def test_unknown_tagged_fields_are_dropped_and_known_ones_kept(
    where: str, cluster_id: str | None
) -> None:
    request = fetch_v13(cluster_id)
    plain = encoded(request)
    tagged = with_unknown_tags(plain, where)
    assert tagged != plain
    assert checked_request(tagged, type(request)) == plain
    header, body = decode_request(tagged, type(request))
    assert body == request and header.correlation_id == 5


def test_a_request_without_unknown_tags_is_handed_on_as_it_is() -> None:
    request = fetch_v13("c1")
    plain = encoded(request)
    assert checked_request(plain, type(request)) is plain
