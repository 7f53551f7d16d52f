"""SASL authentication of one connection on a SASL_PLAINTEXT or SASL_SSL listener, as Kafka's
``SaslServerAuthenticator`` runs it before any other request:

1. ApiVersions (optional, answered as usual), then SaslHandshake naming a mechanism: one of the
   listener's ``sasl.enabled.mechanisms``, else UNSUPPORTED_SASL_MECHANISM with the enabled list
   and the connection closes.
2. Handshake v1 (KIP-152): the mechanism's tokens travel in SaslAuthenticate requests (v0-2),
   the server's in their responses; a refusal is SASL_AUTHENTICATION_FAILED with Kafka's message,
   then the connection closes. Handshake v0 (clients before Kafka 1.0): the tokens travel as raw
   size-prefixed frames with no request header, and a refusal just closes the connection.
3. Any other request before the exchange completes closes the connection, as Kafka does.

Frames before authentication are limited to ``sasl.server.max.receive.size``; after a refusal
the connection stays open ``connection.failed.authentication.delay.ms`` (Kafka's brake on
guessing) before it closes. Each refusal is
one warning naming the peer, the listener, the user and the mechanism; never a password, a
token or a proof (malformed requests are not quoted either: they may hold one).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import struct
from typing import Any

from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

from kafkatier.serve.apis.versions import (
    API_VERSIONS,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    supports,
)
from kafkatier.serve.context import ServeContext
from kafkatier.serve.dispatch import dispatch_frame
from kafkatier.serve.framing import MIN_REQUEST_BYTES, read_frame
from kafkatier.serve.protocol import (
    MalformedRequest,
    build,
    decode_request,
    encode_response,
    payload_module,
    peek_header,
)
from kafkatier.serve.security.exchange import AuthenticationFailed, SaslExchange
from kafkatier.serve.security.sasl import SaslSettings

log = logging.getLogger("kafkatier.serve")
_SIZE = struct.Struct(">i")


class Refused(Exception):
    """The connection closes before authentication: ``message`` is the log line (after the
    peer and listener), ``reply`` what the client gets first (may be empty)."""

    def __init__(self, message: str, reply: bytes = b"") -> None:
        super().__init__(message)
        self.reply = reply


class SaslSession:
    """One connection's way through the steps of the module docstring."""

    def __init__(self, ctx: ServeContext, settings: SaslSettings, listener: str, peer: str):
        self.ctx, self.settings, self.listener, self.peer = ctx, settings, listener, peer
        self.exchange: SaslExchange | None = None
        self.raw = False  # after a v0 handshake: raw tokens
        self.user: str | None = None  # set once authenticated

    async def run(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """True once the client authenticated; False when the connection is to close."""
        try:
            while self.user is None:
                floor = 0 if self.raw else MIN_REQUEST_BYTES
                frame = await read_frame(reader, self.settings.max_receive_bytes, floor,
                                         self.ctx.config.idle_s)  # fmt: skip
                if frame is None:
                    return False
                writer.write(await self._handle(frame))
                await writer.drain()
        except Refused as exc:
            log.warning("%s from %s on listener %s", exc, self.peer, self.listener)
            await self._linger(exc.reply, reader, writer)
            return False
        log.debug("%s authenticated as %r on listener %s", self.peer, self.user, self.listener)
        return True

    async def _linger(self, reply: bytes, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:  # fmt: skip
        """Send ``reply``, then wait ``connection.failed.authentication.delay.ms`` (Kafka delays
        the close, not the answer) reading whatever the client still sends: closing with unread
        input would reset the connection and could drop the reply before the client reads it."""
        with contextlib.suppress(ConnectionError, TimeoutError):
            writer.write(reply)
            await writer.drain()
            async with asyncio.timeout(self.settings.failed_delay_ms / 1000):
                while await reader.read(65536):
                    pass

    async def _handle(self, frame: bytes) -> bytes:
        if self.raw:
            return await self._raw_token(frame)
        key, version, _correlation = peek_header(frame)
        if key == API_VERSIONS and self.exchange is None:
            return await dispatch_frame(self.ctx, frame)
        if key == SASL_HANDSHAKE and self.exchange is None and supports(key, version):
            return self._handshake(frame, version)
        if key == SASL_AUTHENTICATE and self.exchange is not None and supports(key, version):
            return await self._authenticate(frame, version)
        raise Refused(f"closing the connection: api key {key} version {version} before SASL "
                      "authentication completed (Kafka closes it too)")  # fmt: skip

    def _handshake(self, frame: bytes, version: int) -> bytes:
        header, request = _decode(frame, SASL_HANDSHAKE, version)
        module = payload_module(SASL_HANDSHAKE, version, EntityType.response)
        enabled = self.settings.mechanisms
        ok = request.mechanism in enabled
        reply = encode_response(header.correlation_id, build(
            module.SaslHandshakeResponse, mechanisms=enabled,
            error_code=ErrorCode.none if ok else ErrorCode.unsupported_sasl_mechanism))  # fmt: skip
        if not ok:
            raise Refused(f"closing the connection: SASL mechanism {_shown(request.mechanism)} is "
                          f"not enabled ({', '.join(enabled)})", reply)  # fmt: skip
        self.exchange = self.settings.exchange(request.mechanism)
        self.raw = version == 0
        return reply

    async def _authenticate(self, frame: bytes, version: int) -> bytes:
        header, request = _decode(frame, SASL_AUTHENTICATE, version)
        module = payload_module(SASL_AUTHENTICATE, version, EntityType.response)
        try:
            token = await self._step(request.auth_bytes)
        except Refused as exc:
            raise Refused(str(exc), encode_response(header.correlation_id, build(
                module.SaslAuthenticateResponse, error_code=ErrorCode.sasl_authentication_failed,
                error_message=exc.reply.decode(), auth_bytes=b"",
                session_lifetime=datetime.timedelta(0)))) from None  # fmt: skip
        return encode_response(header.correlation_id, build(
            module.SaslAuthenticateResponse, error_code=ErrorCode.none, error_message=None,
            auth_bytes=token, session_lifetime=datetime.timedelta(0)))  # fmt: skip

    async def _raw_token(self, frame: bytes) -> bytes:
        try:
            token = await self._step(frame)
        except Refused as exc:  # raw tokens have no error response: the connection closes
            raise Refused(str(exc)) from None
        return _SIZE.pack(len(token)) + token

    async def _step(self, token: bytes) -> bytes:
        """The mechanism's answer to ``token``; a refusal (after Kafka's delay) is
        :class:`Refused` with Kafka's message as its reply (encoded by the caller)."""
        assert self.exchange is not None
        try:
            answer = self.exchange.step(token)
        except AuthenticationFailed as exc:
            who = f"user {_shown(exc.user)}" if exc.user else "no user name"
            raise Refused(f"authentication failed ({who}, {self.exchange.mechanism}: "
                          f"{exc.reason})", exc.reply.encode()) from None  # fmt: skip
        if self.exchange.complete:
            self.user = self.exchange.user
        return answer


SHOWN_CHARS = 64


def _shown(text: str) -> str:
    """A client's string for the log, cut to :data:`SHOWN_CHARS` (an unauthenticated client
    sent a 300,000-character user name, logged whole on every attempt)."""
    if len(text) <= SHOWN_CHARS:
        return repr(text)
    return f"{text[:SHOWN_CHARS]!r}... ({len(text)} characters)"


def _decode(frame: bytes, key: int, version: int) -> tuple[Any, Any]:
    try:
        return decode_request(frame, load_request_schema(key, version))
    except MalformedRequest:  # kio's message could quote the bytes: a token, a password
        raise Refused(f"closing the connection: a malformed request (api key {key} version "
                      f"{version})") from None  # fmt: skip
