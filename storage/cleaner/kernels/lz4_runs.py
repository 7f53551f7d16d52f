"""Runs of lz4 batches inflated, and what the filter kept of them compressed again, in one
numba call each (``storage.cleaner.compressed``).

Kafka's producers and kafkatier's writers put a batch of up to 64 KiB of records in one LZ4 frame
of one block (``lz4_frame.decode_kafka_frame``'s layout: the 7 descriptor bytes ``04 22 4D 18 60
40 82``, the block's size word, the block, the end mark). For a run of such batches the kernel
does what ``compressed.inflate`` does per batch in Python: copy the header with the codec bits
cleared and the new length, and decode the block with liblz4's ``LZ4_decompress_safe`` straight
into the run's buffer (a raw block is copied). The Python loop cost more than liblz4 itself
(the compaction bench decodes 20,000 frames of ~12 KiB twice). It stops at the first batch that
is anything else (another codec, a control or transactional batch, another frame layout, a block
that does not decode, one the chunk does not hold whole) and leaves it to the Python loop, which
handles or reports it. :func:`deflate_lz4` writes the batches the filter kept back: a batch kept
whole as its original bytes, a rebuilt one compressed as ``lz4_frame.compress`` does (python-lz4's
frame of one 64 KiB block: liblz4's fast compressor into ``size - 1`` bytes, the block stored raw
where that fails), with its length, codec bits and CRC-32C; a rebuilt batch over 64 KiB of
records (a frame of several blocks) goes back to the Python loop.

liblz4 is called by name: python-lz4's extension exports ``LZ4_decompress_safe`` and
``LZ4_compress_default`` and is loaded for LLVM (``load_library_permanently``) before the
kernels are compiled or loaded from numba's cache, so the cached code links to it in every
process. Where that fails, :data:`AVAILABLE` is
False and the Python loop does all.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numba import types

from kafkatier.storage.cleaner.kernels.chunks import be, crc32c, put_be
from kafkatier.storage.record.lz4_frame import KAFKA_DESCRIPTOR, MAX_BLOCK, RAW_BLOCK
from kafkatier.storage.wire import (
    ATTR_CODEC_MASK,
    ATTR_CONTROL,
    ATTR_TRANSACTIONAL,
    ATTRIBUTES_OFFSET,
    BATCH_HEADER_SIZE,
    CRC_OFFSET,
    CRC_START,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    RECORDS_COUNT_OFFSET,
    Codec,
)

FRAME_OVERHEAD = 15  # descriptor 7, block size word 4, end mark 4
ROOM = BATCH_HEADER_SIZE + MAX_BLOCK  # what one batch may take in the output
META = 4  # per batch: position in the output, position and size in the chunk, last offset
_DESCRIPTOR = np.frombuffer(KAFKA_DESCRIPTOR, dtype=np.uint8)
_LZ4 = int(Codec.LZ4)
_RAW = RAW_BLOCK
_LAST_OFFSET_DELTA = 23  # the header field after the attributes


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
_compress: Any = types.ExternalFunction(
    "LZ4_compress_default", types.int32(types.uintp, types.uintp, types.int32, types.int32)
)  # (const char* src, char* dst, int srcSize, int dstCapacity): 0 when it does not fit


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
        size = LOG_OVERHEAD + be(chunk, pos + 8, 4)
        attrs = be(chunk, pos + ATTRIBUTES_OFFSET, 2)
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
        put_be(out, total + 8, 4, BATCH_HEADER_SIZE - LOG_OVERHEAD + got)
        out[total + ATTRIBUTES_OFFSET + 1] = (attrs & ~ATTR_CODEC_MASK) & 0xFF
        meta[count, 0] = total
        meta[count, 1] = pos
        meta[count, 2] = size
        meta[count, 3] = be(chunk, pos, 8) + be(chunk, pos + _LAST_OFFSET_DELTA, 4)
        total = dst + got
        count += 1
        pos += size
    return pos, count, total


@numba.njit(cache=True, nogil=True, inline="always")
def _same_header(out: Any, at: int, data: Any, start: int) -> bool:
    """Whether the filter copied the batch unchanged: same attributes and record count."""
    for i in (ATTRIBUTES_OFFSET, ATTRIBUTES_OFFSET + 1, RECORDS_COUNT_OFFSET,
              RECORDS_COUNT_OFFSET + 1, RECORDS_COUNT_OFFSET + 2, RECORDS_COUNT_OFFSET + 3):
        if out[at + i] != data[start + i]:
            return False
    return True


@numba.njit(cache=True, nogil=True)
def _frame(out: Any, src: int, n: int, dst: Any, at: int) -> int:
    """``out[src:src + n]`` as ``lz4_frame.compress`` frames it, at ``dst[at]``; its size."""
    dst[at : at + 7] = _DESCRIPTOR
    if n == 0:
        end = at + 7
    else:
        block = at + 11
        got = _compress(out.ctypes.data + src, dst.ctypes.data + block, n, n - 1)
        if got > 0:
            word = got
        else:
            dst[block : block + n] = out[src : src + n]
            got = n
            word = n | _RAW
        for i in range(4):
            dst[at + 7 + i] = (word >> (8 * i)) & 0xFF
        end = block + got
    dst[end : end + 4] = 0
    return end + 4 - at


@numba.njit(cache=True, nogil=True)
def deflate_lz4(out: Any, rows: Any, data: Any, starts: Any, last_offsets: Any, chunk: Any,
                real_starts: Any, real_sizes: Any, dst: Any, infos: Any) -> tuple[int, int]:
    """The filter's batches (``rows``: position in ``out``, size, last offset, max timestamp)
    of an inflated run as stored batches in ``dst``, ``infos`` the same fields for them there:
    (rows done, bytes written). Stops at a rebuilt batch of more than 64 KiB of records."""
    written = 0
    j = 0
    for r in range(rows.shape[0]):
        position, size, last = rows[r, 0], rows[r, 1], rows[r, 2]
        while j < last_offsets.shape[0] and last_offsets[j] != last:
            j += 1
        if j == last_offsets.shape[0] or size - BATCH_HEADER_SIZE > MAX_BLOCK:
            return r, written
        if _same_header(out, position, data, starts[j]):
            stored = real_sizes[j]
            dst[written : written + stored] = chunk[real_starts[j] : real_starts[j] + stored]
        else:
            header = BATCH_HEADER_SIZE
            dst[written : written + header] = out[position : position + header]
            frame = _frame(out, position + header, size - header, dst, written + header)
            stored = BATCH_HEADER_SIZE + frame
            put_be(dst, written + 8, 4, stored - LOG_OVERHEAD)
            dst[written + ATTRIBUTES_OFFSET + 1] |= _LZ4
            put_be(dst, written + CRC_OFFSET, 4, crc32c(dst, written + CRC_START, written + stored))
        infos[r, 0] = written
        infos[r, 1] = stored
        infos[r, 2] = last
        infos[r, 3] = rows[r, 3]
        written += stored
    return rows.shape[0], written
