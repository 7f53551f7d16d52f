"""A segment's chunks for the cleaner's walk (``chunk.walk_segment``), the next one read and its
compressed batches inflated by a thread of its own while the walk works on the current one.

On one thread the walk alternates the read of a chunk (``os.pread``), the decoding of its lz4 or
zstd batches and the kernels' work on them (the map build, the rewrite). The read and the
decoding (``kernels.ahead``: numba, without the GIL) can run beside the kernels (C through cffi
or numba, without the GIL too) on a second core; on one core the thread would only add its
switches, so it runs where the process may use two or more (:data:`ENABLED`), and not over a
store that reads ahead itself (``SegmentStore.reads_ahead``: the remote one). One chunk is
prepared ahead at most: three chunks' buffers, each with room for :data:`INFLATED` times the
chunk inflated (a small constant beside the map's budget); batches past that room are left to
the walk.

Only one thread reads the store at a time. The walk takes the prepared chunk when it is the one
it asks for (where the whole batches of the last one end, as the walk goes on, and of the size it
asks); otherwise (a larger chunk for a batch that did not fit, a walk that stopped early) the
thread is stopped, joined, and the walk reads for itself, then starts a new one. The prepared
inflated batches serve the runs they hold (:meth:`Chunks.run`), and so, in a rewrite, do the
batches of the chunk the map build kept (``inflated_cache``: the thread leaves those to it); any
other run is inflated by the walk as before (in a map build, into the chunk's room in the cache:
:meth:`Chunks.inflate_kept`), so the walk sees the same batches in the same order (tests compare
compactions with and without the thread, and with and without the cache, byte for byte). A
failure in the thread (a read error) ends the read-ahead: the walk's own read meets it again and
reports it as before.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from kafkatier.storage.cleaner.compressed import CODECS_BY_ID, Inflated, inflate_into
from kafkatier.storage.cleaner.inflated_cache import Entry, InflatedCache
from kafkatier.storage.cleaner.kernels import codec_runs, zstd_contexts
from kafkatier.storage.cleaner.kernels.ahead import (
    NO_CACHE,
    batches_end,
    holds_zstd,
    inflate_chunk,
    run_end,
)
from kafkatier.storage.cleaner.kernels.superseded import NO_DROPS, Drops
from kafkatier.storage.cleaner.segment_store import SegmentInfo, SegmentStore
from kafkatier.storage.wire import BATCH_HEADER_SIZE

U8 = npt.NDArray[np.uint8]
I64 = npt.NDArray[np.int64]


def cores() -> int:
    """The cores this process may run on."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


ENABLED = cores() > 1
"""Whether walks read ahead in a thread (a second core to run it on); tests set it."""
CHUNK: Final = 1 << 20
"""The walk's chunk when it reads ahead, at least (the cleaner's I/O buffer where larger, as a
remote store's ranged GETs are): each hand-over between the threads takes the GIL a few times on
both sides, and at the local I/O buffer (256 KiB) the thread saved nothing (bench/compaction.py's
workload, lz4, medians of 7 rounds side by side: 0.567 s against 0.540 without it); at 1 MiB,
lz4 0.356 s against 0.397 (11 rounds), zstd 0.502 against 0.809 (7 rounds); 4 MiB was no faster
beyond the noise and held 18 MiB more (docs/performance.md, 2026-11-30, stop 55)."""
SETS: Final = 3
"""Buffer sets: the walk's chunk, the one handed over and waiting, the one being prepared."""
INFLATED: Final = 4
"""A prepared chunk's room for inflated batches, in chunk sizes."""
STEP: Final = 1 / 16
"""How much of a chunk the thread's share moves by when one side waited for the other."""
LEAST: Final = 1 / 4
"""The least share of a chunk's batches the thread inflates."""
WAITED: Final = 0.0005
"""Seconds one side must have waited for the other for the share to move."""
FIRST_SHARE = 1.0
"""The thread's share of a walk's first chunk (tests set it)."""


def room(store: SegmentStore) -> int:
    """What a chunk's inflated batches may take (a buffer set's, an ``inflated_cache`` room)."""
    return INFLATED * max(store.io_buffer_size, CHUNK) + codec_runs.ROOM


@dataclass
class _Prepared:
    """A chunk read at ``position`` (``size`` asked), its whole batches' ``end``, and its
    inflated batches: ``data`` and, per batch, ``codec_runs.META``'s fields (``meta``, a view
    of the buffers' until they go back) and columns."""

    position: int
    size: int
    chunk: bytes
    array: U8
    end: int
    buffers: tuple[U8, I64]
    data: U8
    meta: I64
    columns: list[list[int]]
    rows: dict[int, int]
    key: tuple[int, int, int]
    cached: tuple[Entry, dict[int, int]] | None = None
    """The rewrite's: the chunk's entry in the cache (batches the thread left to it) and its
    rows by chunk position."""


class Chunks:
    """One segment's chunks for one walk, read ahead in a thread where :data:`ENABLED` (a
    context manager: leaving it stops the thread). ``drops``: the rewrite's (else none).

    The thread inflates the compressed batches of the first ``share`` of each chunk it reads,
    the walk the rest: a share that balances the two threads. Where the walk waited for a
    chunk the share shrinks by :data:`STEP` (to :data:`LEAST`), where the thread waited for the
    walk it grows (to all): with zstd the map build's decoding took about twice the map's own
    work, so the thread alone bounded it while the walk idled. The share settles near 0.7-0.9
    in zstd map builds and stays whole in rewrites; on bench/compaction.py's input (zstd) the
    map build took 0.205 s against 0.236 with the share fixed at all, the compaction 0.551 s
    against 0.580 (medians of 10 alternating rounds, 2026-11-30; lz4 and uncompressed: the
    same)."""

    def __init__(
        self, store: SegmentStore, info: SegmentInfo, drops: Drops | None = None,
        ahead: bool | None = None, cache: InflatedCache | None = None, fill: bool = False,
    ) -> None:  # fmt: skip
        self._cache = cache
        self._fill = fill
        """With ``cache``: the thread inflates into it (the map build) or copies from it what
        is there (the rewrite): ``inflated_cache``."""
        self.store = store
        self.base = info.base_offset
        self.segment_size = info.size
        self._drops = drops if drops is not None else NO_DROPS
        self._ahead = (ENABLED and not store.reads_ahead) if ahead is None else ahead
        self.chunk_size = max(store.io_buffer_size, CHUNK) if self._ahead else store.io_buffer_size
        self._thread: threading.Thread | None = None
        self._ready: queue.Queue[_Prepared | None] = queue.Queue(maxsize=1)
        self._free: queue.Queue[tuple[U8, I64] | None] = queue.Queue()
        for _ in range(SETS):
            self._free.put(None)  # allocated at first use
        self._stopping = threading.Event()
        self._expect = (-1, -1)
        self._current: _Prepared | None = None
        self.share = FIRST_SHARE

    def __enter__(self) -> Chunks:
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop()
        self._release()

    def read(self, position: int, size: int) -> tuple[bytes, U8]:
        """The chunk of ``size`` bytes at ``position`` (a batch boundary) and its array."""
        if self._thread is not None and (position, size) != self._expect:
            self._stop()
        if (
            self._thread is None
            and self._ahead
            and size == self.chunk_size < self.segment_size - position
        ):
            self._start(position)  # not for a segment's last chunk (nor for a larger one)
        self._release()
        if self._thread is not None:
            began = time.perf_counter()
            item = self._ready.get()
            if time.perf_counter() - began > WAITED:  # the thread is behind: the walk takes more
                self.share = max(LEAST, self.share - STEP)
            if item is not None and (item.position, item.size) == (position, size):
                self._current = item
                after = position + item.end
                left = min(size, self.segment_size - after)
                self._expect = (after, left) if item.end else (-1, 0)
                return item.chunk, item.array
            self._stop()  # the thread failed or ran out: read here (and meet its error)
        chunk = self.store.read_chunk(self.base, position, size)
        return chunk, np.frombuffer(chunk, dtype=np.uint8)

    @property
    def run_bytes(self) -> int:
        """The most a run taken from the thread's chunk holds inflated (:meth:`run`): its room.
        Its batches are inflated already, so a longer run costs no memory, and fewer runs cost
        fewer kernel calls and less Python between them: a compaction of
        ``bench/compaction.py``'s lz4 input took 0.329 s against 0.372 s with runs of the walk's
        I/O buffer (map build 0.109 against 0.130 s, rewrite 0.156 against 0.188 s), zstd 0.453
        against 0.523 s (medians of 9 rounds alternating in one process, 2026-12-01)."""
        return INFLATED * self.chunk_size

    def run(self, array: U8, pos: int, max_bytes: int) -> Inflated | None:
        """The run of batches from ``pos`` that the thread inflated, as ``compressed.inflate``
        gives it (the batches after the first while under ``max_bytes`` inflated, with nothing
        between them but batches the rewrite drops unread), or, in a rewrite, that the cache
        holds of the chunk (those batches kept in it: the filter drops their records), or None
        where neither has the batch at ``pos``."""
        item = self._current
        if item is None or array is not item.array:
            return None
        if (row := item.rows.get(pos)) is not None:
            i = int(run_end(item.meta, row, max_bytes, array, *self._drops))
            return _run(item.data, item.columns, row, i)
        return self._cached_run(item, pos, max_bytes)

    def _cached_run(self, item: _Prepared, pos: int, max_bytes: int) -> Inflated | None:
        """A rewrite's run from ``pos`` of what the cache holds of the chunk, taken from the
        arena as it is (its batches one after the other there: ``run_end`` over its rows)."""
        if item.cached is None or (row := item.cached[1].get(pos)) is None:
            return None
        entry = item.cached[0]
        meta = entry.meta
        i = int(run_end(meta, row, max_bytes, item.array, *self._drops))
        data = entry.data[: meta[i, 0]] if i < meta.shape[0] else entry.data
        return _run(data, meta[row:i].T.tolist(), 0, i - row)

    def inflate_kept(self, array: U8, pos: int, max_bytes: int) -> Inflated | None:
        """The map build's walk: its own run at ``pos`` of the chunk it holds, inflated into
        that chunk's room in the cache after the thread's share (``InflatedCache.region``) and
        kept there for the rewrite; None where the chunk has no room there (the walk then
        inflates the run as without a cache)."""
        item = self._current
        if not self._fill or self._cache is None or item is None or array is not item.array:
            return None
        region = self._cache.region(item.key)
        if region is None:
            return None
        found = inflate_into(array, pos, max_bytes, region)
        if found is None:
            return None
        run, meta = found
        self._cache.extend(item.key, run.data.shape[0], meta)
        return run

    def _release(self) -> None:
        """The walk is done with the current chunk: its buffers go back to the thread."""
        if self._current is not None:
            self._free.put(self._current.buffers)
            self._current = None

    def _start(self, position: int) -> None:
        self._stopping.clear()
        self._expect = (position, min(self.chunk_size, self.segment_size - position))
        self._thread = threading.Thread(
            target=self._prepare_from,
            args=(position,),
            name="kafkatier-cleaner-read-ahead",
            daemon=True,
        )
        self._thread.start()

    def _stop(self) -> None:
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stopping.set()
        while thread.is_alive():
            try:
                item = self._ready.get(timeout=0.01)
            except queue.Empty:
                continue
            if item is not None:
                self._free.put(item.buffers)
        thread.join()
        while not self._ready.empty():
            item = self._ready.get_nowait()
            if item is not None:
                self._free.put(item.buffers)

    def _prepare_from(self, position: int) -> None:
        """The thread: chunks from ``position`` on, each handed over before the next is read."""
        size = self.chunk_size
        try:
            while position < self.segment_size:
                buffers = self._buffers()
                if buffers is None:
                    return
                item = self._prepare(position, min(size, self.segment_size - position), buffers)
                if not self._hand_over(item) or item.end == 0:
                    return
                position += item.end
        except Exception:  # the walk's own read meets it and reports it
            self._hand_over(None)

    def _prepare(self, position: int, size: int, buffers: tuple[U8, I64]) -> _Prepared:
        chunk = self.store.read_chunk(self.base, position, size)
        array = np.frombuffer(chunk, dtype=np.uint8)
        end = int(batches_end(array))
        out, meta = buffers
        count = total = 0
        share = end if self.share >= 1 else int(end * self.share)  # whole batches within it
        key = (self.base, position, size)
        entry = None
        if self._cache is not None and not self._fill:
            entry = self._cache.get(key)
        kept = None
        if self._fill and self._cache is not None and holds_zstd(array, share):
            kept = self._cache.reserve()  # lz4 kept too: no faster (docs/performance.md, 69)
        out = out if kept is None else kept
        if codec_runs.AVAILABLE and end:
            count, total = inflate_chunk(array, share, out, meta, *self._drops,
                                         self._drops is not NO_DROPS, zstd_contexts.of_thread(),
                                         NO_CACHE if entry is None else entry.meta)  # fmt: skip
        if kept is not None and self._cache is not None:
            self._cache.keep(key, total, meta[:count], _rest(total, share, end))
        columns = meta[:count].T.tolist() if count else [[], [], [], [], []]
        rows = {start: i for i, start in enumerate(columns[1])}
        cached = None if entry is None else (entry, entry.rows())
        return _Prepared(position, size, chunk, array, end, buffers, out[:total], meta[:count],
                         columns, rows, key, cached)  # fmt: skip

    def _buffers(self) -> tuple[U8, I64] | None:
        """A free set of buffers, made at its first use (None once the walk stops the thread)."""
        while not self._stopping.is_set():
            try:
                found = self._free.get(timeout=0.05)
            except queue.Empty:
                continue
            if found is None:
                found = (
                    np.empty(room(self.store), dtype=np.uint8),
                    np.empty((self.chunk_size // BATCH_HEADER_SIZE + 1, codec_runs.META), np.int64),
                )
            return found
        return None

    def _hand_over(self, item: _Prepared | None) -> bool:
        """``item`` to the walk; False once the walk stops the thread."""
        began = time.perf_counter()
        while not self._stopping.is_set():
            try:
                self._ready.put(item, timeout=0.05)
            except queue.Full:
                continue
            if time.perf_counter() - began > WAITED:  # the walk is behind: the thread takes more
                self.share = min(1.0, self.share + STEP)
            return True
        return False


REST_MARGIN: Final = 1.25
"""How much more than the thread's share inflated per stored byte the room kept for the walk's
share of a chunk allows (the rest of the chunk's batches are the walk's, their sizes unknown
until inflated: a batch that does not fit is inflated as without a cache)."""


def _rest(total: int, share: int, end: int) -> int:
    """Room for the chunk's batches past ``share`` (of ``end`` stored bytes) inflated, at the
    ratio of the ``total`` bytes the first ``share`` gave, with a margin."""
    if share >= end:
        return 0
    return int((end - share) * total / max(share, 1) * REST_MARGIN) + BATCH_HEADER_SIZE


def _run(data: U8, columns: list[list[int]], row: int, stop: int) -> Inflated:
    """Rows [``row``, ``stop``) of ``columns`` (``codec_runs.META``'s, by column) as the run of
    ``data`` they inflated: from the first row's position to the next row's, or to the end."""
    starts, real_starts, real_sizes, last_offsets, codecs = columns
    first = starts[row]
    end = starts[stop] if stop < len(starts) else data.shape[0]
    taken = slice(row, stop)
    return Inflated(data[first:end], [s - first for s in starts[taken]], real_starts[taken],
                    real_sizes[taken], [CODECS_BY_ID[c] for c in codecs[taken]],
                    last_offsets[taken])  # fmt: skip
