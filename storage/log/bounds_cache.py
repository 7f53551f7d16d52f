"""A reader's last bounds of each partition, kept while the partition's files show no change.

A consumer polling at the end of a topic names every partition in each fetch, and each
partition's bounds (``bounds.scan_bounds``) cost a listing of its directory, its last segment's
new headers and its newest producer snapshot: about 90 us a partition in ``kafkatier serve``
by an ad hoc in-process timing at 1,024 partitions (``bench/serve_scale.py`` measures whole
fetches, before and after: README). :class:`BoundsCache` keeps each partition's bounds with
stamps of what they were read from, and a partition whose stamps are unchanged costs two
``stat`` calls.

The stamps: the partition directory's inode and modification time (a segment, index or
snapshot created, renamed or removed changes it), the last segment's inode, size and
modification time (an append, a truncation, a rewrite in place), and the log start the caller
read from the checkpoint. They are taken before the bounds are read, so a change while reading
shows as a change at the next look. A filesystem stamps modifications with a coarse clock, so a
change in the same tick as the look could leave a modification time as it was; a stamp is
therefore kept only once both times lie :data:`SETTLED_NS` before the look (git's "racy"
entries), after which any change moves them. A partition written to all the time is read anew
at each look, as without the cache.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Final, NamedTuple

from kafkatier.storage.log.bounds import PartitionBounds

SETTLED_NS: Final = 1_000_000_000
MAX_PARTITIONS: Final = 100_000

_Stamps = tuple[int, ...]  # dir inode, mtime; log inode, size, mtime; the log start


class Look(NamedTuple):
    """A partition's stamps taken before its bounds are read: the directory's before its
    listing (:meth:`BoundsCache.look`), then the last segment's before its headers
    (:meth:`at_log`)."""

    directory: str
    at_ns: int
    stamps: tuple[int, ...]
    log_path: str = ""

    def at_log(self, log_path: str) -> Look | None:
        """This look with the stamp of the last segment, ``log_path`` (None: it is gone)."""
        try:
            return self._replace(stamps=(*self.stamps, *_log_stamp(log_path)), log_path=log_path)
        except OSError:
            return None


class BoundsCache:
    """Partition directory -> its bounds while unchanged (module docstring). Thread-safe."""

    def __init__(self, clock_ns: Callable[[], int] = time.time_ns) -> None:
        self._clock_ns = clock_ns
        self._entries: OrderedDict[str, tuple[str, _Stamps, PartitionBounds]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0  # looks answered from the cache (tests, metrics)

    def get(self, directory: str, log_start: int) -> PartitionBounds | None:
        """The bounds kept for ``directory`` if its files and ``log_start`` are as they were."""
        found = self._stamps_now(directory)
        if found is None or (*found[1], log_start) != found[0][1]:
            return None
        self.hits += 1
        return found[0][2]

    def token(self, directory: str) -> tuple[int, ...] | None:
        """Stamps of a kept partition that change whenever its files do (a waiting fetch's
        look for changes: two ``stat`` calls instead of a listing), or None where the partition
        is not kept or its stamps have not settled (a change within the same clock tick could
        leave them as they are)."""
        found = self._stamps_now(directory)
        if found is None or not _settled(found[1], self._clock_ns()):
            return None
        return found[1]

    def _stamps_now(
        self, directory: str
    ) -> tuple[tuple[str, _Stamps, PartitionBounds], _Stamps] | None:
        """The kept entry of ``directory`` and its files' stamps now (None: none kept, or its
        files are gone)."""
        with self._lock:
            found = self._entries.get(directory)
        if found is None:
            return None
        try:
            return found, (*_dir_stamp(directory), *_log_stamp(found[0]))
        except OSError:
            return None

    def look(self, directory: str) -> Look | None:
        """The directory's stamp before it is listed (None: it is gone)."""
        at = self._clock_ns()
        try:
            return Look(directory, at, _dir_stamp(directory))
        except OSError:
            return None

    def put(self, look: Look | None, log_start: int, bounds: PartitionBounds) -> None:
        """Keep ``bounds``, read after ``look`` (with its last segment's stamp) and with the
        checkpointed ``log_start``, if every stamp has settled; else forget the partition."""
        if look is None or not look.log_path:
            return
        with self._lock:
            if not _settled(look.stamps, look.at_ns):
                self._entries.pop(look.directory, None)
                return
            self._entries[look.directory] = (look.log_path, (*look.stamps, log_start), bounds)
            self._entries.move_to_end(look.directory)
            while len(self._entries) > MAX_PARTITIONS:
                self._entries.popitem(last=False)


def _settled(stamps: _Stamps, at_ns: int) -> bool:
    """Whether both modification times of ``stamps`` (a directory's and its last segment's)
    lie :data:`SETTLED_NS` before ``at_ns`` (module docstring)."""
    _, dir_mtime, _, _, log_mtime = stamps[:5]
    return max(dir_mtime, log_mtime) < at_ns - SETTLED_NS


def _dir_stamp(directory: str) -> tuple[int, int]:
    st = os.stat(directory)
    return st.st_ino, st.st_mtime_ns


def _log_stamp(path: str) -> tuple[int, int, int]:
    st = os.stat(path)
    return st.st_ino, st.st_size, st.st_mtime_ns
