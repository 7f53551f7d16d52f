"""The pass's cache of inflated batches (``storage/cleaner/inflated_cache.py``): a chunk's entry
takes its batches and the room left after them for the walk's share, the walk's batches join the
entry right after the thread's, and a reservation past the arena's end wraps to its start,
dropping the entries there."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from kafkatier.storage.cleaner import inflated_cache
from kafkatier.storage.cleaner.inflated_cache import InflatedCache
from kafkatier.storage.cleaner.kernels.codec_runs import META

ROOM = 1000


@pytest.fixture(autouse=True)
def _no_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's arena its own (none left from another test's cache)."""
    monkeypatch.setattr(inflated_cache, "_POOL", [])


def _cache(rooms: int) -> InflatedCache:
    """A cache whose arena holds ``rooms`` rooms (beside a map of 100 bytes)."""
    offset_map = SimpleNamespace(table=np.zeros(100, np.uint8), superseded=np.zeros(0, np.uint8))
    return InflatedCache(100 + rooms * ROOM, offset_map, ROOM)  # type: ignore[arg-type]


def _rows(starts: list[int], chunk_at: int) -> np.ndarray:
    """META rows for batches at ``starts`` of the data, of 10 stored bytes each from
    ``chunk_at`` in the chunk."""
    rows = np.zeros((len(starts), META), np.int64)
    rows[:, 0] = starts
    rows[:, 1] = [chunk_at + 10 * i for i in range(len(starts))]
    rows[:, 2] = 10
    return rows


def test_the_walks_batches_join_the_entry_after_the_threads() -> None:
    cache = _cache(4)
    room = cache.reserve()
    assert room is not None and room.shape[0] == ROOM
    room[:300] = 1
    cache.keep((0, 0, 50), 300, _rows([0, 100, 200], 0), more=400)
    region = cache.region((0, 0, 50))
    assert region is not None and region.shape[0] == 400  # the rest of the chunk's room
    region[:250] = 2
    cache.extend((0, 0, 50), 250, _rows([0, 120], 30))
    entry = cache.get((0, 0, 50))
    assert entry is not None
    assert entry.data.tobytes() == b"\x01" * 300 + b"\x02" * 250
    assert entry.meta[:, 0].tolist() == [0, 100, 200, 300, 420]
    assert entry.rows() == {0: 0, 10: 1, 20: 2, 30: 3, 40: 4}
    region = cache.region((0, 0, 50))
    assert region is not None and region.shape[0] == 150
    nxt = cache.reserve()  # the next chunk's room starts past the first one's
    assert nxt is not None
    assert np.shares_memory(nxt, entry.data) is False
    nxt[:] = 3
    assert cache.get((0, 0, 50)) is not None and entry.data.tobytes()[-1:] == b"\x02"


def test_the_room_kept_for_the_walk_is_at_most_the_reservations() -> None:
    cache = _cache(4)
    cache.reserve()
    cache.keep((0, 0, 50), 600, _rows([0], 0), more=10_000)
    region = cache.region((0, 0, 50))
    assert region is not None and region.shape[0] == ROOM - 600
    cache.reserve()
    cache.keep((0, 50, 50), 200, _rows([0], 0))  # no room left for a walk
    assert cache.region((0, 50, 50)) is None


def test_the_ring_wraps_and_drops_the_oldest_entries() -> None:
    """Entries of 300 bytes with 600 more for the walk take 904 bytes each (8-byte aligned): the
    fifth reservation does not fit before the end of a four-room arena, so it goes at the start
    and drops the entries it overlaps, the two oldest (the second starts at 904)."""
    cache = _cache(4)
    keys = [(0, i * 50, 50) for i in range(5)]
    for key in keys[:4]:
        cache.reserve()
        cache.keep(key, 300, _rows([0], 0), more=600)
    assert len(cache) == 4
    first = cache.get(keys[0])
    assert first is not None
    room = cache.reserve()
    assert room is not None and np.shares_memory(room, first.data)
    cache.keep(keys[4], 300, _rows([0], 0), more=600)
    assert [cache.get(k) is not None for k in keys] == [False, False, True, True, True]
    cache.close()
    assert len(cache) == 0
