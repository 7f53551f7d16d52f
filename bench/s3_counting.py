"""A counting HTTP proxy in front of an S3 server, for the benchmarks: S3 requests by kind,
counted on the server side of the network (independent of the client's own counts).

The proxy runs in its own process (:func:`start_proxy`). It pumps bytes each way; the
client-to-server side parses request heads (and skips their bodies) to classify them by method,
query and headers (GET, HEAD, LIST, PUT, COPY, DELETE and the multipart kinds); responses are
copied as they come, so ``Expect: 100-continue`` works untouched. ``GET /__counts__`` on the
proxy answers the counts so far as JSON. :class:`Counters` reads them, together with SeaweedFS's
own total (``SeaweedFS_s3_request_total`` on ``weed mini``'s ``-metricsPort``, which counts a HEAD
as a GET: a check of the total, not of the kinds).
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import re
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafkatier.tiering.store.weed import free_ports

COUNTS_PATH = "/__counts__"


def classify(method: str, target: str, headers: dict[str, str]) -> str:
    """The S3 operation kind of one path-style request."""
    path, _, query = target.partition("?")
    params = {p.split("=", 1)[0] for p in query.split("&") if p}
    keyed = "/" in path.strip("/")
    copy = "x-amz-copy-source" in headers
    if method == "GET":
        if "uploadId" in params:
            return "LIST_PARTS"
        if "uploads" in params:
            return "LIST_MPU"
        return "GET" if keyed else "LIST"
    if method == "PUT":
        if "partNumber" in params:
            return "PART_COPY" if copy else "PART"
        return "COPY" if copy else "PUT"
    if method == "POST":
        if "uploads" in params:
            return "MPU_NEW"
        if "uploadId" in params:
            return "MPU_DONE"
        if "delete" in params:
            return "DEL_MANY"
    if method == "DELETE" and "uploadId" in params:
        return "MPU_ABORT"
    return method


async def _copy(src: asyncio.StreamReader, dst: asyncio.StreamWriter, n: int) -> None:
    while n > 0:
        data = await src.read(min(n, 1 << 16))
        if not data:
            raise ConnectionError("short body")
        dst.write(data)
        n -= len(data)
    await dst.drain()


async def _copy_chunked(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    while True:
        line = await src.readuntil(b"\r\n")
        dst.write(line)
        size = int(line.split(b";")[0], 16)
        if size == 0:
            while (trailer := await src.readuntil(b"\r\n")) != b"\r\n":
                dst.write(trailer)
            dst.write(b"\r\n")
            await dst.drain()
            return
        await _copy(src, dst, size + 2)


async def _requests(src: asyncio.StreamReader, dst: asyncio.StreamWriter,
                    client: asyncio.StreamWriter, counts: Counter[str]) -> None:  # fmt: skip
    """Client to server: count each request, forward it and its body."""
    while True:
        try:
            head = await src.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        line, *lines = head.decode("latin-1").split("\r\n")
        method, target, _ = line.split(" ", 2)
        if target == COUNTS_PATH:
            body = json.dumps(counts).encode()
            client.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s"
                         % (len(body), body))  # fmt: skip
            await client.drain()
            return
        headers = {k.strip().lower(): v.strip()
                   for k, _, v in (h.partition(":") for h in lines if h)}  # fmt: skip
        counts[classify(method, target, headers)] += 1
        dst.write(head)
        if "chunked" in headers.get("transfer-encoding", "").lower():
            await _copy_chunked(src, dst)
        else:
            await _copy(src, dst, int(headers.get("content-length", "0")))


async def _responses(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    while data := await src.read(1 << 16):
        dst.write(data)
        await dst.drain()


async def _connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      upstream: int, counts: Counter[str]) -> None:  # fmt: skip
    up_reader, up_writer = await asyncio.open_connection("127.0.0.1", upstream)
    tasks = [asyncio.ensure_future(_requests(reader, up_writer, writer, counts)),
             asyncio.ensure_future(_responses(up_reader, writer))]  # fmt: skip
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        for w in (writer, up_writer):
            w.close()


def serve_proxy(port: int, upstream: int) -> None:
    """The proxy process: listens on ``port``, forwards to ``upstream``, serves its counts as
    JSON at ``COUNTS_PATH``."""
    counts: Counter[str] = Counter()

    async def main() -> None:
        server = await asyncio.start_server(
            lambda r, w: _connection(r, w, upstream, counts), "127.0.0.1", port, backlog=1024
        )
        async with server:
            await server.serve_forever()

    asyncio.run(main())


@dataclass
class Counters:
    """The proxy's per-kind counts and SeaweedFS's own total, read from outside."""

    proxy_url: str
    metrics_url: str

    def read(self) -> tuple[Counter[str], int]:
        with urllib.request.urlopen(self.proxy_url + COUNTS_PATH, timeout=30) as r:
            kinds = Counter(json.loads(r.read()))
        with urllib.request.urlopen(self.metrics_url, timeout=30) as r:
            text = r.read().decode()
        total = sum(float(m) for m in re.findall(r"^SeaweedFS_s3_request_total\{.*\} (\S+)$",
                                                 text, re.M))  # fmt: skip
        return kinds, round(total)


def weed_metrics_port(root: Path) -> tuple[int, int]:
    """(pid, -metricsPort) of the ``weed mini`` this process started with data in ``root``."""
    marker = f"-dir={root / 'data'}"
    for proc in Path("/proc").iterdir():
        try:
            args = (proc / "cmdline").read_bytes().decode().split("\0")
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if marker in args and ppid == os.getpid():
            port = next(a.split("=", 1)[1] for a in args if a.startswith("-metricsPort="))
            return int(proc.name), int(port)
    raise RuntimeError("weed mini process not found")




def start_proxy(upstream: int) -> tuple[Any, str]:
    """The counting proxy in its own process (spawned), once it answers."""
    port = free_ports(1)[0]
    proc = multiprocessing.get_context("spawn").Process(
        target=serve_proxy, args=(port, upstream), daemon=True
    )
    proc.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(url + COUNTS_PATH, timeout=5).read()
            return proc, url
        except OSError:
            if time.monotonic() > deadline or not proc.is_alive():
                raise
            time.sleep(0.1)
