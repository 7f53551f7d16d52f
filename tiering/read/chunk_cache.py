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
"""

from __future__ import annotations

import threading
from collections import OrderedDict

DEFAULT_MAX_BYTES = 64 << 20


class ChunkCache:
    """The last run fetched of each remote ``.log`` object, by object key (module docstring)."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._runs: OrderedDict[str, tuple[int, bytes]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0  # reads served from a run kept here
        self.misses = 0  # reads that found none: a GET follows

    def get(self, key: str, position: int) -> memoryview | None:
        """The cached run of ``key`` from ``position`` on, if one holds that position: a view,
        not a copy (a chunk serves several fetches; with a copy for each, serve's raw fetch
        from S3 ran at a median 267 MB/s against 320 with the view: ``python
        bench/serve_remote.py --mib 96 --rounds 4 --baseline DIR``)."""
        with self._lock:
            found = self._runs.get(key)
            if found is None or not found[0] <= position < found[0] + len(found[1]):
                self.misses += 1
                return None
            self._runs.move_to_end(key)
            self.hits += 1
            start, data = found
        return memoryview(data)[position - start :]

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
