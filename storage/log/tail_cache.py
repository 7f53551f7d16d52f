"""The batch headers of each partition's last segment, kept between reads and extended as the
writer appends, so ``kafkatier serve``'s fetches and a Spark streaming query's triggers near the
end of a large active segment do not walk all of its headers again (50,000 small batches take
~0.5 s to walk in Python, on every fetch or trigger).

An entry is the headers of ``<base>.log`` from position 0 up to ``scanned`` (whole batches
only), for one file identity (inode). A new last segment (a roll), another inode (the cleaner
swapped the file) or a file shorter than ``scanned`` (the writer truncated a torn tail while
recovering) drops the entry and scans from 0. At most :data:`MAX_PARTITIONS` entries are kept,
the least recently used dropped first.
"""

from __future__ import annotations

import bisect
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from kafkatier.storage.log.batch_position import BatchPosition
from kafkatier.storage.log.readonly import ReadOnlyPartition
from kafkatier.storage.log.tail import Header, LogFile

MAX_PARTITIONS = 4096


@dataclass
class _Entry:
    base: int
    inode: int
    scanned: int = 0
    headers: list[Header] = field(default_factory=list)
    last_offsets: list[int] = field(default_factory=list)


class TailCache:
    """Last-segment headers per partition directory (module docstring)."""

    def __init__(self) -> None:
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def __reduce__(self) -> tuple[type[TailCache], tuple[()]]:
        """Pickled empty: Spark pickles a Python stream reader (which holds one) to send it to
        its workers, and what a cache knows is only good in the process that read it."""
        return TailCache, ()

    def headers(self, part: ReadOnlyPartition) -> list[Header]:
        """Every whole batch header of ``part``'s last segment now (not to be modified)."""
        return self._entry(part).headers if part.bases else []

    def locate(self, part: ReadOnlyPartition, offset: int) -> list[BatchPosition]:
        """The last segment's batches from the first whose last offset is >= ``offset``."""
        entry = self._entry(part)
        start = bisect.bisect_left(entry.last_offsets, offset)
        return [h.at for h in entry.headers[start:]]

    def _entry(self, part: ReadOnlyPartition) -> _Entry:
        base = part.bases[-1]
        path = part.file(base, ".log")
        with LogFile(path) as log:
            inode = os.fstat(log.fd).st_ino
            with self._lock:
                entry = self._entries.get(part.path)
                if entry is None or (entry.base, entry.inode) != (base, inode) or (
                    log.size < entry.scanned
                ):
                    entry = _Entry(base, inode)
                self._entries[part.path] = entry
                self._entries.move_to_end(part.path)
                while len(self._entries) > MAX_PARTITIONS:
                    self._entries.popitem(last=False)
                if log.size > entry.scanned:
                    self._extend(entry, log)
        return entry

    @staticmethod
    def _extend(entry: _Entry, log: LogFile) -> None:
        new = list(log.headers(entry.scanned))
        if new:
            entry.headers = [*entry.headers, *new]  # a new list: readers may hold the old one
            entry.last_offsets = [*entry.last_offsets, *(h.at.last_offset for h in new)]
            entry.scanned = new[-1].at.position + new[-1].at.size
