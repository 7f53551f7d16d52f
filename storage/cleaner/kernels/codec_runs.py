"""Runs of lz4 and zstd batches inflated, and what the filter kept of them compressed again, in
one numba call each (``storage.cleaner.compressed``).

For a run of compressed data batches the kernel does what ``compressed.inflate`` does per batch
in Python: copy the header with the codec bits cleared and the new length, and decode the records
straight into the run's buffer with the codec's C library. lz4: Kafka's producers and
kafkatier's writers put a batch of up to 64 KiB of records in one LZ4 frame of one block
(``lz4_frame.decode_kafka_frame``'s layout: the 7 descriptor bytes ``04 22 4D 18 60 40 82``, the
block's size word, the block, the end mark), decoded with liblz4's ``LZ4_decompress_safe`` (a raw
block is copied). zstd: the batch's frame or frames, with or without a content size, decoded
with libzstd's ``ZSTD_decompressDCtx`` into the room left (the thread's context:
``zstd_contexts``). The Python loop
cost more than the libraries themselves (the compaction bench decodes 10,000 frames of ~13 KiB
twice; with zstd its per-batch steps were about half the compaction's time). The kernel stops at
the first batch that is anything else (another codec, a control or transactional batch, another
lz4 frame layout, a frame that does not decode or needs more room, one the chunk does not hold
whole) and leaves it to the Python loop, which handles or reports it. :func:`deflate_runs` writes
the batches the filter kept back: a batch kept whole as its original bytes, a rebuilt one
compressed as ``record.compression.compress`` does (lz4: python-lz4's frame of one 64 KiB block,
liblz4's fast compressor into ``size - 1`` bytes, the block stored raw where that fails; zstd:
one frame at the default level 3, ``ZSTD_compressCCtx``, the bytes zstandard's one-shot
compressor writes), with its length, codec bits and CRC-32C; a rebuilt lz4 batch over 64 KiB of
records (a frame of several blocks) goes back to the Python loop.

The libraries are called by name: python-lz4's extension exports ``LZ4_decompress_safe`` and
``LZ4_compress_default``, zstandard's cffi extension (or else the system's libzstd) the ``ZSTD_``
functions; both are loaded for LLVM (``load_library_permanently``) before the kernels are
compiled or loaded from numba's cache, so the cached code links to them in every process. Where
either fails, :data:`AVAILABLE` is False and the Python loop does all.
"""

from __future__ import annotations

import ctypes.util
from pathlib import Path
from typing import Any, Final

import numba
import numpy as np
import zstandard
from numba import types

from kafkatier.storage.cleaner.kernels.chunks import be, crc32c, put_be, whole_batch
from kafkatier.storage.cleaner.kernels.superseded import droppable_size
from kafkatier.storage.record.compression import ZSTD_DEFAULT_LEVEL
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
    RECORDS_COUNT_OFFSET,
    Codec,
)

FRAME_OVERHEAD = 15  # an lz4 frame's: descriptor 7, block size word 4, end mark 4
ROOM = BATCH_HEADER_SIZE + MAX_BLOCK  # what one batch may take in the output (lz4)
META = 5  # per batch: position in the output, position and size in the chunk, last offset, codec
_DESCRIPTOR = np.frombuffer(KAFKA_DESCRIPTOR, dtype=np.uint8)
_LZ4 = int(Codec.LZ4)
_ZSTD = int(Codec.ZSTD)
_RAW = RAW_BLOCK
_LAST_OFFSET_DELTA = 23  # the header field after the attributes
CODECS: Final = (Codec.LZ4, Codec.ZSTD)
"""The codecs whose runs the kernels inflate and write back."""
SLACK = 160
"""Room a rebuilt batch may need beyond its plain size and ``size >> 8``: an lz4 frame's 15
bytes, or what ``ZSTD_compressBound`` adds (zstd.h: at most 64 under 128 KiB, ``size >> 8`` over
it)."""


def _zstd_library() -> str | None:
    """zstandard's cffi extension (it exports libzstd's functions), else the system's libzstd."""
    found = sorted(Path(zstandard.__file__).parent.glob("_cffi*.so"))
    return str(found[0]) if found else ctypes.util.find_library("zstd")


def _load() -> bool:
    try:
        import llvmlite.binding as llvm
        from lz4.block import _block

        zstd = _zstd_library()
        if zstd is None:
            return False
        llvm.load_library_permanently(_block.__file__)
        llvm.load_library_permanently(zstd)
    except Exception:  # a library not there to link: the Python loop does it
        return False
    return True


AVAILABLE = _load()
_decompress: Any = types.ExternalFunction(
    "LZ4_decompress_safe", types.int32(types.uintp, types.uintp, types.int32, types.int32)
)  # (const char* src, char* dst, int compressedSize, int dstCapacity); pointers as uintp
_compress: Any = types.ExternalFunction(
    "LZ4_compress_default", types.int32(types.uintp, types.uintp, types.int32, types.int32)
)  # (const char* src, char* dst, int srcSize, int dstCapacity): 0 when it does not fit
DCTX, CCTX = 0, 1  # a thread's zstd contexts: their places in its box (``zstd_contexts``)
zstd_dctx: Any = types.ExternalFunction("ZSTD_createDCtx", types.uintp())
zstd_free_dctx: Any = types.ExternalFunction("ZSTD_freeDCtx", types.uintp(types.uintp))
_zstd_cctx: Any = types.ExternalFunction("ZSTD_createCCtx", types.uintp())
zstd_free_cctx: Any = types.ExternalFunction("ZSTD_freeCCtx", types.uintp(types.uintp))
_zstd_decompress: Any = types.ExternalFunction(
    "ZSTD_decompressDCtx",
    types.uintp(types.uintp, types.uintp, types.uintp, types.uintp, types.uintp),
)  # (ZSTD_DCtx*, void* dst, size_t dstCapacity, const void* src, size_t srcSize)
_zstd_compress: Any = types.ExternalFunction(
    "ZSTD_compressCCtx",
    types.uintp(types.uintp, types.uintp, types.uintp, types.uintp, types.uintp, types.intc),
)  # (ZSTD_CCtx*, void* dst, size_t dstCapacity, const void* src, size_t srcSize, int level)
_zstd_is_error: Any = types.ExternalFunction("ZSTD_isError", types.uintc(types.uintp))


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


@numba.njit(cache=True, nogil=True, inline="always")
def _lz4_records(chunk: Any, pos: int, size: int, out: Any, dst: int) -> Any:
    """The records of the lz4 batch at ``pos`` decoded at ``out[dst]``: their size, or -1."""
    word = _block_size(chunk, pos, size)
    if word < 0:
        return -1
    length = word & ~_RAW
    src = pos + BATCH_HEADER_SIZE + 11
    if word & _RAW:
        out[dst : dst + length] = chunk[src : src + length]
        return np.int64(length)
    return np.int64(_decompress(chunk.ctypes.data + src, out.ctypes.data + dst, length, MAX_BLOCK))


@numba.njit(cache=True, nogil=True, inline="always")
def _zstd_records(ctx: Any, chunk: Any, pos: int, size: int, out: Any, dst: int) -> Any:
    """The records of the zstd batch at ``pos`` decoded at ``out[dst]`` (at most the room
    left): their size, or -1 (an error, too little room)."""
    src = pos + BATCH_HEADER_SIZE
    got = _zstd_decompress(ctx, out.ctypes.data + dst, out.shape[0] - dst,
                           chunk.ctypes.data + src, size - BATCH_HEADER_SIZE)  # fmt: skip
    if _zstd_is_error(got) != 0:
        return -1
    return np.int64(got)


@numba.njit(cache=True, nogil=True, inline="always")
def _has_room(room: int, attrs: int) -> bool:
    """Whether ``room`` bytes of output may take the batch: an lz4 block needs ``ROOM`` (it is
    decoded with a whole block's capacity), a zstd frame only its header's (libzstd stops where
    the room ends: the batch then fails and ends the run)."""
    return room >= ROOM or (attrs & ATTR_CODEC_MASK == _ZSTD and room > BATCH_HEADER_SIZE)


@numba.njit(cache=True, nogil=True, inline="always")
def inflate_batch(
    chunk: Any, pos: int, size: int, attrs: int, ctx: Any, out: Any, total: int, row: Any
) -> Any:  # fmt: skip
    """The lz4 or zstd batch at ``pos`` (``size`` bytes, ``attrs``) as a plain one at
    ``out[total]``, its ``META`` fields in ``row``: its inflated size, or -1 (another codec, a
    frame that does not decode, no context, too little room). ``ctx``: a zstd context or 0."""
    codec = attrs & ATTR_CODEC_MASK
    dst = total + BATCH_HEADER_SIZE
    if codec == _LZ4:
        got = _lz4_records(chunk, pos, size, out, dst)
    elif codec == _ZSTD and ctx != 0:
        got = _zstd_records(ctx, chunk, pos, size, out, dst)
    else:
        return np.int64(-1)
    if got < 0:
        return np.int64(-1)
    out[total : total + BATCH_HEADER_SIZE] = chunk[pos : pos + BATCH_HEADER_SIZE]
    put_be(out, total + 8, 4, BATCH_HEADER_SIZE - LOG_OVERHEAD + got)
    out[total + ATTRIBUTES_OFFSET + 1] = (attrs & ~ATTR_CODEC_MASK) & 0xFF
    row[0] = total
    row[1] = pos
    row[2] = size
    row[3] = be(chunk, pos, 8) + be(chunk, pos + _LAST_OFFSET_DELTA, 4)
    row[4] = codec
    return np.int64(BATCH_HEADER_SIZE + got)


@numba.njit(cache=True, nogil=True)
def inflate_runs(
    chunk: Any, pos: int, max_bytes: int, out: Any, meta: Any, contexts: Any, sup: Any,
    facts: Any, pids: Any, last_offsets: Any,
) -> tuple[int, int, int]:  # fmt: skip
    """Inflate the lz4 and zstd batches from ``pos`` into ``out`` until ``max_bytes`` are
    written (or ``out`` has no room for another, or ``meta`` no row): (where the last batch
    inflated ends in the chunk, batches, bytes written); ``meta[i]`` holds the batch's ``META``
    fields. ``contexts``: the thread's zstd contexts (``zstd_contexts.of_thread``). ``sup``,
    ``facts``, ``pids``, ``last_offsets`` (a ``superseded.Drops``): after the first batch,
    those the rewrite drops unread are passed over, not inflated (the run goes on after them;
    the batches' chunk positions show the gap)."""
    total = 0
    count = 0
    end = pos
    ctx = contexts[DCTX]  # the thread's zstd decompression context (a pointer), or 0: none yet
    while total < max_bytes and count < meta.shape[0]:
        size, attrs = whole_batch(chunk, pos)
        if size == 0 or attrs & (ATTR_CONTROL | ATTR_TRANSACTIONAL):
            break
        if count and sup.shape[0] and droppable_size(sup, chunk, pos, facts, pids, last_offsets):
            pos += size
            continue
        if not _has_room(out.shape[0] - total, attrs):
            break
        if ctx == 0 and attrs & ATTR_CODEC_MASK == _ZSTD:
            ctx = contexts[DCTX] = zstd_dctx()
        got = inflate_batch(chunk, pos, size, attrs, ctx, out, total, meta[count])
        if got < 0:
            break
        total += got
        count += 1
        pos += size
        end = pos
    return end, count, total


@numba.njit(cache=True, nogil=True, inline="always")
def _same_header(out: Any, at: int, data: Any, start: int) -> bool:
    """Whether the filter copied the batch unchanged: same attributes and record count."""
    for i in (
        ATTRIBUTES_OFFSET,
        ATTRIBUTES_OFFSET + 1,
        RECORDS_COUNT_OFFSET,
        RECORDS_COUNT_OFFSET + 1,
        RECORDS_COUNT_OFFSET + 2,
        RECORDS_COUNT_OFFSET + 3,
    ):
        if out[at + i] != data[start + i]:
            return False
    return True


@numba.njit(cache=True, nogil=True)
def _lz4_frame(out: Any, src: int, n: int, dst: Any, at: int) -> int:
    """``out[src:src + n]`` as ``lz4_frame.compress`` frames it, at ``dst[at]``; its size, or -1
    over one block (the Python loop writes several)."""
    if n > MAX_BLOCK:
        return -1
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


@numba.njit(cache=True, nogil=True, inline="always")
def _zstd_frame(ctx: Any, out: Any, src: int, n: int, dst: Any, at: int) -> Any:
    """``out[src:src + n]`` as one zstd frame at the default level, at ``dst[at]``; its size,
    or -1."""
    got = _zstd_compress(ctx, dst.ctypes.data + at, dst.shape[0] - at, out.ctypes.data + src, n,
                         ZSTD_DEFAULT_LEVEL)  # fmt: skip
    if _zstd_is_error(got) != 0:
        return -1
    return np.int64(got)


@numba.njit(cache=True, nogil=True)
def deflate_runs(out: Any, rows: Any, data: Any, starts: Any, last_offsets: Any, codecs: Any,
                 chunk: Any, real_starts: Any, real_sizes: Any, dst: Any, infos: Any,
                 contexts: Any, seal: bool = True) -> tuple[int, int]:  # fmt: skip
    """The filter's batches (``rows``: position in ``out``, size, last offset, max timestamp)
    of an inflated run as stored batches in ``dst``, ``infos`` the same fields for them there:
    (rows done, bytes written). Stops at a batch it cannot write (a rebuilt lz4 batch of more
    than 64 KiB of records, a zstd error). ``contexts``: as :func:`inflate_runs`'. ``seal``:
    the rebuilt batches' CRCs computed here (else the caller's, with the CPU's instruction)."""
    written = 0
    j = 0
    ctx = contexts[CCTX]  # the thread's zstd compression context, or 0: none yet
    done = rows.shape[0]
    for r in range(rows.shape[0]):
        position, size, last = rows[r, 0], rows[r, 1], rows[r, 2]
        while j < last_offsets.shape[0] and last_offsets[j] != last:
            j += 1
        if j == last_offsets.shape[0]:
            done = r
            break
        if _same_header(out, position, data, starts[j]):
            stored = real_sizes[j]
            dst[written : written + stored] = chunk[real_starts[j] : real_starts[j] + stored]
        else:
            header = BATCH_HEADER_SIZE
            dst[written : written + header] = out[position : position + header]
            if codecs[j] == _ZSTD:
                if ctx == 0:
                    ctx = contexts[CCTX] = _zstd_cctx()
                frame = (
                    -1
                    if ctx == 0
                    else _zstd_frame(
                        ctx, out, position + header, size - header, dst, written + header
                    )
                )
            else:
                frame = _lz4_frame(out, position + header, size - header, dst, written + header)
            if frame < 0:
                done = r
                break
            stored = BATCH_HEADER_SIZE + frame
            put_be(dst, written + 8, 4, stored - LOG_OVERHEAD)
            dst[written + ATTRIBUTES_OFFSET + 1] |= codecs[j]
            if seal:
                put_be(dst, written + CRC_OFFSET, 4,
                       crc32c(dst, written + CRC_START, written + stored))  # fmt: skip
        infos[r, 0] = written
        infos[r, 1] = stored
        infos[r, 2] = last
        infos[r, 3] = rows[r, 3]
        written += stored
    return done, written
