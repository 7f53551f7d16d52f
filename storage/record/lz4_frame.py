"""Kafka's LZ4 frame (kafka-format.md §2.3; ``Lz4BlockOutputStream`` / ``Lz4BlockInputStream``).

Layout written by Kafka for magic >= 1::

    04 22 4D 18        magic 0x184D2204, little-endian
    60                 FLG: version 01, independent blocks, no checksums, no content size
    40                 BD: max block size code 4 (64 KiB)
    82                 HC: (xxh32(FLG BD, seed 0) >> 8) & 0xFF
    then blocks        uint32 LE size (bit 31 = stored raw) + data, each <= 64 KiB of input
    00 00 00 00        end mark (no content checksum)

``lz4.frame.compress`` with independent 64 KiB blocks, no content size and no checksums emits
exactly this layout (including the raw-block rule: stored raw when compression does not shrink
the block), so the writer is one C call. The reader is our own: Kafka refuses linked blocks and
dictionary ids (which ``lz4.frame`` would accept), tolerates a content size and block checksums,
never verifies the content checksum, and for magic 0 ignores the header checksum that old
Kafka versions computed wrongly (over the magic too).
"""

from __future__ import annotations

import functools
import struct
from typing import Final

import lz4.block
import lz4.frame

from kafkatier.storage.errors import CompressionError

MAGIC: Final = b"\x04\x22\x4d\x18"
DEFAULT_LEVEL: Final = 9  # Kafka's default; it selects lz4-java's fast compressor
_FLG_VERSION_MASK: Final = 0xC0
_FLG_INDEPENDENT: Final = 0x20
_FLG_BLOCK_CHECKSUM: Final = 0x10
_FLG_CONTENT_SIZE: Final = 0x08
_FLG_CONTENT_CHECKSUM: Final = 0x04
_FLG_DICT_ID: Final = 0x01
RAW_BLOCK: Final = 0x80000000
_U32: Final = struct.Struct("<I")

_P1: Final = 2654435761
_P2: Final = 2246822519
_P3: Final = 3266489917
_P4: Final = 668265263
_P5: Final = 374761393
_M32: Final = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes | memoryview, seed: int = 0) -> int:
    """XXH32. Pure Python: needed only for the 1-3 byte frame descriptor and for block
    checksums, which no Kafka writer emits (so the slow path is the rare one)."""
    n = len(data)
    pos = 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32]
        lanes = struct.unpack_from(f"<{(n // 16) * 4}I", data)
        for i, lane in enumerate(lanes):
            j = i & 3
            v[j] = (_rotl((v[j] + lane * _P2) & _M32, 13) * _P1) & _M32
        pos = (n // 16) * 16
        h = _rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)
    else:
        h = seed + _P5
    h = (h + n) & _M32
    while pos + 4 <= n:
        (word,) = _U32.unpack_from(data, pos)
        h = (_rotl((h + word * _P3) & _M32, 17) * _P4) & _M32
        pos += 4
    for b in bytes(data[pos:]):
        h = (_rotl((h + b * _P5) & _M32, 11) * _P1) & _M32
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    return h ^ (h >> 16)


def compress(data: bytes | bytearray | memoryview, level: int | None = None) -> bytes:
    """Kafka's frame; level 9 (the default) is the fast compressor, other levels are LZ4-HC."""
    level = DEFAULT_LEVEL if level is None else level
    if not 1 <= level <= 17:
        raise CompressionError(f"lz4 level {level} outside 1..17", codec="lz4")
    out: bytes = lz4.frame.compress(
        data,
        compression_level=0 if level == DEFAULT_LEVEL else level,
        block_size=lz4.frame.BLOCKSIZE_MAX64KB,
        block_linked=False,
        content_checksum=False,
        block_checksum=False,
        store_size=False,
    )
    return out


@functools.lru_cache(maxsize=256)
def _header_checksum(descriptor: bytes) -> int:
    """HC of a frame descriptor (FLG, BD and any content size), remembered: nearly every frame
    of a log has the same few descriptor bytes, and xxh32 in Python took as long as liblz4's
    decoding of the frames (a cProfile of ``bench/compaction.py --codec lz4``'s compaction:
    0.13 s each for 20,000 frames)."""
    return (xxh32(descriptor) >> 8) & 0xFF


KAFKA_DESCRIPTOR: Final = MAGIC + b"\x60\x40\x82"  # the FLG, BD and HC in the layout above
MAX_BLOCK: Final = 1 << 16  # BD code 4


def decode_kafka_frame(data: memoryview) -> bytes | None:
    """A frame in exactly the layout above with one block (what Kafka writes for up to 64 KiB of
    records, a batch of ~100 small records) decoded in one liblz4 call, with the checks
    :func:`decompress` makes of it; None for any other frame or a block that does not decode,
    which the rest of :func:`decompress` then takes (and reports). The descriptor and size walk
    there cost more than liblz4 itself for such small frames (the cleaner decodes every batch
    twice)."""
    n = len(data)
    if n < 15 or data[:7] != KAFKA_DESCRIPTOR:
        return None
    (word,) = _U32.unpack_from(data, 7)
    size = word & ~RAW_BLOCK
    if size > MAX_BLOCK or n != size + 15 or _U32.unpack_from(data, size + 11)[0] != 0:
        return None
    block = data[11 : 11 + size]
    if word & RAW_BLOCK:
        return bytes(block)
    try:
        out: bytes = lz4.block.decompress(block, uncompressed_size=MAX_BLOCK)
    except lz4.block.LZ4BlockError:
        return None
    return out


def _read_descriptor(data: memoryview, verify_hc: bool) -> tuple[int, int, int]:
    """Validate the frame descriptor; returns (position of the first block, max block size, FLG)."""
    if len(data) < 7 or bytes(data[:4]) != MAGIC:
        raise CompressionError("lz4: invalid frame magic", codec="lz4")
    flg, bd = data[4], data[5]
    if flg & _FLG_DICT_ID:
        raise CompressionError("lz4: frames with a dictionary id are unsupported", codec="lz4")
    if flg & 0x02 or flg & _FLG_VERSION_MASK != 0x40:
        raise CompressionError(f"lz4: unsupported FLG byte {flg:#04x}", codec="lz4")
    if not flg & _FLG_INDEPENDENT:
        raise CompressionError(
            "lz4: dependent (linked) block stream is unsupported by Kafka", codec="lz4"
        )
    code = (bd >> 4) & 7
    if bd & 0x8F or code < 4:
        raise CompressionError(f"lz4: invalid BD byte {bd:#04x}", codec="lz4")
    hc_pos = 14 if flg & _FLG_CONTENT_SIZE else 6
    if len(data) <= hc_pos:
        raise CompressionError("lz4: truncated frame descriptor", codec="lz4")
    if verify_hc and data[hc_pos] != _header_checksum(bytes(data[4:hc_pos])):
        raise CompressionError("lz4: stream frame descriptor corrupted", codec="lz4")
    return hc_pos + 1, 1 << (2 * code + 8), flg


def decompress(
    data: bytes | bytearray | memoryview, *, ignore_header_checksum: bool = False
) -> bytes:
    """Decode a frame as Kafka's reader does; ``ignore_header_checksum`` is for magic 0."""
    view = memoryview(data).cast("B")
    one_block = decode_kafka_frame(view)
    if one_block is not None:
        return one_block
    pos, max_block, flg = _read_descriptor(view, not ignore_header_checksum)
    if not ignore_header_checksum and not flg & (_FLG_BLOCK_CHECKSUM | _FLG_CONTENT_CHECKSUM):
        _check_block_sizes(view, pos, max_block)
        return _decode_frame(view)  # what every Kafka writer emits: liblz4 decodes it whole
    checksummed = bool(flg & _FLG_BLOCK_CHECKSUM)
    out: list[bytes] = []
    while True:
        if pos + 4 > len(view):
            raise CompressionError("lz4: truncated frame (no end mark)", codec="lz4")
        (word,) = _U32.unpack_from(view, pos)
        pos += 4
        if word == 0:
            return b"".join(out)
        size = word & ~RAW_BLOCK
        if size > max_block:
            raise CompressionError(f"lz4: block size {size} exceeds max {max_block}", codec="lz4")
        block = view[pos : pos + size]
        pos += size
        if len(block) != size:
            raise CompressionError("lz4: truncated block", codec="lz4")
        if checksummed:
            pos = _check_block(view, pos, block)
        out.append(bytes(block) if word & RAW_BLOCK else _decode_block(block, max_block))


def _check_block(view: memoryview, pos: int, block: memoryview) -> int:
    if pos + 4 > len(view) or _U32.unpack_from(view, pos)[0] != xxh32(block):
        raise CompressionError("lz4: block checksum mismatch", codec="lz4")
    return pos + 4


def _decode_block(block: memoryview, max_block: int) -> bytes:
    try:
        out: bytes = lz4.block.decompress(block, uncompressed_size=max_block)
    except lz4.block.LZ4BlockError as exc:
        raise CompressionError(f"lz4: corrupt block ({exc})", codec="lz4") from None
    return out


def _decode_frame(view: memoryview) -> bytes:
    """A descriptor-checked frame with independent blocks and no checksums, decoded by liblz4
    in one call (the per-block loop above costs several times the codec itself)."""
    try:
        out: bytes = lz4.frame.decompress(view)
    except RuntimeError as exc:
        raise CompressionError(f"lz4: corrupt frame ({exc})", codec="lz4") from None
    return out


def _check_block_sizes(view: memoryview, pos: int, max_block: int) -> None:
    """Kafka's reader rejects a block over the frame's maximum and a frame without end mark;
    liblz4 is more lenient, so walk the size words first (one step per 64 KiB block)."""
    while pos + 4 <= len(view):
        (word,) = _U32.unpack_from(view, pos)
        if word == 0:
            return
        size = word & ~RAW_BLOCK
        if size > max_block:
            raise CompressionError(f"lz4: block size {size} exceeds max {max_block}", codec="lz4")
        pos += 4 + size
    raise CompressionError("lz4: truncated frame (no end mark)", codec="lz4")
