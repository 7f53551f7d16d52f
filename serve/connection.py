"""One client connection: the TLS handshake on an SSL or SASL_SSL listener, SASL authentication
on a SASL one (kafkatier.serve.authentication), then read a request, answer it, read the next,
so responses keep request order (Kafka too processes one request per connection at a time).

A bad frame (size out of bounds, cut short, not parseable, an API not served) or a failed TLS
handshake (no or an untrusted client certificate, a plaintext client on a TLS port) closes this
connection with one log line naming the peer and the fault; other connections never notice. A
client that vanishes mid-response is a closed connection, not an error.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl

from kafkatier.serve.authentication import SaslSession
from kafkatier.serve.context import CLIENT, ClientInfo, ServeContext
from kafkatier.serve.dispatch import dispatch
from kafkatier.serve.framing import FrameError, read_frame
from kafkatier.serve.protocol import MalformedRequest
from kafkatier.serve.zero_copy import write_parts

log = logging.getLogger("kafkatier.serve")
TLS_HANDSHAKE_S = 10.0


async def serve_connection(
    ctx: ServeContext, listener: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    peer = writer.get_extra_info("peername")
    CLIENT.set(ClientInfo("", peer[0] if isinstance(peer, tuple) else str(peer), listener))
    ctx.metrics.connection_opened()
    bad_frame = False
    try:
        if await _secured(ctx, listener, _peer(peer), reader, writer):
            idle = ctx.config.idle_s
            while (frame := await read_frame(reader, ctx.config.max_request_bytes,
                                             idle_s=idle)) is not None:  # fmt: skip
                response = await dispatch(ctx, frame)
                if isinstance(response, list):
                    await write_parts(writer, response)  # records sent from their files
                elif response is not None:
                    writer.write(response)
                    await writer.drain()
    except (FrameError, MalformedRequest) as exc:
        bad_frame = True
        host = peer[0] if isinstance(peer, tuple) else str(peer)
        ctx.closes.warn((host, str(exc)), "closing the connection from %s: %s", _peer(peer), exc)
    except (ssl.SSLError, TimeoutError) as exc:
        log.warning("TLS with %s on listener %s failed: %s", _peer(peer), listener,
                    getattr(exc, "reason", None) or str(exc) or "the handshake timed out")
    except (ConnectionError, asyncio.IncompleteReadError):
        pass  # the client went away
    except Exception:
        log.exception("closing the connection from %s after an unexpected error", _peer(peer))
    finally:
        ctx.metrics.connection_closed(bad_frame)
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


async def _secured(ctx: ServeContext, listener: str, peer: str, reader: asyncio.StreamReader,
                   writer: asyncio.StreamWriter) -> bool:  # fmt: skip
    """TLS and SASL as the listener's protocol asks; False when the connection is to close."""
    security = ctx.config.security_of(listener)
    if security.tls is not None:
        await writer.start_tls(security.tls, ssl_handshake_timeout=TLS_HANDSHAKE_S)
    if security.sasl is None:
        return True
    return await SaslSession(ctx, security.sasl, listener, peer).run(reader, writer)


def _peer(peer: object) -> str:
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer)
