"""A fault-injecting TCP proxy in front of the S3 server, for the fault tests.

Each accepted connection takes the next fault from a queue (``ok`` once it is empty):

    ok            pass bytes both ways
    500 / 503     read one request, answer ``500 InternalError`` / ``503 SlowDown``, close
    reset-up:N    forward N request bytes, then reset both sides (mid-upload)
    reset-down:N  forward N response bytes, then reset both sides (mid-download)
    stall:S       hold the connection S seconds before forwarding (a read timeout)
    corrupt-down:N  flip the N-th response byte (a bit flip the transport does not catch)

``outage(fault)`` applies one fault to every connection until ``recover()``. Requests are
forwarded verbatim, Host header included, so SigV4 signatures still verify.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections import deque

from kafkatier.tiering.store.s3store import S3Store

_ERRORS = {
    "500": b"500 Internal Server Error", "503": b"503 Slow Down",
}
_CODES = {"500": b"InternalError", "503": b"SlowDown"}


class FaultProxy:
    def __init__(self, target_port: int) -> None:
        self.target = ("127.0.0.1", target_port)
        self.faults: deque[str] = deque()
        self.seen: list[str] = []
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._server.getsockname()[1])
        self._stop = False
        self.down: str | None = None
        self._live: set[socket.socket] = set()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def inject(self, *faults: str) -> None:
        self.faults.extend(faults)

    def outage(self, fault: str) -> None:
        """Every connection from now on gets ``fault``; open ones are reset."""
        self.down = fault
        _reset(*list(self._live))

    def recover(self) -> None:
        self.down = None

    def close(self) -> None:
        self._stop = True
        self._server.close()

    def _accept(self) -> None:
        while not self._stop:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            fault = self.down or (self.faults.popleft() if self.faults else "ok")
            self.seen.append(fault)
            self._live.add(client)
            threading.Thread(target=self._handle, args=(client, fault), daemon=True).start()

    def _handle(self, client: socket.socket, fault: str) -> None:
        kind, _, arg = fault.partition(":")
        if kind in _ERRORS:
            _answer_error(client, kind)
            return
        if kind == "stall":
            time.sleep(float(arg))
        try:
            upstream = socket.create_connection(self.target)
        except OSError:  # the server is gone (session teardown)
            _reset(client)
            return
        up_limit = int(arg) if kind == "reset-up" else None
        down_limit = int(arg) if kind == "reset-down" else None
        corrupt_at = int(arg) if kind == "corrupt-down" else None
        done = threading.Event()
        threading.Thread(target=_pipe, args=(client, upstream, up_limit, None, done),
                         daemon=True).start()
        _pipe(upstream, client, down_limit, corrupt_at, done)


def _reset(*socks: socket.socket) -> None:
    for s in socks:
        with contextlib.suppress(OSError):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()


def _pipe(src: socket.socket, dst: socket.socket, limit: int | None, corrupt_at: int | None,
          done: threading.Event) -> None:
    sent = 0
    try:
        while not done.is_set():
            data = src.recv(65536)
            if not data:
                break
            if corrupt_at is not None and sent <= corrupt_at < sent + len(data):
                buf = bytearray(data)
                buf[corrupt_at - sent] ^= 0x01
                data = bytes(buf)
            if limit is not None and sent + len(data) >= limit:
                dst.sendall(data[: max(limit - sent, 0)])
                done.set()
                _reset(src, dst)
                return
            dst.sendall(data)
            sent += len(data)
    except OSError:
        pass
    done.set()
    _reset(src, dst)


def _answer_error(client: socket.socket, kind: str) -> None:
    data = b""
    with contextlib.suppress(OSError):
        client.settimeout(10)
        while b"\r\n\r\n" not in data:
            chunk = client.recv(65536)
            if not chunk:
                break
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        while len(body) < length:
            chunk = client.recv(65536)
            if not chunk:
                break
            body += chunk
        xml = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>' + _CODES[kind]
               + b"</Code><Message>injected</Message></Error>")
        client.sendall(b"HTTP/1.1 " + _ERRORS[kind] + b"\r\nContent-Type: application/xml\r\n"
                       + b"Content-Length: " + str(len(xml)).encode()
                       + b"\r\nConnection: close\r\n\r\n" + xml)
    _reset(client)


class OutageAfterFirstObject(S3Store):
    """S3 goes down (503 on every request, through ``proxy``) right after the first object a
    pass uploads has landed: the pass must fail cleanly and the next one converge."""

    proxy: FaultProxy

    def put_file(self, key, path, *, progress=None):  # type: ignore[no-untyped-def]
        info = super().put_file(key, path, progress=progress)
        self.proxy.outage("503")
        return info


def impatient_store(url: str, endpoint: str, attempts: int = 8, **options: int) -> S3Store:
    """An S3 store with short timeouts (a stall fails fast), for tests through the proxy."""
    return S3Store(url, endpoint_url=endpoint, region="us-east-1", max_attempts=attempts,
                   read_timeout=2, connect_timeout=2, max_concurrency=2,
                   **options)  # type: ignore[arg-type]
