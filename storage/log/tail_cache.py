"""The batch headers of each partition's last segment, kept between reads and extended as the
writer appends, so ``kafkatier serve``'s fetches and a Spark streaming query's triggers near the
end of a large active segment do not walk all of its headers again (80,000 small batches take
about 30 ms to frame in C, 0.5 s in Python, on every fetch or trigger). Headers are kept as rows
of int64s (``header_table.py``), appended in place as the file grows.

An entry is the headers of ``<base>.log`` from position 0 up to ``scanned`` (whole batches
only), for one file identity (inode). A new last segment (a roll), another inode (the cleaner
swapped the file) or a file shorter than ``scanned`` (the writer truncated a torn tail while
recovering) drops the entry and scans from 0. At most :data:`MAX_PARTITIONS` entries and
:data:`MAX_HEADERS` headers are kept: a partition whose headers do not fit takes the room of
those unused for :data:`IDLE_S` (the least recently used first), else it is walked for this use
and not kept.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from kafkatier.storage.log.batch_position import BatchPosition
from kafkatier.storage.log.header_table import HeaderBuffer, HeaderTable, empty
from kafkatier.storage.log.readonly import ReadOnlyPartition
from kafkatier.storage.log.tail import LogFile

MAX_PARTITIONS = 4096
MAX_HEADERS = 1_000_000
"""Headers kept in all (a row of ``header_table.py``, 56 bytes, with up to a quarter more of
room to grow: some 53-67 MiB; ``python bench/tail_cache_memory.py``): a query on a thousand
partitions whose active segments hold a million tiny batches must not keep them all. Past it a
partition is walked again at its next use, as without a cache (:data:`IDLE_S` says which ones
keep their room)."""
IDLE_S = 60.0
"""How long a partition's headers must have gone unused before a partition that does not fit
may take their room. Dropping the least recently used at once thrashed under a streaming
query, whose triggers use every partition in turn: four partitions of 80,000 batches each (one
more than fit) were all walked again at every trigger, 2.3 s a trigger against 0.27 s over
short segments (``bench/read_tail.py --batches 80000``); now three stay kept and one is
walked."""


@dataclass
class _Entry:
    base: int
    inode: int
    scanned: int = 0
    headers: HeaderBuffer = field(default_factory=HeaderBuffer)
    used: float = 0.0  # the clock's time of its last use


class TailCache:
    """Last-segment headers per partition directory (module docstring)."""

    def __init__(
        self, max_headers: int = MAX_HEADERS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.max_headers = max_headers
        self._clock = clock
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._headers = 0  # held by the entries, in all
        self._lock = threading.Lock()

    def __reduce__(self) -> tuple[type[TailCache], tuple[()]]:
        """Pickled empty: Spark pickles a Python stream reader (which holds one) to send it to
        its workers, and what a cache knows is only good in the process that read it."""
        return TailCache, ()

    @property
    def held(self) -> tuple[int, int]:
        """(partitions, headers) kept now."""
        with self._lock:
            return len(self._entries), self._headers

    def headers(self, part: ReadOnlyPartition) -> HeaderTable:
        """Every whole batch header of ``part``'s last segment now."""
        return self._entry(part).headers.table() if part.bases else HeaderTable(empty())

    def locate(self, part: ReadOnlyPartition, offset: int) -> Iterator[BatchPosition]:
        """The last segment's batches from the first whose last offset is >= ``offset``."""
        table = self._entry(part).headers.table()
        return table.positions(table.start_of(offset))

    def _entry(self, part: ReadOnlyPartition) -> _Entry:
        base = part.bases[-1]
        path = part.file(base, ".log")
        with LogFile(path) as log:
            inode = os.fstat(log.fd).st_ino
            with self._lock:
                entry = self._entries.pop(part.path, None)
                if entry is not None:
                    self._headers -= entry.headers.count
                if entry is None or (entry.base, entry.inode) != (base, inode) or (
                    log.size < entry.scanned
                ):
                    entry = _Entry(base, inode)
                if log.size > entry.scanned:
                    self._extend(entry, log)
                self._keep(part.path, entry)
        return entry

    def _keep(self, path: str, entry: _Entry) -> None:
        """``entry`` kept as the most recently used where it fits once the entries unused for
        :data:`IDLE_S` are dropped (the least recently used first); else it served this use
        only, as one larger than the whole budget does."""
        if entry.headers.count > self.max_headers:
            return  # never fits: no other entry is dropped for it
        now = self._clock()
        while self._entries and not self._fits(entry):
            if now - next(iter(self._entries.values())).used < IDLE_S:
                return  # the rest are in use: dropping them would only move the walks there
            self._headers -= self._entries.popitem(last=False)[1].headers.count
        if self._fits(entry):
            entry.used = now
            self._entries[path] = entry
            self._headers += entry.headers.count

    def _fits(self, entry: _Entry) -> bool:
        return (len(self._entries) < MAX_PARTITIONS
                and self._headers + entry.headers.count <= self.max_headers)  # fmt: skip

    @staticmethod
    def _extend(entry: _Entry, log: LogFile) -> None:
        new = log.table(entry.scanned)
        if new.end is not None:
            entry.headers.append(new.rows)  # tables handed out before keep their rows
            entry.scanned = new.end
