"""Streaming part transfers for :class:`~kafkatier.tiering.s3store.S3Store`: every byte is read
from disk (upload) or received (download) exactly once, and hashed on the way.

Upload (:func:`send_parts`): the calling thread reads the file one part at a time and feeds the
file's SHA-256 in order; worker threads compute each part's MD5 and send the part. S3 defines a
part's entity tag as the MD5 of its bytes, and the tag of the assembled object as the MD5 of the
parts' MD5s with ``-<parts>`` (:func:`multipart_etag`); both answers are compared with the
local digests, so the stored object is proven to be the bytes read, without reading the file a
second time (to precompute the tag) or sending a HEAD.

Download (:func:`receive_parts`): ranged GETs of one part each run on the workers, at most
``window`` parts ahead of the calling thread, which writes them in order and feeds SHA-256: the
caller gets the digest of the file it wrote without reading it back.

Both keep at most ``window`` parts in memory per transfer; the worker pool is the store's, shared
by all its transfers, so the store's ``max_concurrency`` bounds the requests in flight.
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from kafkatier.tiering.errors import RemoteVerifyError

SendPart = Callable[[int, bytes], str]
"""Uploads part ``number`` (1-based) and returns the entity tag the server answered."""
GetRange = Callable[[int, int | None], bytes]
"""Bytes [start, end) of the object; ``end`` None: to its end."""


@dataclass(frozen=True)
class Sent:
    """What :func:`send_parts` sent: the parts' MD5s, the file's SHA-256 and size."""

    md5s: list[bytes]
    sha256: str
    size: int


def md5_etag(data: bytes) -> str:
    """S3's entity tag of an object PUT in one request: the quoted MD5 of its bytes."""
    return f'"{hashlib.md5(data, usedforsecurity=False).hexdigest()}"'


def multipart_etag(md5s: list[bytes]) -> str:
    """S3's entity tag of a multipart object: the MD5 of its parts' MD5s, ``-<parts>``."""
    combined = hashlib.md5(b"".join(md5s), usedforsecurity=False).hexdigest()
    return f'"{combined}-{len(md5s)}"'


def same_etag(answer: str, expected: str) -> bool:
    """Entity tags compared as S3 servers send them (some leave the quotes off)."""
    return answer.strip('"') == expected.strip('"')


def _checked_part(send: SendPart, number: int, data: bytes, key: str) -> bytes:
    digest = hashlib.md5(data, usedforsecurity=False).digest()
    answer = send(number, data)
    if not same_etag(answer, digest.hex()):
        raise RemoteVerifyError(f"part {number} differs: etag {answer} vs {digest.hex()}",
                                key=key)  # fmt: skip
    return digest


def send_parts(
    path: Path, part_size: int, window: int, pool: ThreadPoolExecutor, send: SendPart, key: str
) -> Sent:
    """Read ``path`` once, part by part, and send every part through ``pool`` (module
    docstring). On any failure the parts not yet started are cancelled and the error raised."""
    sha = hashlib.sha256()
    flight: deque[Future[bytes]] = deque()
    md5s: list[bytes] = []
    size = 0
    try:
        with open(path, "rb") as src:
            while chunk := src.read(part_size):
                sha.update(chunk)
                size += len(chunk)
                if len(flight) >= max(window, 1):
                    md5s.append(flight.popleft().result())
                number = len(md5s) + len(flight) + 1
                flight.append(pool.submit(_checked_part, send, number, chunk, key))
        while flight:
            md5s.append(flight.popleft().result())
    finally:
        for future in flight:
            future.cancel()
    return Sent(md5s, sha.hexdigest(), size)


def receive_parts(
    path: Path,
    size: int,
    part_size: int,
    window: int,
    pool: ThreadPoolExecutor,
    get: GetRange,
    key: str,
    on_part: Callable[[int], None] | None = None,
) -> str:
    """Download the ``size`` bytes of an object into ``path`` with ranged GETs through ``pool``
    and return their SHA-256 (module docstring). The last range is open-ended and every range's
    length is checked, so an object of another size fails with :class:`RemoteVerifyError`."""
    starts = list(range(0, size, max(part_size, 1)))
    sha = hashlib.sha256()
    flight: deque[tuple[int, Future[bytes]]] = deque()
    try:
        with open(path, "wb") as dst:
            for index, start in enumerate(starts):
                end = None if index + 1 == len(starts) else start + part_size
                if len(flight) >= max(window, 1):
                    _write_next(flight, dst, sha, on_part, key)
                flight.append(((end or size) - start, pool.submit(get, start, end)))
            while flight:
                _write_next(flight, dst, sha, on_part, key)
    finally:
        for _, future in flight:
            future.cancel()
    return sha.hexdigest()


def _write_next(
    flight: deque[tuple[int, Future[bytes]]],
    dst: BinaryIO,
    sha: hashlib._Hash,
    on_part: Callable[[int], None] | None,
    key: str,
) -> None:
    length, future = flight[0]
    data = future.result()
    flight.popleft()
    if len(data) != length:
        raise RemoteVerifyError(f"ranged read returned {len(data)} bytes, expected {length}",
                                key=key)  # fmt: skip
    dst.write(data)
    sha.update(data)
    if on_part is not None:
        on_part(len(data))
