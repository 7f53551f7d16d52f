"""The Kafka wire protocol through ``kio``: versioned message classes, request headers, frames.

A request frame is ``size:int32`` then the request header (v1: ``api_key:int16
api_version:int16 correlation_id:int32 client_id:nullable string``; v2, for flexible versions,
adds tagged fields) and the body. A response frame is ``size:int32``, the response header (v0:
``correlation_id:int32``; v1 adds tagged fields; ApiVersions always answers with v0) and the body.
The header version follows from the API version (kio's ``__header_schema__``).

Entities differ by version only in which fields exist, so handlers build responses with
:func:`build`, which drops the fields a version lacks: one handler serves every version.
"""

from __future__ import annotations

import dataclasses
import io
import struct
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from kio.index import load_payload_module
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

from kafkatier.serve.request_bounds import checked_request

_KEY_VERSION_ID = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")


class MalformedRequest(Exception):
    """A frame that does not parse as the request its header names."""


@dataclass(frozen=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def peek_header(frame: bytes) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id): the fixed start of every request header."""
    if len(frame) < _KEY_VERSION_ID.size:
        raise MalformedRequest(f"a request of {len(frame)} bytes is shorter than its header")
    key, version, correlation = _KEY_VERSION_ID.unpack_from(frame)
    return int(key), int(version), int(correlation)


def payload_module(api_key: int, version: int, kind: EntityType) -> ModuleType:
    """kio's module of one API version's request or response (``kind``)."""
    return load_payload_module(api_key, version, kind)  # type: ignore[arg-type]


def decode_request(frame: bytes, request_class: type[Any]) -> tuple[RequestHeader, Any]:
    """The header and the body of ``frame``; any parse failure is :class:`MalformedRequest`."""
    try:
        frame = checked_request(frame, request_class)  # before kio allocates from its lengths
        header, used = entity_reader(request_class.__header_schema__)(frame, 0)
        body, _size = entity_reader(request_class)(frame, used)
    except Exception as exc:  # kio raises several types on bad bytes; all mean the same here
        name, version = request_class.__name__, request_class.__version__
        raise MalformedRequest(f"a {name} v{version} that does not parse: "
                               f"{type(exc).__name__}: {exc}") from None  # fmt: skip
    # Bytes after the body are ignored, as Kafka's broker ignores them: librdkafka 2.x sends
    # three after a Metadata v12 request for one topic.
    return (
        RequestHeader(header.request_api_key, header.request_api_version,
                      header.correlation_id, header.client_id),
        body,
    )


def encode_response(correlation_id: int, response: Any) -> bytes:
    """The whole response frame: size, the response header its class names, the body."""
    header_class = type(response).__header_schema__
    buf = io.BytesIO()
    buf.write(b"\0\0\0\0")
    entity_writer(header_class)(buf, header_class(correlation_id=correlation_id))
    entity_writer(type(response))(buf, response)
    frame = buf.getbuffer()
    _SIZE.pack_into(frame, 0, len(frame) - _SIZE.size)
    del frame
    return buf.getvalue()


def build(cls: type[Any], **values: Any) -> Any:
    """``cls(**values)`` keeping only the fields ``cls`` (one version's entity) has."""
    names = _field_names(cls)
    return cls(**{k: v for k, v in values.items() if k in names})


def has_field(cls: type[Any], name: str) -> bool:
    return name in _field_names(cls)


def _field_names(cls: type[Any]) -> frozenset[str]:
    """The entity's field names, once per class (a Fetch answer builds one entity per
    partition)."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = frozenset(f.name for f in dataclasses.fields(cls))
    return names


_FIELD_NAMES: dict[type, frozenset[str]] = {}
