"""Streaming part transfers for :class:`~kafkatier.tiering.store.s3store.S3Store`: every byte is
checked on the way, with no part-sized buffers and no HEAD.

Upload (:func:`send_parts`): the calling thread reads the file one part at a time, through one
small buffer, for the file's SHA-256 (in order) and each part's CRC32C; worker threads send the
parts from the file (:class:`FileRange`), each with its CRC32C
(``x-amz-checksum-crc32c``, hardware-computed). S3 recomputes the checksum over the bytes it
received, refuses a part that differs (``BadDigest``) and echoes the checksum it stored, which
must equal ours (:func:`check_answer`). A server that echoes no checksum is checked the older
way: the part's entity tag must be the MD5 of the bytes sent. The assembled object's entity tag
must be S3's MD5 of the acknowledged parts' tags with ``-<parts>`` (:func:`multipart_etag`) and
its composite checksum the CRC32C of the parts' CRC32Cs (:func:`check_complete`). Each part is
read twice (for its checksums, then by the worker sending it; the second read comes from the
page cache), and S3's check of the CRC32C proves the bytes sent are the bytes checksummed; no
MD5 pass over the data unless the server needs it.

Download (:func:`receive_parts`): ranged GETs of one part each run on the workers, at most
``window`` parts ahead of the calling thread; each writes its body's pieces at their offsets as
they arrive (s3transfer's way: no part-sized buffers, whose fresh pages cost more than the copy),
and the calling thread feeds SHA-256 in order from the file as each part completes, while the
next ones download: the digest is of the bytes in the file, got from the page cache.

The uploads keep at most ``window`` parts in memory per transfer; the worker pool is the store's,
shared by all its transfers, so the store's ``max_concurrency`` bounds the requests in flight.
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from io import BufferedReader
from pathlib import Path
from typing import Any

from kafkatier.storage.record.crc import crc32c
from kafkatier.tiering.errors import RemoteVerifyError

SendPart = Callable[[int, "FileRange", str], Mapping[str, Any]]
"""Uploads part ``number`` (1-based) from the stream, with its base64 CRC32C; returns the
server's answer."""
Sink = Callable[[int, bytes], None]
"""Takes a piece of a body and its offset in the body."""
GetRange = Callable[[int, int | None, Sink], None]
"""Hands bytes [start, end) of the object to the sink, in pieces; ``end`` None: to its end."""


@dataclass(frozen=True)
class Proof:
    """One part (or small object) as the server acknowledged it."""

    etag: str
    crc32c: str
    """Base64 CRC32C of the bytes sent."""


@dataclass(frozen=True)
class Sent:
    """What :func:`send_parts` sent: the acknowledged parts, the file's SHA-256 and size."""

    parts: list[Proof]
    sha256: str
    size: int


def crc32c_b64(data: bytes) -> str:
    """``x-amz-checksum-crc32c``: the big-endian CRC32C, base64."""
    return base64.b64encode(crc32c(data).to_bytes(4, "big")).decode()


def composite_crc32c(parts: list[Proof]) -> str:
    """S3's composite checksum of a multipart object: the CRC32C of the parts' CRC32Cs."""
    raw = b"".join(base64.b64decode(p.crc32c) for p in parts)
    return f"{crc32c_b64(raw)}-{len(parts)}"


def md5_etag(data: bytes) -> str:
    """S3's entity tag of an object PUT in one request: the quoted MD5 of its bytes."""
    return f'"{hashlib.md5(data, usedforsecurity=False).hexdigest()}"'


def multipart_etag(md5s: list[bytes]) -> str:
    """S3's entity tag of a multipart object: the MD5 of its parts' MD5s, ``-<parts>``."""
    combined = hashlib.md5(b"".join(md5s), usedforsecurity=False).hexdigest()
    return f'"{combined}-{len(md5s)}"'


def file_etag(path: Path, threshold: int, part_size: int) -> str:
    """The entity tag S3 gives ``path`` uploaded with this threshold and part size."""
    if path.stat().st_size < threshold or path.stat().st_size == 0:
        return md5_etag(path.read_bytes())
    md5s: list[bytes] = []
    with open(path, "rb") as src:
        while block := src.read(part_size):
            md5s.append(hashlib.md5(block, usedforsecurity=False).digest())
    return multipart_etag(md5s)


def same_etag(answer: str, expected: str) -> bool:
    """Entity tags compared as S3 servers send them (some leave the quotes off)."""
    return answer.strip('"') == expected.strip('"')


def check_answer(
    answer: Mapping[str, Any], md5: Callable[[], str], crc: str, key: str, what: str
) -> Proof:
    """The server's answer to a PUT whose bytes have checksum ``crc`` and entity tag ``md5()``
    (computed only when the server echoes no checksum; module docstring)."""
    etag = str(answer["ETag"])
    echoed = answer.get("ChecksumCRC32C")
    if echoed is not None:
        if echoed != crc:
            raise RemoteVerifyError(f"{what} differs: CRC32C {echoed} vs {crc}", key=key)
    elif not same_etag(etag, expected := md5()):
        raise RemoteVerifyError(f"{what} differs: etag {etag} vs {expected}", key=key)
    return Proof(etag, crc)


def check_complete(answer: Mapping[str, Any], parts: list[Proof], key: str) -> str:
    """The assembled object is the acknowledged parts, in order; returns its entity tag."""
    etag = str(answer["ETag"])
    try:
        expected = multipart_etag([bytes.fromhex(p.etag.strip('"')) for p in parts])
    except ValueError:
        raise RemoteVerifyError(f"part etags are not MD5s: {parts[0].etag}", key=key) from None
    echoed = answer.get("ChecksumCRC32C")
    if not same_etag(etag, expected) or echoed not in (None, composite_crc32c(parts)):
        raise RemoteVerifyError(f"assembled object differs: etag {etag} vs {expected}, "
                                f"checksum {echoed}", key=key)  # fmt: skip
    return etag


class FileRange:
    """Bytes [start, start + length) of a file as a seekable stream, read as it is sent (what
    s3transfer's ReadFileChunk does): no part-sized buffer, whose fresh pages cost more than the
    copies from the page cache."""

    def __init__(self, path: Path, start: int, length: int) -> None:
        self._file = open(path, "rb")  # noqa: SIM115 (closed by close())
        self._start, self._length = start, length
        self._file.seek(start)

    def __len__(self) -> int:
        return self._length

    def tell(self) -> int:
        return self._file.tell() - self._start

    def seek(self, pos: int, whence: int = 0) -> int:
        base = (0, self.tell(), self._length)[whence]
        self._file.seek(self._start + min(max(base + pos, 0), self._length))
        return self.tell()

    def read(self, amt: int | None = -1) -> bytes:
        left = self._length - self.tell()
        return self._file.read(left if amt is None or amt < 0 else min(amt, left))

    def close(self) -> None:
        self._file.close()


def _range_md5(path: Path, start: int, length: int) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as src:
        src.seek(start)
        while length > 0 and (block := src.read(min(length, 1 << 20))):
            digest.update(block)
            length -= len(block)
    return f'"{digest.hexdigest()}"'


def _checked_part(
    send: SendPart, path: Path, number: int, start: int, length: int, crc: str, key: str
) -> Proof:
    body = FileRange(path, start, length)
    try:
        answer = send(number, body, crc)
    finally:
        body.close()
    return check_answer(answer, lambda: _range_md5(path, start, length), crc, key,
                        f"part {number}")  # fmt: skip


def _digest_range(src: BufferedReader, length: int, buffer: bytearray, sha: Any, key: str) -> str:
    """CRC32C (base64) of the next ``length`` bytes of ``src``, fed to ``sha`` as well."""
    crc, left, view = 0, length, memoryview(buffer)
    while left > 0:
        n = src.readinto(view[: min(left, len(buffer))])
        if not n:
            raise RemoteVerifyError("file shorter than when the upload began", key=key)
        crc = crc32c(view[:n], crc)
        sha.update(view[:n])
        left -= n
    return base64.b64encode(crc.to_bytes(4, "big")).decode()


def send_parts(
    path: Path, part_size: int, window: int, pool: ThreadPoolExecutor, send: SendPart, key: str
) -> Sent:
    """Read ``path`` once for the checksums, part by part, and send every part through ``pool``
    from the file (module docstring). On any failure the parts not yet started are cancelled and
    the ones on their way awaited before the error is raised, so that the caller's abort comes
    after the last part."""
    sha = hashlib.sha256()
    flight: deque[Future[Proof]] = deque()
    parts: list[Proof] = []
    size = path.stat().st_size
    buffer = bytearray(1 << 20)
    try:
        with open(path, "rb") as src:
            for start in range(0, size, max(part_size, 1)):
                length = min(part_size, size - start)
                crc = _digest_range(src, length, buffer, sha, key)
                if len(flight) >= max(window, 1):
                    parts.append(flight.popleft().result())
                number = len(parts) + len(flight) + 1
                flight.append(pool.submit(_checked_part, send, path, number, start, length, crc,
                                          key))  # fmt: skip
        while flight:
            parts.append(flight.popleft().result())
    finally:
        for future in flight:
            future.cancel()
        wait(flight)
    return Sent(parts, sha.hexdigest(), size)


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
    flight: deque[tuple[int, int, Future[int]]] = deque()
    with open(path, "w+b") as dst:
        fd = dst.fileno()
        try:
            for index, start in enumerate(starts):
                end = None if index + 1 == len(starts) else start + part_size
                if len(flight) >= max(window, 1):
                    _hash_next(flight, fd, sha, on_part, key)
                length = (end or size) - start
                flight.append((start, length, pool.submit(_fetch_range, get, fd, start, end)))
            while flight:
                _hash_next(flight, fd, sha, on_part, key)
        finally:
            for _, _, future in flight:
                future.cancel()
            wait([f for _, _, f in flight])  # no write after the file is closed
    return sha.hexdigest()


def _fetch_range(get: GetRange, fd: int, start: int, end: int | None) -> int:
    """One ranged GET written in place; returns the bytes the body held."""
    extent = [0]

    def sink(pos: int, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.pwrite(fd, view, start + pos + len(data) - len(view)):]
        extent[0] = max(extent[0], pos + len(data))

    get(start, end, sink)
    return extent[0]


def _hash_next(
    flight: deque[tuple[int, int, Future[int]]],
    fd: int,
    sha: hashlib._Hash,
    on_part: Callable[[int], None] | None,
    key: str,
) -> None:
    start, length, future = flight[0]
    got = future.result()
    flight.popleft()
    if got != length:
        raise RemoteVerifyError(f"ranged read returned {got} bytes, expected {length}", key=key)
    buffer = bytearray(min(length, 1 << 20) or 1)
    done = 0
    while done < length:
        n = os.preadv(fd, [memoryview(buffer)[: length - done]], start + done)
        if n <= 0:
            raise RemoteVerifyError("file shorter than the bytes written", key=key)
        sha.update(memoryview(buffer)[:n])
        done += n
    if on_part is not None:
        on_part(length)
