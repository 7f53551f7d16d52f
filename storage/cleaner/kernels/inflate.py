"""A run of lz4 batches inflated in one numba call (``storage.cleaner.compressed``).

Kafka's producers and kafkatier's writers put a batch of up to 64 KiB of records in one LZ4 frame
of one block (``lz4_frame.decode_kafka_frame``'s layout: the 7 descriptor bytes ``04 22 4D 18 60
40 82``, the block's size word, the block, the end mark). For a run of such batches the kernel
does what ``compressed.inflate`` does per batch in Python: copy the header with the codec bits
cleared and the new length, and decode the block with liblz4's ``LZ4_decompress_safe`` straight
into the run's buffer (a raw block is copied). The Python loop cost more than liblz4 itself
(the compaction bench decodes 20,000 frames of ~12 KiB twice). It stops at the first batch that
is anything else (another codec, a control or transactional batch, another frame layout, a block
that does not decode, one the chunk does not hold whole) and leaves it to the Python loop, which
handles or reports it.

liblz4 is called by name: python-lz4's extension exports ``LZ4_decompress_safe`` and is loaded
for LLVM (``load_library_permanently``) before the kernel is compiled or loaded from numba's
cache, so the cached code links to it in every process. Where that fails, :data:`AVAILABLE` is
False and the Python loop does all.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numba import types

from kafkatier.storage.wire import (
    ATTR_CODEC_MASK,
    ATTR_CONTROL,
    ATTR_TRANSACTIONAL,
    ATTRIBUTES_OFFSET,
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    Codec,
)

MAX_BLOCK = 1 << 16  # BD code 4: what the descriptor below allows
FRAME_OVERHEAD = 15  # descriptor 7, block size word 4, end mark 4
ROOM = BATCH_HEADER_SIZE + MAX_BLOCK  # what one batch may take in the output
META = 4  # per batch: position in the output, position and size in the chunk, last offset
_DESCRIPTOR = np.frombuffer(b"\x04\x22\x4d\x18\x60\x40\x82", dtype=np.uint8)
_LZ4 = int(Codec.LZ4)
_RAW = 0x80000000


def _load() -> bool:
    try:
        import llvmlite.binding as llvm
        from lz4.block import _block

        llvm.load_library_permanently(_block.__file__)
    except Exception:  # no python-lz4 extension to link: the Python loop does it
        return False
    return True


AVAILABLE = _load()
_decompress: Any = types.ExternalFunction(
    "LZ4_decompress_safe", types.int32(types.uintp, types.uintp, types.int32, types.int32)
)  # (const char* src, char* dst, int compressedSize, int dstCapacity); pointers as uintp


@numba.njit(cache=True, nogil=True, inline="always")
def _be(buf: Any, at: int, width: int) -> Any:
    value = np.int64(0)
    for i in range(width):
        value = (value << 8) | np.int64(buf[at + i])
    return value


@numba.njit(cache=True, nogil=True, inline="always")
def _le32(buf: Any, at: int) -> Any:
    return (np.int64(buf[at]) | (np.int64(buf[at + 1]) << 8) | (np.int64(buf[at + 2]) << 16)
            | (np.int64(buf[at + 3]) << 24))  # fmt: skip


@numba.njit(cache=True, nogil=True, inline="always")
def _block_size(chunk: Any, pos: int, size: int) -> Any:
    """The block size word of the batch's frame in Kafka's one-block layout; -1 otherwise."""
    frame = pos + BATCH_HEADER_SIZE
    if size - BATCH_HEADER_SIZE < FRAME_OVERHEAD:
        return -1
    for i in range(7):
        if chunk[frame + i] != _DESCRIPTOR[i]:
            return -1
    word = _le32(chunk, frame + 7)
    length = word & ~_RAW
    if length > MAX_BLOCK or size - BATCH_HEADER_SIZE != length + FRAME_OVERHEAD:
        return -1
    if _le32(chunk, frame + 11 + length) != 0:
        return -1
    return word


@numba.njit(cache=True, nogil=True)
def inflate_lz4(chunk: Any, pos: int, max_bytes: int, out: Any, meta: Any) -> tuple[int, int, int]:
    """Inflate the lz4 batches from ``pos`` into ``out`` until ``max_bytes`` are written (or
    ``out`` has no room for another, or ``meta`` no row): (where it stopped in the chunk,
    batches, bytes written); ``meta[i]`` holds the batch's ``META`` fields."""
    n = chunk.shape[0]
    total = 0
    count = 0
    while total < max_bytes and count < meta.shape[0] and out.shape[0] - total >= ROOM:
        if n - pos < BATCH_HEADER_SIZE or chunk[pos + MAGIC_OFFSET] != 2:
            break
        size = LOG_OVERHEAD + _be(chunk, pos + 8, 4)
        attrs = _be(chunk, pos + ATTRIBUTES_OFFSET, 2)
        if size < BATCH_HEADER_SIZE or pos + size > n:
            break
        if attrs & ATTR_CODEC_MASK != _LZ4 or attrs & (ATTR_CONTROL | ATTR_TRANSACTIONAL):
            break
        word = _block_size(chunk, pos, size)
        if word < 0:
            break
        length = word & ~_RAW
        src = pos + BATCH_HEADER_SIZE + 11
        dst = total + BATCH_HEADER_SIZE
        if word & _RAW:
            out[dst : dst + length] = chunk[src : src + length]
            got = length
        else:
            got = _decompress(chunk.ctypes.data + src, out.ctypes.data + dst, length, MAX_BLOCK)
            if got < 0:
                break
        out[total : total + BATCH_HEADER_SIZE] = chunk[pos : pos + BATCH_HEADER_SIZE]
        new_length = BATCH_HEADER_SIZE - LOG_OVERHEAD + got
        for i in range(4):
            out[total + 8 + i] = (new_length >> (24 - 8 * i)) & 0xFF
        out[total + ATTRIBUTES_OFFSET + 1] = (attrs & ~ATTR_CODEC_MASK) & 0xFF
        meta[count, 0] = total
        meta[count, 1] = pos
        meta[count, 2] = size
        meta[count, 3] = _be(chunk, pos, 8) + _be(chunk, pos + 23, 4)
        total = dst + got
        count += 1
        pos += size
    return pos, count, total
