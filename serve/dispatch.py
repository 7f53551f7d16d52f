"""Requests to handlers: one API key, one handler module (``apis/``), every served version.

An API key or version that is not served (:data:`versions.SUPPORTED`) cannot be parsed, so the
connection is closed, as Kafka closes it; ApiVersions is the exception, answered in version 0
with UNSUPPORTED_VERSION and the served list (KIP-511), so a newer client can step down.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

from kio.index import load_request_schema

from kafkatier.serve.apis import (
    api_versions,
    cluster,
    configs,
    epochs,
    fetch,
    group_admin,
    groups,
    list_offsets,
    metadata,
    offsets,
    sasl,
    writes,
)
from kafkatier.serve.apis.versions import (
    API_VERSIONS,
    DESCRIBE_CLUSTER,
    DESCRIBE_CONFIGS,
    DESCRIBE_GROUPS,
    FETCH,
    FIND_COORDINATOR,
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    LIST_GROUPS,
    LIST_OFFSETS,
    METADATA,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    OFFSET_FOR_LEADER_EPOCH,
    PRODUCE,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    SUPPORTED,
    SYNC_GROUP,
    supports,
)
from kafkatier.serve.context import CLIENT, ServeContext
from kafkatier.serve.protocol import MalformedRequest, decode_request, encode_response, peek_header

Handler = Callable[[ServeContext, int, Any], Awaitable[Any]]

HANDLERS: dict[int, Handler] = {
    PRODUCE: writes.handle,
    FETCH: fetch.handle,
    LIST_OFFSETS: list_offsets.handle,
    METADATA: metadata.handle,
    API_VERSIONS: api_versions.handle,
    DESCRIBE_CLUSTER: cluster.handle,
    DESCRIBE_CONFIGS: configs.handle,
    OFFSET_COMMIT: offsets.offset_commit,
    OFFSET_FETCH: offsets.offset_fetch,
    FIND_COORDINATOR: groups.find_coordinator,
    JOIN_GROUP: groups.join_group,
    HEARTBEAT: groups.heartbeat,
    LEAVE_GROUP: groups.leave_group,
    SYNC_GROUP: groups.sync_group,
    DESCRIBE_GROUPS: group_admin.describe_groups,
    LIST_GROUPS: group_admin.list_groups,
    OFFSET_FOR_LEADER_EPOCH: epochs.handle,
    SASL_HANDSHAKE: sasl.handshake,
    SASL_AUTHENTICATE: sasl.authenticate,
}
assert set(HANDLERS) == set(SUPPORTED), "every served API key needs a handler, and only those"


class UnsupportedRequest(MalformedRequest):
    """An API key or version this server does not serve (closes the connection)."""


async def dispatch(ctx: ServeContext, frame: bytes) -> bytes | None:
    """The response frame to ``frame``, or None when the request wants none (acks=0)."""
    key, version, correlation = peek_header(frame)
    if not supports(key, version):
        if key == API_VERSIONS:
            return encode_response(correlation, api_versions.unsupported())
        raise UnsupportedRequest(f"api key {key} version {version} is not served "
                                 "(ApiVersions lists what is)")  # fmt: skip
    header, request = decode_request(frame, load_request_schema(key, version))
    CLIENT.set(dataclasses.replace(CLIENT.get(), client_id=header.client_id or ""))
    response = await HANDLERS[key](ctx, version, request)
    ctx.metrics.answered(type(request).__name__.removesuffix("Request"), response)
    return None if response is None else encode_response(header.correlation_id, response)
