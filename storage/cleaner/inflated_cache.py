"""The batches a pass's map build inflated, kept for its rewrite in the part of the map's budget
(``log.cleaner.dedupe.buffer.size``) that the map's table does not take.

Both halves of a cleaning pass decode the same compressed batches: the map build every one (it
reads every key), the rewrite every one it does not drop unread. With zstd one decode of every
batch takes longer than the plain rewrite of the same bytes (bench/compaction.py), so the second
decode was a third of a compaction's work. Here the map build's read-ahead thread
(``read_ahead.Chunks``) inflates its share of each chunk into this cache's arena rather than a
buffer of its own, and the walk inflates the rest of the chunk (``read_ahead``'s balance) into
the room that follows (:meth:`InflatedCache.region`, :meth:`InflatedCache.extend`). The rewrite
takes those batches from the arena as they are (``Chunks.run``; the same bytes the codec would
give), and its thread decodes only the batches the cache has not.

The arena is one array, allocated at the first chunk and used as a ring: a chunk's room that
does not fit before the arena's end goes at its start, and the entries it overlaps are dropped,
the oldest, so the log's tail stays (whose records are the likelier to be kept). The map build
and the rewrite of a pass run one after the other; in the map build the thread reserves and
keeps, the walk extends the chunk it holds, and the walk holds at most two chunks' data while the
thread fills a third: an arena of at least :data:`LEAST` rooms never overwrites them (a chunk's
entry, with the room left for the walk's share, takes one room at most). Below that there is no
cache.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from kafkatier.storage.cleaner.kernels.offset_map import OffsetMap

U8 = npt.NDArray[np.uint8]
I64 = npt.NDArray[np.int64]
Key = tuple[int, int, int]
"""A chunk: its segment's base offset, its position and its size."""

LEAST: Final = 4
"""Rooms the arena must hold for a cache (the walk's two chunks and the one being filled)."""


_POOL: list[U8] = []
_POOL_LOCK = threading.Lock()


def _take(size: int) -> U8:
    """An arena of ``size`` bytes: the one the last pass gave back where it is large enough.
    Kept from pass to pass as Kafka keeps a cleaner thread's dedupe buffer: a fresh arena's
    first touches cost the map build more than its decoding some of the time (bench/compaction.py,
    zstd, map builds of 0.16-0.36 s against 0.08 in 3 of 6 rounds, 2026-12-01)."""
    with _POOL_LOCK:
        arena = _POOL.pop() if _POOL else None
    if arena is None or arena.shape[0] < size:
        del arena
        return np.empty(size, dtype=np.uint8)
    return arena[:size]


def _give(arena: U8) -> None:
    """The arena back for the next pass (one is kept, the largest)."""
    whole = arena.base if isinstance(arena.base, np.ndarray) else arena
    with _POOL_LOCK:
        if not _POOL or _POOL[0].shape[0] < whole.shape[0]:
            _POOL[:] = [whole]


@dataclass(frozen=True, slots=True)
class Entry:
    """A chunk's inflated batches: ``data`` (a view of the arena) and their ``meta`` rows (as
    ``kernels.ahead.inflate_chunk`` writes them, positions in ``data``), in chunk order, each
    batch's data right after the one before; ``limit``: where the chunk's room in the arena ends
    (:meth:`InflatedCache.region`)."""

    start: int
    data: U8
    meta: I64
    limit: int

    def rows(self) -> dict[int, int]:
        """Row by chunk position."""
        return {position: row for row, position in enumerate(self.meta[:, 1].tolist())}


class InflatedCache:
    """One pass's cache over the budget ``budget`` less what ``offset_map`` holds when the
    first chunk comes (its table and superseded bits, sized by the map build's ``clear``);
    ``room``: what one chunk may take (the read-ahead's buffer for inflated batches). The
    read-ahead thread reserves and keeps, the walk extends the chunk it holds: a lock keeps the
    entries whole between the two."""

    def __init__(self, budget: int, offset_map: OffsetMap, room: int) -> None:
        self.budget = budget
        self.offset_map = offset_map
        self.room = room
        self._arena: U8 | None = None
        self._entries: dict[Key, Entry] = {}
        self._cursor = 0
        self._lock = threading.Lock()

    @property
    def capacity(self) -> int:
        """Bytes the arena may take (0: no cache)."""
        if self._arena is not None:
            return int(self._arena.shape[0])
        om = self.offset_map
        free = self.budget - om.table.nbytes - om.superseded.nbytes
        return free if free >= LEAST * self.room else 0

    def reserve(self) -> U8 | None:
        """Room for the next chunk's batches (None: no cache), the entries it overlaps dropped;
        :meth:`keep` then records what the chunk took of it."""
        if self._arena is None:
            if not self.capacity:
                return None
            self._arena = _take(self.capacity)
        if self._cursor + self.room > self._arena.shape[0]:
            self._cursor = 0
        lo, hi = self._cursor, self._cursor + self.room
        with self._lock:
            for key in [k for k, e in self._entries.items() if e.start < hi and lo < e.limit]:
                del self._entries[key]
        return self._arena[lo:hi]

    def keep(self, key: Key, total: int, meta: I64, more: int = 0) -> None:
        """The chunk ``key`` inflated ``total`` bytes into the last :meth:`reserve`'s room,
        ``meta`` its rows (copied); ``more`` bytes after them are left for the walk's share of
        the chunk (at most the room's rest)."""
        assert self._arena is not None
        start = self._cursor
        limit = start + min(total + max(more, 0), self.room)
        entry = Entry(start, self._arena[start : start + total], meta.copy(), limit)
        with self._lock:
            self._entries[key] = entry
        self._cursor = (limit + 7) // 8 * 8

    def region(self, key: Key) -> U8 | None:
        """The chunk's room after its batches (None: not held, or no room left)."""
        with self._lock:
            entry = self._entries.get(key)
        if entry is None or self._arena is None:
            return None
        used = entry.start + entry.data.shape[0]
        return self._arena[used : entry.limit] if used < entry.limit else None

    def extend(self, key: Key, total: int, meta: I64) -> None:
        """The walk inflated ``total`` more bytes of the chunk at the start of its
        :meth:`region`, ``meta`` their rows (positions from the region's start)."""
        assert self._arena is not None
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return
            used = entry.data.shape[0]
            rows = meta.copy()
            rows[:, 0] += used
            self._entries[key] = Entry(entry.start,
                                       self._arena[entry.start : entry.start + used + total],
                                       np.concatenate((entry.meta, rows)), entry.limit)  # fmt: skip

    def get(self, key: Key) -> Entry | None:
        """The chunk's entry, if the map build inflated it and it is still held."""
        with self._lock:
            return self._entries.get(key)

    def __len__(self) -> int:
        return len(self._entries)

    def close(self) -> None:
        """Drop the entries; the arena goes back to the pool for the next pass."""
        with self._lock:
            self._entries.clear()
        if self._arena is not None:
            arena, self._arena = self._arena, None
            _give(arena)
