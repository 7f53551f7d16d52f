"""Runs of remote ``.log`` objects already fetched and checked, kept for the next read.

A consumer reads a partition in order, one fetch at a time, each asking for at most
``max.partition.fetch.bytes`` (1 MiB by default): fetched by one ranged GET each, a segment is
requested again and again for the part of a chunk the last fetch could not take (the batch cut
at the chunk's end, the bytes past ``max_bytes``), with a round trip per fetch. Kept here, the
rest of a chunk serves the next fetches from memory, so each byte of a segment crosses the
network once (but for the batch a chunk's end cuts, which the next chunk starts with), in chunks
as large as the reader's ``chunk_bytes``.

One run per object (the last one fetched: a reader moves on through the object), the least
recently used dropped beyond ``max_bytes`` in all. A run holds whole batches whose CRCs were
checked when they arrived, from a batch boundary; a lookup at a position inside it returns the
rest of the run from there (positions come from batch spans or the offset index, so they are
batch boundaries too).

Read-ahead (``read_ahead`` threads; as the chunk cache of Aiven's tiered storage for Kafka
prefetches): when a reader uses a run, the run after it is fetched in the background, so a
consumer going through a segment finds its next chunk arrived instead of waiting for a GET every
few fetches (and the GETs of several partitions' consumers overlap). At most one run ahead per
object and :data:`AHEAD_PER_THREAD` per thread in flight; a lookup at a position the run ahead
starts at (or holds) waits for it and keeps it; a run ahead that failed is dropped, and the
reader's own GET then meets (and reports) the fault.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

DEFAULT_MAX_BYTES = 64 << 20
AHEAD_PER_THREAD = 2


class ChunkCache:
    """The last run fetched of each remote ``.log`` object, by object key (module docstring)."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES, read_ahead: int = 0) -> None:
        self.max_bytes = max_bytes
        self._runs: OrderedDict[str, tuple[int, bytes]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._ahead: dict[str, tuple[int, Future[bytes]]] = {}
        self._pool = (
            ThreadPoolExecutor(read_ahead, thread_name_prefix="kafkatier-read-ahead")
            if read_ahead > 0
            else None
        )
        self._max_ahead = AHEAD_PER_THREAD * read_ahead
        self.hits = 0  # reads served from a run kept here
        self.misses = 0  # reads that found none: a GET follows
        self.ahead = 0  # reads served from a run fetched ahead

    def get(self, key: str, position: int) -> memoryview | None:
        """The cached run of ``key`` from ``position`` on, if one holds that position: a view,
        not a copy (a chunk serves several fetches; with a copy for each, serve's raw fetch
        from S3 ran at a median 267 MB/s against 320 with the view: ``python
        bench/serve_remote.py --mib 96 --rounds 4 --baseline DIR``)."""
        with self._lock:
            found = self._runs.get(key)
            if found is not None and found[0] <= position < found[0] + len(found[1]):
                self._runs.move_to_end(key)
                self.hits += 1
                start, data = found
                return memoryview(data)[position - start :]
            ahead = self._ahead.get(key)
        if ahead is not None and ahead[0] <= position:
            view = self._take_ahead(key, ahead, position)
            if view is not None:
                return view
        with self._lock:
            self.misses += 1
        return None

    def _take_ahead(
        self, key: str, ahead: tuple[int, Future[bytes]], position: int
    ) -> memoryview | None:
        """The run fetched ahead, waited for, kept as the object's run, from ``position``;
        None when it failed or does not hold ``position``."""
        start, future = ahead
        try:
            data = future.result()
        except Exception:  # the reader's own GET meets the fault again and reports it
            data = None
        with self._lock:
            if self._ahead.get(key) is ahead:
                del self._ahead[key]
        if data is None or not start <= position < start + len(data):
            return None
        self.put(key, start, data)
        with self._lock:
            self.ahead += 1
        return memoryview(data)[position - start :]

    def read_ahead(self, key: str, position: int, fetch: Callable[[], bytes]) -> None:
        """Have ``fetch()`` (the run of ``key`` from ``position``) run in the background,
        unless it is held or under way, or too many are (module docstring)."""
        if self._pool is None:
            return
        with self._lock:
            found = self._runs.get(key)
            if found is not None and found[0] <= position < found[0] + len(found[1]):
                return
            current = self._ahead.pop(key, None)
            if current is not None and current[0] == position:
                self._ahead[key] = current
                return
            if current is not None:  # the reader moved elsewhere
                current[1].cancel()
            elif len(self._ahead) >= self._max_ahead:  # the oldest's reader may have stopped
                self._ahead.pop(next(iter(self._ahead)))[1].cancel()
            self._ahead[key] = (position, self._pool.submit(fetch))

    def close(self) -> None:
        """Stop reading ahead (what is under way finishes in its thread, unwaited for)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
            with self._lock:
                self._ahead.clear()

    def put(self, key: str, position: int, data: bytes) -> None:
        """Keep ``data``, whole checked batches of ``key`` from ``position`` (module
        docstring), in place of the object's previous run."""
        if len(data) > self.max_bytes:
            return
        with self._lock:
            old = self._runs.pop(key, None)
            if old is not None:
                self._bytes -= len(old[1])
            self._runs[key] = (position, data)
            self._bytes += len(data)
            while self._bytes > self.max_bytes:
                _, (_, dropped) = self._runs.popitem(last=False)
                self._bytes -= len(dropped)
