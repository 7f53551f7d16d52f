"""Every API version ``kafkatier serve`` lists in ApiVersions answers a request of that version:
a request built from kio's classes for it (every field filled, every array one element deep,
names of a topic and a group that exist) gets a response that decodes as that version's, on a
connection that stays usable. Clients pin old versions (sarama 1.22 sends Fetch v4, whose
request has no fetch-session fields, and found that answered with an internal error): what
ApiVersions promises, each version must keep."""

from __future__ import annotations

import dataclasses
import datetime
import io
import socket
import struct
import types
import typing
import uuid
from pathlib import Path
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer
from serve_clients import raw_socket
from test_connection import read_frame

from kafkatier.serve.apis.versions import SUPPORTED
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record

TOPIC = "t"
SAMPLE_DEPTH = 3
AS_A_CONSUMER = {"acks": -1, "replica_id": -1}
"""Fields whose zero means something else: a Produce with acks=0 gets no answer (as from
Kafka); replica_id 0 would be a follower's fetch."""


def _sample(kind: Any, depth: int) -> Any:
    """A value of the kio field type ``kind``: arrays of one element (none below
    SAMPLE_DEPTH), optional values present, names of the served topic."""
    origin = typing.get_origin(kind)
    if origin is tuple:
        return (_sample(typing.get_args(kind)[0], depth + 1),) if depth < SAMPLE_DEPTH else ()
    if origin in (typing.Union, types.UnionType):
        present = [a for a in typing.get_args(kind) if a is not type(None)]
        return _sample(present[0], depth) if present else None
    if dataclasses.is_dataclass(kind):
        return _entity(kind, depth + 1)
    for base, value in ((bool, False), (int, 0), (str, TOPIC), (bytes, b""),
                        (datetime.timedelta, datetime.timedelta(0)),
                        (uuid.UUID, uuid.UUID(int=0))):  # fmt: skip
        if isinstance(kind, type) and issubclass(kind, base):
            return value
    raise TypeError(f"no sample for {kind!r}")


def _entity(cls: Any, depth: int = 0) -> Any:
    hints = typing.get_type_hints(cls)
    values = {f.name: AS_A_CONSUMER.get(f.name, _sample(hints[f.name], depth))
              for f in dataclasses.fields(cls) if f.init and f.name in hints}  # fmt: skip
    return cls(**values)


def _frame(request: Any, correlation: int) -> bytes:
    header_class = type(request).__header_schema__
    buf = io.BytesIO()
    entity_writer(header_class)(buf, header_class(
        request_api_key=type(request).__api_key__, request_api_version=type(request).__version__,
        correlation_id=correlation, client_id="every-version"))  # fmt: skip
    entity_writer(type(request))(buf, request)
    payload = buf.getvalue()
    return struct.pack(">i", len(payload)) + payload


VERSIONS = [(key, v) for key, (low, high) in sorted(SUPPORTED.items())
            for v in range(low, high + 1)]  # fmt: skip


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Path:
    logs = tmp_path_factory.mktemp("every") / "logs"
    with LogDirectory(logs) as log_dir:
        log = log_dir.get_or_create(TOPIC, 0)
        log.append(build_batch([Record(0, 1_700_000_000_000, b"k", b"v")]))
    return logs


@pytest.mark.parametrize(("api_key", "version"), VERSIONS, ids=[f"{k}v{v}" for k, v in VERSIONS])
def test_each_listed_version_answers_its_request(
    api_key: int, version: int, served: Path, serve: Any
) -> None:
    request = _entity(load_request_schema(api_key, version))
    response_class = load_response_schema(api_key, version)
    with serve(served, group__initial__rebalance__delay__ms="0") as port, \
            raw_socket(port) as sock:  # fmt: skip
        sock.sendall(_frame(request, 7))
        frame = read_frame(sock)
        header, used = entity_reader(response_class.__header_schema__)(frame, 0)
        assert header.correlation_id == 7
        entity_reader(response_class)(frame, used)  # the body decodes as this version's
        if api_key not in (17, 36):  # SASL exchanges may end a connection: Kafka's rule
            _still_answers(sock)


def _still_answers(sock: socket.socket) -> None:
    """An ApiVersions v0 on the same connection is answered: nothing broke it."""
    sock.sendall(struct.pack(">ihhih", 10 + 1, 18, 0, 8, 1) + b"t")
    assert struct.unpack_from(">i", read_frame(sock))[0] == 8
