"""Record bytes sent from the segment file itself (``sendfile``), as Kafka's broker sends them.

A fetch from local segments does not read the record batches into memory: it keeps the span of
the ``.log`` file that holds them (:class:`FileSpan`, with the file open, so retention deleting
the segment meanwhile cannot take the bytes away), and the response is written as its encoded
parts around those spans, each span sent with ``loop.sendfile`` (``os.sendfile`` on a plain
socket; asyncio reads and writes it on a TLS one). Records from the remote tier are already in
memory (a ranged GET's run, which the chunk cache keeps): a :class:`MemorySpan` views them and
they are written from that view, not copied into the encoded frame and out of it again.

How the parts are found: the response is encoded with a 16-byte random token in place of each
span's records. A token appears once in the encoded frame (2^-128 odds of anything else
matching), right after its length prefix: the compact length (unsigned varint of length + 1) in
flexible versions, an int32 otherwise. :func:`splice` replaces each prefix with the span's and
the token with the span, and the frame's size prefix with the real size.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import struct
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from kafkatier.storage.record.varint import encode_unsigned_varint

TOKEN_BYTES = 16
_I32 = struct.Struct(">i")


class _OpenSpans:
    """How many :class:`FileSpan` descriptors the process holds (responses being read or
    written, across connections and the read threads): what ``fetch`` bounds."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0

    def add(self, n: int) -> None:
        with self._lock:
            self.count += n


OPEN_SPANS: Final = _OpenSpans()


@dataclass
class FileSpan:
    """``size`` bytes of an open ``.log`` file from ``position``; ``token`` stands for them in
    the encoded response until :func:`splice`. Each open one is counted in
    :data:`OPEN_SPANS` until closed."""

    fd: int
    position: int
    size: int
    token: bytes = field(default_factory=lambda: os.urandom(TOKEN_BYTES))
    closed: bool = False

    @classmethod
    def open(cls, path: Path, position: int, size: int) -> FileSpan:
        span = cls(os.open(path, os.O_RDONLY), position, size)
        OPEN_SPANS.add(1)
        return span

    def read(self) -> bytes:
        """The bytes themselves (a test's view, or a transport without ``sendfile``)."""
        return os.pread(self.fd, self.size, self.position)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        OPEN_SPANS.add(-1)
        with contextlib.suppress(OSError):
            os.close(self.fd)

    def __len__(self) -> int:
        return self.size


@dataclass
class MemorySpan:
    """Records already in memory (a view of a remote run); ``token`` as :class:`FileSpan`'s."""

    data: memoryview
    token: bytes = field(default_factory=lambda: os.urandom(TOKEN_BYTES))

    @property
    def size(self) -> int:
        return self.data.nbytes

    def read(self) -> bytes:
        return bytes(self.data)

    def close(self) -> None:
        """Nothing to give back (the view's buffer is freed with its last reference)."""

    def __len__(self) -> int:
        return self.data.nbytes


Span = FileSpan | MemorySpan
Part = bytes | Span


@dataclass
class Spliced:
    """A handler's response whose records include spans to send from their files or memory."""

    response: object
    spans: list[Span]


def splice(frame: bytes, spans: Sequence[Span], flexible: bool) -> list[Part]:
    """The frame as parts, each span's token (and its length prefix) replaced (docstring)."""
    parts: list[Part] = []
    at, grown = _I32.size, 0
    token_prefix = encode_unsigned_varint(TOKEN_BYTES + 1) if flexible else _I32.pack(TOKEN_BYTES)
    for span in spans:
        found = frame.find(span.token, at)
        start = found - len(token_prefix)
        if found < 0 or frame[start:found] != token_prefix:
            raise ValueError("a record span's token is not in the encoded response")
        prefix = encode_unsigned_varint(span.size + 1) if flexible else _I32.pack(span.size)
        parts += [frame[at:start] + prefix, span]
        grown += len(prefix) + span.size - len(token_prefix) - TOKEN_BYTES
        at = found + TOKEN_BYTES
    parts.append(frame[at:])
    size = _I32.unpack_from(frame)[0] + grown
    first = parts[0]
    assert isinstance(first, bytes)
    parts[0] = _I32.pack(size) + first
    return parts


async def write_parts(writer: asyncio.StreamWriter, parts: Sequence[Part]) -> None:
    """Write the parts in order, file spans by ``sendfile``, memory spans from their views;
    every span is closed after."""
    loop = asyncio.get_running_loop()
    try:
        for part in parts:
            if isinstance(part, MemorySpan):
                writer.write(part.data)
            elif isinstance(part, FileSpan):
                await writer.drain()
                with os.fdopen(os.dup(part.fd), "rb") as file:
                    sent = await loop.sendfile(writer.transport, file, part.position, part.size)
                if sent != part.size:  # the file was cut under us: the frame cannot be ended
                    raise ConnectionError(f"segment file ended {part.size - sent} bytes early")
            else:
                writer.write(part)
        await writer.drain()
    finally:
        close_spans(parts)


def close_spans(parts: Sequence[object]) -> None:
    for part in parts:
        if isinstance(part, (FileSpan, MemorySpan)):
            part.close()
