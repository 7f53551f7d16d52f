"""Bad input closes that connection only, with one log line; the server keeps serving others.
Unknown API keys close the connection as Kafka does; an ApiVersions version the server does not
know gets UNSUPPORTED_VERSION and the served list in version 0 (KIP-511); Produce is refused
with POLICY_VIOLATION and a message saying why."""

from __future__ import annotations

import logging
import random
import socket
import struct
import time
from typing import Any

import pytest
from serve_clients import raw_socket

from kafkatier.serve.apis.versions import SUPPORTED


def request(api_key: int, version: int, correlation: int, body: bytes = b"") -> bytes:
    """A request frame with a v1 header (client id "t"); flexible versions need more."""
    payload = struct.pack(">hhih", api_key, version, correlation, 1) + b"t" + body
    return struct.pack(">i", len(payload)) + payload


def read_frame(sock: socket.socket) -> bytes:
    size = struct.unpack(">i", recv_exactly(sock, 4))[0]
    return recv_exactly(sock, size)


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, "connection closed"
        data += chunk
    return data


def closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def api_versions_v0(port: int) -> dict[int, tuple[int, int]]:
    """ApiVersions v0 on a fresh connection: api key -> (min, max)."""
    with raw_socket(port) as sock:
        sock.sendall(request(18, 0, 42))
        return parse_versions(read_frame(sock), 42)


def parse_versions(frame: bytes, correlation: int) -> dict[int, tuple[int, int]]:
    got_correlation, error, count = struct.unpack_from(">ihi", frame)
    assert got_correlation == correlation
    entries = [struct.unpack_from(">hhh", frame, 10 + 6 * i) for i in range(count)]
    return {key: (low, high) for key, low, high in entries} | ({-1: (error, 0)} if error else {})


@pytest.mark.parametrize(
    "garbage",
    [
        # A whole frame of random bytes (random bytes' own size prefix is, 2% of the time, a
        # legal size the rest never fills: a client that stalls, which the server waits for).
        pytest.param(struct.pack(">i", 4092) + random.Random(7).randbytes(4092), id="random-bytes"),
        pytest.param(struct.pack(">i", 2**31 - 1) + b"x" * 100, id="2GiB-frame"),
        pytest.param(struct.pack(">i", -5), id="negative-size"),
        pytest.param(request(999, 0, 1), id="unknown-api-key"),
        pytest.param(request(3, 0, 1, b"\xff\xff"), id="malformed-body"),
    ],
)
def test_bad_input_closes_only_that_connection(
    garbage: bytes, tmp_path: Any, serve: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="kafkatier.serve")
    with serve(tmp_path) as port, raw_socket(port) as bystander:
        bystander.sendall(request(18, 0, 1))  # a healthy client, connected before and after
        assert parse_versions(read_frame(bystander), 1) == SUPPORTED
        with raw_socket(port) as bad:
            bad.sendall(garbage)
            assert closed(bad)
        bystander.sendall(request(18, 0, 2))
        assert parse_versions(read_frame(bystander), 2) == SUPPORTED
        assert api_versions_v0(port) == SUPPORTED
    lines = [r.getMessage() for r in caplog.records if "closing the connection" in r.message]
    assert len(lines) == 1 and "Traceback" not in caplog.text, caplog.text


def test_a_request_that_does_not_parse_is_named(
    tmp_path: Any, serve: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The line names the request (it said only "BufferUnderflow: Buffer is exhausted")."""
    caplog.set_level(logging.WARNING, logger="kafkatier.serve")
    with serve(tmp_path) as port, raw_socket(port) as bad:
        bad.sendall(request(3, 0, 1, b"\xff\xff"))
        assert closed(bad)
    [line] = [r.getMessage() for r in caplog.records if "closing the connection" in r.message]
    assert "a MetadataRequest v0 that does not parse: " in line, line


def test_a_client_repeating_a_refused_request_is_one_line(
    tmp_path: Any, serve: Any, caplog: pytest.LogCaptureFixture
) -> None:  # fmt: skip
    """An old client reconnecting to send a request that is not served (kafka-python pinned
    to 0.10 sends Fetch v3, hundreds of times a second) is logged once, not once a close."""
    caplog.set_level(logging.WARNING, logger="kafkatier.serve")
    with serve(tmp_path) as port:
        for _ in range(30):
            with raw_socket(port) as bad:
                bad.sendall(request(999, 0, 1))
                assert closed(bad)
        assert api_versions_v0(port) == SUPPORTED
    lines = [r.getMessage() for r in caplog.records if "closing the connection" in r.message]
    assert len(lines) == 1, lines


def test_a_request_cut_short_closes_quietly(tmp_path: Any, serve: Any) -> None:
    with serve(tmp_path) as port:
        with raw_socket(port) as bad:
            bad.sendall(request(18, 0, 1)[:9])  # the client vanishes mid-request
        assert api_versions_v0(port) == SUPPORTED


def test_an_unknown_api_versions_version_gets_the_list_in_v0(tmp_path: Any, serve: Any) -> None:
    with serve(tmp_path) as port, raw_socket(port) as sock:
        sock.sendall(request(18, 99, 5))
        answer = parse_versions(read_frame(sock), 5)
        assert answer.pop(-1) == (35, 0)  # UNSUPPORTED_VERSION
        assert answer == SUPPORTED
        sock.sendall(request(18, 0, 6))  # the connection stays open for the retry
        assert parse_versions(read_frame(sock), 6) == SUPPORTED


def test_produce_is_refused_saying_why(tmp_path: Any, serve: Any) -> None:
    from kafka import KafkaProducer
    from kafka.errors import PolicyViolationError

    (tmp_path / "t-0").mkdir()
    with serve(tmp_path) as port:
        producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{port}", retries=0)
        try:
            with pytest.raises(PolicyViolationError, match="kafkatier serve is read-only"):
                producer.send("t", b"value", partition=0).get(timeout=20)
        finally:
            producer.close(timeout=5)


def test_idle_connections_and_a_client_vanishing_mid_response(
    tmp_path: Any, serve: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """200 idle connections stay open beside a working client, and clients that send a fetch
    and close before reading the response cost nothing but their own connection (no log
    line)."""
    from kafka.protocol.consumer.fetch import FetchRequest
    from topics import produce_codecs

    caplog.set_level(logging.INFO, logger="kafkatier.serve")
    produce_codecs(tmp_path / "logs")
    part = FetchRequest.FetchTopic.FetchPartition
    fetch = FetchRequest(version=12, replica_id=-1, max_wait_ms=0, min_bytes=1,
                         max_bytes=50 << 20, isolation_level=0, session_id=0, session_epoch=-1,
                         topics=[FetchRequest.FetchTopic(topic="codec-none", partitions=[
                             part(partition=p, current_leader_epoch=-1, fetch_offset=0,
                                  log_start_offset=-1, partition_max_bytes=1 << 20)
                             for p in range(3)])],
                         forgotten_topics_data=[], rack_id="")  # fmt: skip
    fetch.with_header(correlation_id=9)
    frame = bytes(fetch.encode(version=12, header=True, framed=True))
    with serve(tmp_path / "logs") as port:
        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(200)]
        try:
            for _ in range(20):
                with raw_socket(port) as vanishing:
                    vanishing.sendall(frame)  # closed before the response is read
            with raw_socket(port) as sock:
                sock.sendall(frame)
                answer = read_frame(sock)
                assert struct.unpack_from(">i", answer)[0] == 9 and len(answer) > 10_000
            assert api_versions_v0(port) == SUPPORTED
        finally:
            for sock in idle:
                sock.close()
    assert "closing the connection" not in caplog.text and "Traceback" not in caplog.text


@pytest.mark.parametrize(
    ("api", "version", "body"),
    [
        (3, 9, b"\xff\xff\xff\xff\x0f\x00\x00\x00\x00"),  # Metadata: a compact topics array
        (3, 4, b"\x7f\xff\xff\xff"),  # Metadata: an int32 topics array
        (1, 12, struct.pack(">iiiibii", -1, 500, 1, 1 << 20, 0, 0, -1)
         + b"\xff\xff\xff\xff\x0f"),  # Fetch: compact topics after the fixed fields
    ],
)
def test_a_collection_longer_than_the_request_is_refused_before_it_is_read(
    tmp_path: Any, serve: Any, caplog: pytest.LogCaptureFixture, api: int, version: int,
    body: bytes,
) -> None:  # fmt: skip
    """A 21-byte Metadata v9 whose compact topics length says 2^32 - 2: kio's native reader
    allocated the array first (34 GB) and the failed allocation aborted the whole server.
    Kafka's readers refuse a collection longer than the bytes left; so does serve, one line,
    the other clients unaffected."""
    caplog.set_level(logging.WARNING, logger="kafkatier.serve")
    flexible = (api, version) in ((3, 9), (1, 12))
    header = struct.pack(">hhih", api, version, 1, 1) + b"t" + (b"\x00" if flexible else b"")
    with serve(tmp_path) as port:
        with raw_socket(port) as bad:
            bad.sendall(struct.pack(">i", len(header + body)) + header + body)
            assert closed(bad)
        assert api_versions_v0(port) == SUPPORTED
    [line] = [r.getMessage() for r in caplog.records if "closing the connection" in r.message]
    assert "does not parse" in line and "bytes remain" in line, line


def test_an_idle_connection_is_closed_after_connections_max_idle_ms(
    tmp_path: Any, serve: Any
) -> None:
    """Kafka closes a connection that sends nothing for ``connections.max.idle.ms``: idle
    ones (a client that connected and never sent, one that stopped after ApiVersions, an
    unauthenticated one) were kept for ever, until the descriptors ran out and new clients
    were refused. One that keeps sending stays."""
    with (
        serve(tmp_path, connections__max__idle__ms="600") as port,
        raw_socket(port) as silent, raw_socket(port) as stopped, raw_socket(port) as busy,
    ):  # fmt: skip
        stopped.sendall(request(18, 0, 1))
        read_frame(stopped)
        for n in range(6):  # 1.2 s of requests every 0.2 s: never idle 0.6 s
            busy.sendall(request(18, 0, 10 + n))
            assert parse_versions(read_frame(busy), 10 + n) == SUPPORTED
            time.sleep(0.2)
        silent.settimeout(10)
        stopped.settimeout(10)
        assert closed(silent) and closed(stopped)
        busy.sendall(request(18, 0, 99))
        assert parse_versions(read_frame(busy), 99) == SUPPORTED


def test_a_request_with_tagged_fields_the_server_does_not_know_is_answered(
    tmp_path: Any, serve: Any
) -> None:
    """KIP-482: a reader skips a tagged field it does not know (a newer client may send one
    added to the version since). kio refused them and the connection was closed."""
    header = struct.pack(">hhih", 18, 3, 8, 1) + b"t"
    body = b"\x02a\x02b"  # client software name "a", version "b"
    with serve(tmp_path) as port, raw_socket(port) as sock:
        for frame in (header + b"\x01\x07\x02ZZ" + body + b"\x00",  # a header tag
                      header + b"\x00" + body + b"\x01\x05\x01Z"):  # a body tag  # fmt: skip
            sock.sendall(struct.pack(">i", len(frame)) + frame)
            correlation, error = struct.unpack_from(">ih", read_frame(sock))
            assert (correlation, error) == (8, 0)
