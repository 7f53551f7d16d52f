"""The compressed-payload framing Kafka uses for each codec (kafka-format.md §2).

A compressed v2 batch stores its records as one stream after the 61-byte header; legacy v0/v1
wrappers store it in the wrapper message's value. Framings:

* gzip: RFC 1952 member(s); any valid members are read (Java's ``GZIPInputStream``).
* snappy: snappy-java's xerial stream: 16-byte header ``82 'SNAPPY' 00``, int32 version 1,
  int32 compatible version 1, then blocks of int32 BE length + one raw snappy block, each
  holding <= 32 KiB of input. On read, a payload without that header is one raw snappy block.
* lz4: Kafka's own frame, see :mod:`kafkatier.storage.record.lz4_frame`.
* zstd: standard frame(s), usually without a content size (Kafka compresses by streaming).

Errors are :class:`CompressionError` naming the codec; callers add file and position.
"""

from __future__ import annotations

import struct
import threading
import zlib
from typing import Any, Final

import cramjam
import zstandard

from kafkatier.storage.errors import CompressionError
from kafkatier.storage.record import lz4_frame
from kafkatier.storage.wire import Codec

Data = bytes | bytearray | memoryview

SNAPPY_HEADER: Final = bytes.fromhex("82534e41505059000000000100000001")
SNAPPY_BLOCK: Final = 32 * 1024  # snappy-java DEFAULT_BLOCK_SIZE
_SNAPPY_MAGIC_WORD: Final = 0x82534E41  # first 4 header bytes, read as a chunk length
_SNAPPY_MAX_CHUNK: Final = 512 * 1024 * 1024
_BE_I32: Final = struct.Struct(">i")
ZSTD_DEFAULT_LEVEL: Final = 3
GZIP_DEFAULT_LEVEL: Final = -1  # zlib's default (6), as Kafka's
_GZIP_MAGIC: Final = b"\x1f\x8b"


def compress(codec: Codec, data: Data, level: int | None = None) -> bytes:
    """``data`` framed and compressed as Kafka's writer for ``codec`` does."""
    if codec == Codec.GZIP:
        return _gzip_compress(data, level)
    if codec == Codec.SNAPPY:
        return _snappy_compress(data)
    if codec == Codec.LZ4:
        framed: bytes = lz4_frame.compress(data, level)
        return framed
    if codec == Codec.ZSTD:
        return _zstd_compress(data, level)
    if codec == Codec.NONE:
        return bytes(data)
    raise CompressionError(f"unknown codec {codec!r}", codec=str(codec))


def decompress(codec: Codec, data: Data) -> bytes:
    """Everything Kafka's reader for ``codec`` accepts, decoded; CompressionError otherwise."""
    if codec == Codec.GZIP:
        return _gzip_decompress(data)
    if codec == Codec.SNAPPY:
        return _snappy_decompress(data)
    if codec == Codec.LZ4:
        plain: bytes = lz4_frame.decompress(data)
        return plain
    if codec == Codec.ZSTD:
        return _zstd_decompress(data)
    if codec == Codec.NONE:
        return bytes(data)
    raise CompressionError(f"unknown codec {codec!r}", codec=str(codec))


def _gzip_compress(data: Data, level: int | None) -> bytes:
    level = GZIP_DEFAULT_LEVEL if level is None else level
    if level != GZIP_DEFAULT_LEVEL and not 1 <= level <= 9:
        raise CompressionError(f"gzip level {level} outside 1..9", codec="gzip")
    comp = zlib.compressobj(level, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return comp.compress(data) + comp.flush()


def _gzip_decompress(data: Data) -> bytes:
    """All members; like ``GZIPInputStream``, bytes after a member that do not start another
    member are ignored."""
    out: list[bytes] = []
    rest: Data = data
    try:
        while True:
            member = zlib.decompressobj(16 + zlib.MAX_WBITS)
            out.append(member.decompress(rest))
            if not member.eof:
                raise CompressionError("gzip: truncated stream", codec="gzip")
            rest = member.unused_data
            if rest[:2] != _GZIP_MAGIC:
                return b"".join(out)
    except zlib.error as exc:
        raise CompressionError(f"gzip: {exc}", codec="gzip") from None


def _snappy_compress(data: Data) -> bytes:
    view = memoryview(data).cast("B")
    parts = [SNAPPY_HEADER]
    for start in range(0, len(view), SNAPPY_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + SNAPPY_BLOCK]))
        parts.append(_BE_I32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_raw(block: Data) -> bytes:
    try:
        out = bytes(cramjam.snappy.decompress_raw(block))
    except cramjam.DecompressionError as exc:
        raise CompressionError(f"snappy: corrupt raw block ({exc})", codec="snappy") from None
    return out


def _snappy_decompress(data: Data) -> bytes:
    """snappy-java's ``SnappyInputStream``: xerial blocks, or one raw block without the header."""
    view = memoryview(data).cast("B")
    if len(view) < len(SNAPPY_HEADER) or view[:8] != SNAPPY_HEADER[:8]:
        return _snappy_raw(view)
    out: list[Any] = []
    pos = len(SNAPPY_HEADER)
    while pos + 4 <= len(view):  # a partial length word is end of stream, as in snappy-java
        (size,) = _BE_I32.unpack_from(view, pos)
        pos += 4
        if size & 0xFFFFFFFF == _SNAPPY_MAGIC_WORD:  # a concatenated stream's header
            if pos + 12 > len(view):
                raise CompressionError("snappy: truncated concatenated header", codec="snappy")
            if view[pos - 4 : pos + 4] != SNAPPY_HEADER[:8]:
                break
            pos += 12
            continue
        if size < 0 or size > _SNAPPY_MAX_CHUNK:
            raise CompressionError(f"snappy: invalid chunk size {size}", codec="snappy")
        if pos + size > len(view):
            raise CompressionError("snappy: truncated chunk", codec="snappy")
        out.append(_snappy_block(view[pos : pos + size]))
        pos += size
    return b"".join(out)


def _snappy_block(block: Data) -> Any:
    """One raw block as cramjam's buffer (joined later without an extra copy)."""
    try:
        return cramjam.snappy.decompress_raw(block)
    except cramjam.DecompressionError as exc:
        raise CompressionError(f"snappy: corrupt raw block ({exc})", codec="snappy") from None


def _zstd_compress(data: Data, level: int | None) -> bytes:
    level = ZSTD_DEFAULT_LEVEL if level is None else level
    if not -131072 <= level <= 22:
        raise CompressionError(f"zstd level {level} outside -131072..22", codec="zstd")
    out: bytes = _ZSTD.compressor(level).compress(data)
    return out


class _ZstdContexts(threading.local):
    """This thread's zstd contexts, made once (zstandard's are not thread-safe): a context made
    per batch, and the streaming decoder for every frame, held compaction of zstd input at
    0.14x of a plain rewrite, 0.23x without (``python bench/compaction.py --codec zstd``)."""

    def __init__(self) -> None:
        self.decompressor = zstandard.ZstdDecompressor()
        self._compressors: dict[int, zstandard.ZstdCompressor] = {}

    def compressor(self, level: int) -> zstandard.ZstdCompressor:
        found = self._compressors.get(level)
        if found is None:
            found = self._compressors[level] = zstandard.ZstdCompressor(level=level)
        return found


_ZSTD = _ZstdContexts()


_ZSTD_WRITE_SIZE: Final = 1 << 20  # fewer, larger output chunks: the default 128 KiB costs 2x
_ZSTD_ONE_SHOT_MAX: Final = 64 << 20
"""The largest content size decoded in one call (its output is allocated at once, before the
frame is checked, so a frame claiming more goes through the streaming decoder)."""


def _zstd_decompress(data: Data) -> bytes:
    """One frame that states its content size (what kafkatier and zstd's one-shot API write) in
    one call; anything else (several frames, no content size, a content size over
    :data:`_ZSTD_ONE_SHOT_MAX`, or an error, reported by the streaming path) frame by frame
    with a streaming decoder, so frames without a content size work and a truncated last frame is
    an error (the one-shot API can do neither)."""
    dctx = _ZSTD.decompressor
    try:
        size = zstandard.frame_content_size(data)
        if 0 <= size <= _ZSTD_ONE_SHOT_MAX:
            one: bytes = dctx.decompress(data, allow_extra_data=False)
            return one
    except zstandard.ZstdError:
        pass  # the streaming path says what is wrong, or decodes several frames
    out: list[bytes] = []
    rest: Data = data
    try:
        while rest:
            frame = dctx.decompressobj(write_size=_ZSTD_WRITE_SIZE)
            out.append(frame.decompress(rest))
            if not frame.eof:
                raise CompressionError("zstd: truncated frame", codec="zstd")
            rest = frame.unused_data
    except zstandard.ZstdError as exc:
        raise CompressionError(f"zstd: {exc}", codec="zstd") from None
    return b"".join(out)
