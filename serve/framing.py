"""Size-prefixed frames off a client's socket (Kafka's NetworkReceive).

Every request is ``size:int32`` and ``size`` bytes. A size below the smallest request header or
above ``socket.request.max.bytes`` is refused before anything is allocated for it (a client
sending 2 GiB cannot make the server reserve 2 GiB), and a connection closed mid-frame is a
truncated frame; both end that connection only.
"""

from __future__ import annotations

import asyncio
import logging
import struct

_SIZE = struct.Struct(">i")
log = logging.getLogger("kafkatier.serve")
MIN_REQUEST_BYTES = 10  # api_key, api_version, correlation_id, client_id length


class FrameError(Exception):
    """A frame that cannot be read: bad size or cut short (the message says which)."""


async def read_frame(
    reader: asyncio.StreamReader, max_bytes: int, min_bytes: int = MIN_REQUEST_BYTES,
    idle_s: float | None = None,
) -> bytes | None:  # fmt: skip
    """The next request frame's bytes, or None when the client closed between frames or sent
    nothing for ``idle_s`` seconds (``connections.max.idle.ms``: Kafka closes such a
    connection; kept, idle ones held descriptors until new clients were refused); ``min_bytes``
    0 for raw SASL tokens (a SaslHandshake v0 exchange), which have no header."""
    try:
        async with asyncio.timeout(idle_s):  # no task per read, as wait_for makes
            head = await reader.readexactly(_SIZE.size)
    except TimeoutError:
        log.debug("closing a connection idle for %s s (connections.max.idle.ms)", idle_s)
        return None
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise FrameError(f"connection closed inside a size prefix ({len(exc.partial)} of 4 "
                         "bytes)") from None  # fmt: skip
    (size,) = _SIZE.unpack(head)
    if size < min_bytes or size > max_bytes:
        raise FrameError(f"frame size {size} outside [{min_bytes}, {max_bytes}] "
                         "(socket.request.max.bytes; sasl.server.max.receive.size before "
                         "authentication)")  # fmt: skip
    try:
        return await reader.readexactly(size)
    except asyncio.IncompleteReadError as exc:
        raise FrameError(f"connection closed after {len(exc.partial)} of a {size}-byte "
                         "frame") from None  # fmt: skip
