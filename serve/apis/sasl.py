"""SaslHandshake (key 17) and SaslAuthenticate (key 36) outside an authentication exchange: on
a listener without SASL, or again after the connection authenticated. Kafka's KafkaApis answers
both with ILLEGAL_SASL_STATE (no re-authentication, KIP-368, here); the exchange itself is
kafkatier.serve.authentication's."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

from kafkatier.serve.apis.versions import SASL_AUTHENTICATE, SASL_HANDSHAKE
from kafkatier.serve.context import ServeContext
from kafkatier.serve.protocol import build, payload_module


async def handshake(ctx: ServeContext, version: int, request: Any) -> Any:
    module = payload_module(SASL_HANDSHAKE, version, EntityType.response)
    return build(module.SaslHandshakeResponse, error_code=ErrorCode.illegal_sasl_state,
                 mechanisms=())  # fmt: skip


async def authenticate(ctx: ServeContext, version: int, request: Any) -> Any:
    module = payload_module(SASL_AUTHENTICATE, version, EntityType.response)
    return build(module.SaslAuthenticateResponse, error_code=ErrorCode.illegal_sasl_state,
                 error_message="SaslAuthenticate request received after successful "
                 "authentication or on a listener without SASL", auth_bytes=b"",
                 session_lifetime=datetime.timedelta(0))  # fmt: skip
