"""ApiVersions (key 18): the versions of :data:`versions.SUPPORTED`, truthfully.

A client may open with a version newer than the server knows; Kafka then answers in version 0
with UNSUPPORTED_VERSION and its list, and the client retries with the highest version both
know (KIP-511). :func:`unsupported` is that answer.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.api_versions.v0 import response as v0
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

from kafkatier.serve.apis.versions import API_VERSIONS, SUPPORTED
from kafkatier.serve.context import ServeContext
from kafkatier.serve.protocol import build, payload_module


async def handle(ctx: ServeContext, version: int, request: Any) -> Any:
    return answer(version, ErrorCode.none)


def unsupported() -> Any:
    return answer(0, ErrorCode.unsupported_version)


def answer(version: int, error: ErrorCode) -> Any:
    module = v0 if version == 0 else payload_module(API_VERSIONS, version, EntityType.response)
    keys = tuple(
        build(module.ApiVersion, api_key=key, min_version=low, max_version=high)
        for key, (low, high) in sorted(SUPPORTED.items())
    )
    return build(module.ApiVersionsResponse, error_code=error, api_keys=keys,
                 throttle_time=datetime.timedelta(0))  # fmt: skip
