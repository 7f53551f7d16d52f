"""Compressed v2 data batches through the cleaner's chunk kernels (``chunk``).

A run of compressed, non-transactional, non-control v2 batches is *inflated*: each batch's
records are decompressed and put behind a copy of its header with the codec bits cleared, so the
run becomes a buffer of plain batches that ``map_chunk`` and ``filter_chunk`` take whole (one
call for the run instead of several Python steps per batch; measured on the compaction bench with
lz4 input, the per-batch Python path cost four times the codec; ``kernels.codec_runs`` inflates
and deflates runs of lz4 and zstd batches in one call each). The kernels never read the CRC,
so the stale one does not matter. What ``filter_chunk`` writes is then put back: a batch it
copied unchanged (same record count and attributes) is written as the original compressed bytes,
as Kafka copies a batch all of whose records survive; a rebuilt one gets its records compressed
with the batch's codec at the default level (Kafka's ``buildRetainedRecordsInto``), the codec
bits, its length and its CRC-32C. Anything else - a batch that does not decompress, a control or
transactional batch, a legacy set - ends the run and takes the Python path with its errors.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

import numpy as np
import numpy.typing as npt

from kafkatier.storage.cleaner.kernels import codec_runs as kernel
from kafkatier.storage.cleaner.kernels import zstd_contexts
from kafkatier.storage.cleaner.kernels.superseded import NO_DROPS, Drops, droppable_size
from kafkatier.storage.errors import KafkaTierError
from kafkatier.storage.log.batch_position import BatchInfo
from kafkatier.storage.native import native
from kafkatier.storage.record.builder import _assemble
from kafkatier.storage.record.compression import compress, decompress
from kafkatier.storage.wire import (
    ATTR_CODEC_MASK,
    ATTR_CONTROL,
    ATTR_TRANSACTIONAL,
    ATTRIBUTES_OFFSET,
    BATCH_HEADER,
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    OFFSET_AND_LENGTH,
    RECORDS_COUNT_OFFSET,
    Codec,
)

U8 = npt.NDArray[np.uint8]
Chunk = bytes | memoryview | U8
_ATTRS: Final = struct.Struct(">h")
_LAST_DELTA: Final = struct.Struct(">i")


@dataclass
class Inflated:
    """A run of compressed batches as plain ones: ``data`` and, per batch, its position in
    ``data``, its position and size in the chunk, its codec and its last offset. Batches the
    rewrite drops unread may lie between two of them (where one's chunk position is not the
    previous one's end: ``superseded.count_dropped`` counts them as the walk passes them)."""

    data: U8
    starts: list[int] = field(default_factory=list)
    real_starts: list[int] = field(default_factory=list)
    real_sizes: list[int] = field(default_factory=list)
    codecs: list[Codec] = field(default_factory=list)
    last_offsets: list[int] = field(default_factory=list)

    def real_position(self, virtual: int) -> int:
        """The chunk position of the batch at ``virtual`` (or of the run's end)."""
        if virtual >= self.data.shape[0]:
            return self.real_starts[-1] + self.real_sizes[-1]
        real: int = self.real_starts[self.starts.index(virtual)]
        return real


def _view(chunk: Chunk) -> memoryview:
    if isinstance(chunk, np.ndarray):
        return memoryview(chunk.data).cast("B")
    return memoryview(chunk).cast("B")


CODECS_BY_ID: Final = {int(c): c for c in Codec}  # ids 5-7 are no codec: None, not Codec(n)'s raise


def _compressed_data_batch(chunk: memoryview, pos: int) -> tuple[int, int, int]:
    """(size, base offset, attributes) of the compressed v2 data batch at ``pos`` held whole by
    the chunk; size 0 for anything else."""
    if len(chunk) - pos < BATCH_HEADER_SIZE or chunk[pos + MAGIC_OFFSET] != 2:
        return 0, 0, 0
    base, length = OFFSET_AND_LENGTH.unpack_from(chunk, pos)
    size: int = LOG_OVERHEAD + length
    (attrs,) = _ATTRS.unpack_from(chunk, pos + ATTRIBUTES_OFFSET)
    if size < BATCH_HEADER_SIZE or pos + size > len(chunk):
        return 0, 0, 0
    if not attrs & ATTR_CODEC_MASK or attrs & (ATTR_CONTROL | ATTR_TRANSACTIONAL):
        return 0, 0, 0
    return size, base, attrs


class Scratch:
    """The buffer a walk inflates its runs into, reused from run to run (a run is consumed
    before the next is inflated): a fresh buffer per run cost its page faults every time, more
    than liblz4's decoding. Grown by replacing it, never resized in place (the last run's
    array may still view it)."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def room(self, used: int, need: int) -> bytearray:
        """The buffer, at least ``need`` bytes long, its first ``used`` bytes kept."""
        if need > len(self.buf):
            grown = bytearray(max(need, 2 * len(self.buf), 1 << 20))
            grown[:used] = self.buf[:used]
            self.buf = grown
        return self.buf


def inflate(
    chunk: Chunk, pos: int, max_bytes: int, scratch: Scratch | None = None,
    drops: Drops = NO_DROPS,
) -> Inflated | None:  # fmt: skip
    """The run of compressed data batches from ``pos`` (until about ``max_bytes`` inflated),
    or None when the batch at ``pos`` is not one that decompresses. ``scratch``: the buffer to
    inflate into (the run's data views it until the next call). ``drops``: the batches after
    the first that the rewrite drops unread, passed over where the kernels inflate (a gap
    between the run's batches: ``Inflated.real_starts``)."""
    view = _view(chunk)
    if not _compressed_data_batch(view, pos)[0]:
        return None  # before the scratch's room is made: a walk of plain batches needs none
    scratch = Scratch() if scratch is None else scratch
    run = Inflated(np.empty(0, np.uint8))
    total = 0
    if kernel.AVAILABLE:
        pos, total = _inflate_kernel(view, pos, max_bytes, scratch, run, drops)
    while total < max_bytes:
        size, base, attrs = _compressed_data_batch(view, pos)
        if not size:
            break
        if dropped := _passed_over(view, pos, drops, run):
            pos += dropped
            continue
        codec = CODECS_BY_ID.get(attrs & ATTR_CODEC_MASK)
        if codec is None:
            break  # an unknown codec id: the Python path reports it
        try:
            records = decompress(codec, view[pos + BATCH_HEADER_SIZE : pos + size])
        except (KafkaTierError, ValueError):
            break  # the Python path reports it
        end = total + BATCH_HEADER_SIZE + len(records)
        out = scratch.room(total, end)
        out[total : total + BATCH_HEADER_SIZE] = view[pos : pos + BATCH_HEADER_SIZE]
        OFFSET_AND_LENGTH.pack_into(out, total, base, end - total - LOG_OVERHEAD)
        _ATTRS.pack_into(out, total + ATTRIBUTES_OFFSET, attrs & ~ATTR_CODEC_MASK)
        out[total + BATCH_HEADER_SIZE : end] = records
        run.starts.append(total)
        run.real_starts.append(pos)
        run.real_sizes.append(size)
        run.codecs.append(codec)
        run.last_offsets.append(base + _LAST_DELTA.unpack_from(view, pos + 23)[0])
        total = end
        pos += size
    if not total:
        return None
    run.data = np.frombuffer(scratch.buf, dtype=np.uint8, count=total)
    return run


def _passed_over(view: memoryview, pos: int, drops: Drops, run: Inflated) -> int:
    """The size of the batch at ``pos`` where the run, not empty, passes over it (one the
    rewrite drops unread, as the kernel passes over it), else 0."""
    if not run.starts or drops is NO_DROPS:
        return 0
    array = np.frombuffer(view, dtype=np.uint8)
    return int(droppable_size(drops.sup, array, pos, drops.ctx, drops.pids, drops.last_offsets))


def _inflate_kernel(
    view: memoryview, pos: int, max_bytes: int, scratch: Scratch, run: Inflated, drops: Drops
) -> tuple[int, int]:
    """The run's first batches that ``kernels.codec_runs`` takes (Kafka's one-block lz4 frames,
    zstd frames), in one call: (where the rest of the run starts, bytes inflated)."""
    out = np.frombuffer(scratch.room(0, max_bytes + kernel.ROOM), dtype=np.uint8)
    pos, total, meta = _inflate_runs(np.frombuffer(view, dtype=np.uint8), pos, max_bytes, out,
                                     drops)  # fmt: skip
    _fill(run, meta)
    return pos, total


def inflate_into(
    chunk: U8, pos: int, max_bytes: int, out: U8
) -> tuple[Inflated, npt.NDArray[np.int64]] | None:
    """The run of lz4 and zstd batches from ``pos`` that ``kernels.codec_runs`` inflates into
    ``out`` as it is (a batch it has no room for ends the run), and its ``META`` rows; None where
    it takes none (``inflate`` then takes the batch)."""
    if not kernel.AVAILABLE:
        return None
    _, total, meta = _inflate_runs(chunk, pos, max_bytes, out, NO_DROPS)
    if not total:
        return None
    run = Inflated(out[:total])
    _fill(run, meta)
    return run, meta


def _inflate_runs(
    chunk: U8, pos: int, max_bytes: int, out: U8, drops: Drops
) -> tuple[int, int, npt.NDArray[np.int64]]:
    """``kernels.codec_runs.inflate_runs`` on the thread's zstd contexts: (where the rest of the
    run starts, bytes inflated, the batches' ``META`` rows)."""
    meta = np.empty((chunk.shape[0] // BATCH_HEADER_SIZE + 1, kernel.META), dtype=np.int64)
    pos, count, total = kernel.inflate_runs(chunk, pos, max_bytes, out, meta,
                                            zstd_contexts.of_thread(), *drops)  # fmt: skip
    return int(pos), int(total), meta[:count]


def _fill(run: Inflated, meta: npt.NDArray[np.int64]) -> None:
    """The run's per-batch lists from its ``META`` rows (none: left empty)."""
    if meta.shape[0]:
        columns = meta.T.tolist()
        run.starts, run.real_starts, run.real_sizes, run.last_offsets = columns[:4]
        run.codecs = [CODECS_BY_ID[c] for c in columns[4]]


def deflate(
    run: Inflated, chunk: Chunk, out: U8, rows: npt.ArrayLike
) -> tuple[bytes, list[BatchInfo]]:
    """What ``filter_chunk`` wrote for the run (``out``, one ``rows`` entry per batch written:
    position, size, last offset, max timestamp) as stored batches, and their infos."""
    view = _view(chunk)
    found = np.asarray(rows, dtype=np.int64).reshape(-1, 4)
    done, data, infos = 0, bytearray(), list[BatchInfo]()
    if kernel.AVAILABLE and len(found) and all(c in kernel.CODECS for c in run.codecs):
        done, data, infos = _deflate_kernel(run, view, out, found)
    rest = found[done:].tolist()
    by_last = {last: i for i, last in enumerate(run.last_offsets)} if rest else {}
    for position, size, last, max_ts in rest:
        i = by_last[last]
        plain = out[position : position + size].tobytes()
        source = run.data[run.starts[i] : run.starts[i] + BATCH_HEADER_SIZE].tobytes()
        attrs, count = (
            slice(ATTRIBUTES_OFFSET, ATTRIBUTES_OFFSET + 2),
            slice(RECORDS_COUNT_OFFSET, RECORDS_COUNT_OFFSET + 4),
        )
        same = plain[attrs] == source[attrs] and plain[count] == source[count]
        if same:
            start = run.real_starts[i]
            stored = bytes(view[start : start + run.real_sizes[i]])
        else:
            stored = _recompress(plain, run.codecs[i])
        infos.append(BatchInfo(len(data), len(stored), last, max_ts))
        data += stored
    return bytes(data), infos


def headers_only(run: Inflated) -> Inflated:
    """``run`` with only its batches' headers of its inflated data (all :func:`deflate` reads
    of it), copied: a deflate of the run then needs none of the buffers the run views, which
    the walk reuses for the next run while a thread deflates this one (``chunk.ChunkFilter``)."""
    starts = np.asarray(run.starts, dtype=np.int64)
    lib = native()  # C's copy, where built: numpy's indexing took 15 ms of the walk's thread in
    # a compaction of lz4 over 1M keys (py-spy, stop 71)
    heads = (run.data[starts[:, None] + np.arange(BATCH_HEADER_SIZE)] if lib is None
             else lib.gather_rows(run.data, starts, BATCH_HEADER_SIZE)).reshape(-1)  # fmt: skip
    return Inflated(heads, list(range(0, heads.shape[0], BATCH_HEADER_SIZE)), run.real_starts,
                    run.real_sizes, run.codecs, run.last_offsets)  # fmt: skip


def _deflate_kernel(
    run: Inflated, view: memoryview, out: U8, rows: npt.NDArray[np.int64]
) -> tuple[int, bytearray, list[BatchInfo]]:
    """:func:`deflate`'s first rows written by ``kernels.codec_runs`` in one call: (rows done,
    their stored batches, their infos). Room: a batch kept whole takes its stored size, a
    rebuilt one at most its plain size and its codec's framing (``kernels.codec_runs.SLACK``)."""
    plain = int(rows[:, 1].sum())
    room = sum(run.real_sizes) + plain + (plain >> 8) + len(rows) * kernel.SLACK
    dst = np.empty(room, dtype=np.uint8)
    infos = np.empty_like(rows)
    seal = _sealer()
    done, written = kernel.deflate_runs(
        out, rows, run.data, np.asarray(run.starts, dtype=np.int64),
        np.asarray(run.last_offsets, dtype=np.int64), np.asarray(run.codecs, dtype=np.int64),
        np.frombuffer(view, dtype=np.uint8), np.asarray(run.real_starts, dtype=np.int64),
        np.asarray(run.real_sizes, dtype=np.int64), dst, infos, zstd_contexts.of_thread(),
        seal is None,
    )  # fmt: skip
    if seal is not None and done:
        seal(dst, infos[:done])  # batches kept whole too: the same CRC, in a fraction of the time
    return done, bytearray(dst[:written]), [BatchInfo(*row) for row in infos[:done].tolist()]


def _sealer() -> Callable[[U8, npt.NDArray[np.int64]], None] | None:
    """The C library's CRC-32C for the batches :func:`_deflate_kernel` writes, where it is built
    and the CPU has the instruction (``native.clean_filter.seal``); else None (numba's)."""
    if native() is None:
        return None
    from kafkatier.storage.native import clean_filter  # cffi's bindings: when chosen

    return clean_filter.seal if clean_filter.available() else None


def _recompress(plain: bytes, codec: Codec) -> bytes:
    """The inflated batch ``plain`` (header + records) compressed again with ``codec``."""
    base, _, ple, _, _, attrs, *rest = BATCH_HEADER.unpack_from(plain)
    records = compress(codec, plain[BATCH_HEADER_SIZE:], None)
    return _assemble(records, base, ple, attrs | int(codec), *rest)
