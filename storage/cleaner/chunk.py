"""The cleaner's segment walks a chunk at a time: one numba call
(``storage.cleaner.kernels.chunks``; in C where the library is built: ``map_plain``,
``ChunkFilter``)
handles the run of plain batches from a position, and only the batch it stops at goes through
the Python path. That keeps Python out of the per-batch loop for ordinary data. Runs of
compressed data batches are inflated and taken whole by the same kernels (``with_compressed``,
``compressed``); control, transactional, legacy and malformed batches keep their exact
Python handling.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np
import numpy.typing as npt

from kafkatier.storage.cleaner.compressed import Inflated, Scratch, deflate, headers_only, inflate
from kafkatier.storage.cleaner.kernels.chunks import INFO, STATS, filter_chunk, map_chunk
from kafkatier.storage.cleaner.kernels.offset_map import MURMUR3, OffsetMap
from kafkatier.storage.cleaner.kernels.superseded import (
    NO_DROPS,
    Drops,
    count_dropped,
    skip_superseded,
)
from kafkatier.storage.cleaner.read_ahead import Chunks
from kafkatier.storage.cleaner.segment_store import CleanedSegment
from kafkatier.storage.log.batch_position import BatchInfo
from kafkatier.storage.log.segment import AnyBatch
from kafkatier.storage.native import native
from kafkatier.storage.record.records import batch_size_at, partial_tail, read_batch_at
from kafkatier.storage.wire import Codec

U8 = npt.NDArray[np.uint8]
Plain = Callable[[U8, int], tuple[int, bool]]
"""(chunk, position) -> (where the plain run stopped, stop the walk)."""
Slow = Callable[[AnyBatch], bool]
"""One batch through the Python path; True stops the walk."""


def walk_segment(chunks: Chunks, start_offset: int, plain: Plain, slow: Slow) -> bool:
    """Every batch of the chunks' segment from the index position of ``start_offset``, read
    ``chunks.chunk_size`` bytes at a time (grown for a larger batch); True if stopped early."""
    store, base, size = chunks.store, chunks.base, chunks.segment_size
    position = store.start_position(base, start_offset)
    chunk_size = chunks.chunk_size
    name = store.location(base)
    while position < size:
        chunk, array = chunks.read(position, min(chunk_size, size - position))
        pos = 0
        while True:
            pos, stop = plain(array, pos)
            if stop:
                return True
            batch = read_batch_at(chunk, pos, position, file=name)
            if batch is None:
                break
            if slow(batch):
                return True
            pos += batch.size_in_bytes
        if pos == 0:
            if len(chunk) < chunk_size:  # the segment (closed) ends inside this batch
                raise partial_tail(name, position, size, batch_size_at(chunk))
            chunk_size *= 2
            continue
        position += pos
        chunk_size = chunks.chunk_size
    return False


LZ4_LATER = 256 << 10
"""The kept bytes from which a run of lz4 batches is deflated by the thread (measured before
the group's writer took the appends, stop 69, ad hoc phase timers on bench/compaction.py's lz4
input): with every lz4 run handed over the rewrite took 0.046-0.050 s against 0.045-0.046 in the
walk at 100,000 keys (the median run keeps 18 KiB) and 0.15-0.18 s against 0.21 at 1,000,000
(it keeps 500 KiB); from 256 KiB, 0.041-0.050 against 0.048-0.059 and 0.12-0.13 against
0.18-0.21."""
Deflated = tuple[bytes, list[BatchInfo]]
"""Stored batches and their infos (``compressed.deflate``)."""
Run = Callable[[Inflated, U8], tuple[int, bool]]
"""(inflated run, chunk) -> (where the kernel stopped in the run's data, stop the walk)."""
Skip = Callable[[U8, int], int]
"""(chunk, position) -> the position after the batches dropped unread there."""


def with_compressed(
    plain: Plain, on_run: Run, max_bytes: int, chunks: Chunks, skip: Skip | None = None,
    drops: Drops = NO_DROPS,
) -> Plain:  # fmt: skip
    """``plain``, continued through runs of compressed data batches (``compressed``):
    where the plain run stops at one, the run is inflated (or taken as the read-ahead or the
    cache holds it, ``chunks.run``; in the map build, inflated into the cache,
    ``chunks.inflate_kept``) and given to ``on_run``. ``skip`` and ``drops`` (the rewrite's:
    ``ChunkFilter.skip``, ``ChunkFilter.drops``): the batches dropped unread where a run would
    start are passed first, and those inside a run are not inflated (``kernels.superseded``)."""

    scratch = Scratch()

    def step(array: U8, pos: int) -> tuple[int, bool]:
        while True:
            pos, stop = plain(array, pos)
            if stop:
                return pos, True
            if skip is not None and (after := skip(array, pos)) != pos:
                pos = after
                continue
            run = (chunks.run(array, pos, max(max_bytes, chunks.run_bytes))
                   or chunks.inflate_kept(array, pos, max_bytes)
                   or inflate(array, pos, max_bytes, scratch, drops))  # fmt: skip
            if run is None:
                return pos, False
            at, stop = on_run(run, array)
            if stop:
                return pos, True
            after = run.real_position(at)
            if after == pos:
                return pos, False  # the kernel left the first batch to the Python path
            pos = after

    return step


def map_plain(offset_map: OffsetMap, start: int) -> Plain:
    """The map build's plain run (``build_map``): in C where the library is built and the map
    digests with MurmurHash3 (the cleaner's; ``storage/native/offset_map.c``, the same results,
    its figures there), else numba's."""
    if offset_map.digest == MURMUR3 and native() is not None:
        return _map_plain_native(offset_map, start)

    def plain(array: U8, pos: int) -> tuple[int, bool]:
        pos, full, offset_map.size, offset_map.latest_offset = map_chunk(
            offset_map.table, array, pos, start, offset_map.size, offset_map.max_desired_size,
            offset_map.latest_offset, offset_map.digest, offset_map.superseded,
            offset_map.superseded_start,
        )  # fmt: skip
        return int(pos), bool(full)

    return plain


def _map_plain_native(offset_map: OffsetMap, start: int) -> Plain:
    from kafkatier.storage.native.offset_map import PlainMap  # cffi's bindings: when chosen

    kernel = PlainMap(offset_map.table, offset_map.superseded)

    def plain(array: U8, pos: int) -> tuple[int, bool]:
        pos, full, offset_map.size, offset_map.latest_offset = kernel(
            array, pos, start, offset_map.size, offset_map.max_desired_size,
            offset_map.latest_offset, offset_map.superseded_start,
        )  # fmt: skip
        return pos, full

    return plain


class ChunkFilter:
    """The rewrite's plain run: batches kept go to ``add`` (bytes, their infos); counters in
    ``stats`` (records read, retained, bytes read, tombstones kept, tombstones dropped)."""

    def __init__(
        self, offset_map: OffsetMap, facts: tuple[int, int, int],
        last_records: dict[int, tuple[int | None, int]], chunk_bytes: int,
    ) -> None:  # fmt: skip
        now_ms, delete_retention_ms, upper_bound = facts
        self.offset_map = offset_map
        self.ctx = np.array([offset_map.latest_offset, now_ms, delete_retention_ms, upper_bound,
                             offset_map.digest, offset_map.superseded_start],
                            dtype=np.int64)  # fmt: skip
        known = sorted((pid, last) for pid, (last, _) in last_records.items() if last is not None)
        self.pids = np.array([p for p, _ in known], dtype=np.int64)
        self.last_offsets = np.array([o for _, o in known], dtype=np.int64)
        self.chunk_bytes = chunk_bytes  # a run's inflated budget (``with_compressed``'s max_bytes)
        self.out = np.empty(2 * chunk_bytes + (1 << 16), dtype=np.uint8)
        self.infos = np.empty((max(chunk_bytes // 64, 16), INFO), dtype=np.int64)
        self.stats = np.zeros(STATS, dtype=np.int64)
        self._filter = self._kernel()
        self.bytes_written = 0
        self.cleaned: CleanedSegment | None = None
        self.add: Callable[[bytes, list[BatchInfo]], None] = lambda _d, _i: None
        self.hand_over: Callable[[Callable[[], Deflated]], bool] = lambda _d: False
        """Hands an inflated run's deflate to the writer's thread, which appends its batches
        in their place (``group_writer``); False: the walk deflates it itself."""

    def _kernel(self) -> Callable[[U8, int], tuple[int, int, int]]:
        """``filter_chunk`` over this rewrite's arrays: in C where the library is built, the
        CPU has the CRC instruction and the map digests with MurmurHash3 (``clean_filter.c``,
        the same bytes), else numba's."""
        om = self.offset_map
        if om.digest == MURMUR3 and native() is not None:
            from kafkatier.storage.native import clean_filter  # cffi's bindings: when chosen

            if clean_filter.available():
                return clean_filter.PlainFilter(om.table, om.superseded, self.ctx, self.pids,
                                                self.last_offsets, self.out, self.infos,
                                                self.stats)  # fmt: skip

        def numba_filter(array: U8, pos: int) -> tuple[int, int, int]:
            found = filter_chunk(om.table, om.superseded, array, pos, self.ctx, self.pids,
                                 self.last_offsets, self.out, self.infos, self.stats)  # fmt: skip
            return int(found[0]), int(found[1]), int(found[2])

        return numba_filter

    def __call__(self, array: U8, pos: int) -> tuple[int, bool]:
        pos, size, count = self._filter(array, pos)
        if count:
            rows = self.infos[:count].tolist()
            self.add(self.out[:size].tobytes(), [BatchInfo(*row) for row in rows])
            self.bytes_written += int(size)
        return int(pos), False

    def drops(self) -> Drops:
        """What the runs need to leave the batches :meth:`skip` drops compressed."""
        return Drops(self.offset_map.superseded, self.ctx, self.pids, self.last_offsets)

    def skip(self, array: U8, pos: int) -> int:
        """The compressed batches from ``pos`` whose every record is superseded, dropped unread
        (``kernels.superseded``): where the rest starts."""
        return int(skip_superseded(self.offset_map.superseded, array, pos, self.ctx, self.pids,
                                   self.last_offsets, self.stats))  # fmt: skip

    def inflated(self, run: Inflated, chunk: U8) -> tuple[int, bool]:
        """An inflated run (``with_compressed``): filtered as plain batches, written back
        compressed; bytes read counted as stored (compressed), and the batches dropped between
        its batches counted as the walk passes them (up to the first batch not filtered)."""
        pos, size, count = self._filter(run.data, 0)
        consumed = sum(1 for start in run.starts if start < pos)
        self.stats[2] += sum(run.real_sizes[:consumed]) - int(pos)
        self._count_dropped(run, chunk, min(consumed, len(run.starts) - 1))
        if not count:
            return int(pos), False
        out, rows = self.out[:size], self.infos[:count]
        if not (self._worth_handing(run, chunk, size) and self.hand_over(
                partial(deflate, headers_only(run), chunk, out.copy(), rows.copy()))):
            data, infos = deflate(run, chunk, out, rows)
            self.add(data, infos)
            self.bytes_written += len(data)
        return int(pos), False

    @staticmethod
    def _worth_handing(run: Inflated, chunk: U8, size: int) -> bool:
        """Whether a run's deflate (``size`` bytes kept) is worth a thread: a run with zstd
        batches, or with :data:`LZ4_LATER` bytes kept or more (where lz4 compresses less it
        takes less time than the hand-over costs); never where the chunk's buffer may change
        under it."""
        if chunk.flags.writeable:
            return False
        return Codec.ZSTD in run.codecs or size >= LZ4_LATER

    def _count_dropped(self, run: Inflated, chunk: U8, upto: int) -> None:
        """The batches dropped unread before each of the run's batches 1 to ``upto``."""
        starts, sizes = run.real_starts, run.real_sizes
        for j in range(1, upto + 1):
            end = starts[j - 1] + sizes[j - 1]
            if starts[j] != end:
                count_dropped(chunk, end, starts[j], self.stats)
