"""One client connection: read a request, answer it, read the next, so responses keep request
order (Kafka too processes one request per connection at a time).

A bad frame (size out of bounds, cut short, not parseable, an API not served) closes this
connection with one log line naming the peer and the fault; other connections never notice. A
client that vanishes mid-response is a closed connection, not an error.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from kafkatier.serve.context import CLIENT, ClientInfo, ServeContext
from kafkatier.serve.dispatch import dispatch
from kafkatier.serve.framing import FrameError, read_frame
from kafkatier.serve.protocol import MalformedRequest

log = logging.getLogger("kafkatier.serve")


async def serve_connection(
    ctx: ServeContext, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    peer = writer.get_extra_info("peername")
    CLIENT.set(ClientInfo("", peer[0] if isinstance(peer, tuple) else str(peer)))
    ctx.metrics.connection_opened()
    bad_frame = False
    try:
        while (frame := await read_frame(reader, ctx.config.max_request_bytes)) is not None:
            response = await dispatch(ctx, frame)
            if response is not None:
                writer.write(response)
                await writer.drain()
    except (FrameError, MalformedRequest) as exc:
        bad_frame = True
        log.warning("closing the connection from %s: %s", _peer(peer), exc)
    except (ConnectionError, asyncio.IncompleteReadError):
        pass  # the client went away
    except Exception:
        log.exception("closing the connection from %s after an unexpected error", _peer(peer))
    finally:
        ctx.metrics.connection_closed(bad_frame)
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


def _peer(peer: object) -> str:
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer)
