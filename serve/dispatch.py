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
from kafkatier.serve.zero_copy import Part, Span, Spliced, close_spans, splice

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


Reply = bytes | list[Part] | None
"""A response frame, or its parts around record spans sent from their files (zero_copy.py), or
None when the request wants no response (acks=0)."""


async def dispatch(ctx: ServeContext, frame: bytes) -> Reply:
    """The response to ``frame`` (:data:`Reply`)."""
    key, version, correlation = peek_header(frame)
    if not supports(key, version):
        if key == API_VERSIONS:
            return encode_response(correlation, api_versions.unsupported())
        raise UnsupportedRequest(f"api key {key} version {version} is not served "
                                 "(ApiVersions lists what is)")  # fmt: skip
    header, request = decode_request(frame, load_request_schema(key, version))
    CLIENT.set(dataclasses.replace(CLIENT.get(), client_id=header.client_id or ""))
    response = await HANDLERS[key](ctx, version, request)
    spans: list[Span] = []
    if isinstance(response, Spliced):
        spans = response.spans
        response = response.response
    try:
        ctx.metrics.answered(type(request).__name__.removesuffix("Request"), response)
        if response is None:
            return None
        encoded = encode_response(header.correlation_id, response)
        return splice(encoded, spans, type(response).__flexible__) if spans else encoded
    except BaseException:
        close_spans(spans)
        raise


async def dispatch_frame(ctx: ServeContext, frame: bytes) -> bytes:
    """:func:`dispatch` of a request whose answer holds no record spans (before login: only
    ApiVersions and the SASL exchange are answered); b"" when it wants none."""
    reply = await dispatch(ctx, frame)
    if isinstance(reply, list):
        close_spans(reply)
        raise UnsupportedRequest("records may not be fetched before authentication")
    return reply or b""
