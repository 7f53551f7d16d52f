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

With a :class:`~kafkatier.storage.log.dir_watch.DirectoryWatch` (``kafkatier serve`` has one),
a watched partition needs no ``stat`` at all: its bounds are kept with the directory's
generation, taken before the listing, and hold while the generation is the same (the kernel
reports every write, creation, removal and rename in the directory, so no timestamp has to
settle either). A directory the watch cannot take keeps the stamps.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Final, NamedTuple

from kafkatier.storage.log.bounds import PartitionBounds
from kafkatier.storage.log.dir_watch import DirectoryWatch
from kafkatier.storage.log.readonly import ReadOnlyPartition

SETTLED_NS: Final = 1_000_000_000
MAX_PARTITIONS: Final = 100_000

_Stamps = tuple[int, ...]  # dir inode, mtime; log inode, size, mtime; the log start


class _Entry(NamedTuple):
    """A kept partition: its last segment, the stamps and log start its bounds were read with,
    and its watch's generation then (None: not watched)."""

    log_path: str
    stamps: _Stamps
    bounds: PartitionBounds
    generation: int | None


class Look(NamedTuple):
    """A partition's stamps taken before its bounds are read: the directory's before its
    listing (:meth:`BoundsCache.look`), then the last segment's before its headers
    (:meth:`at_log`)."""

    directory: str
    at_ns: int
    stamps: tuple[int, ...]
    log_path: str = ""
    generation: int | None = None  # the directory's, where a DirectoryWatch has it

    def at_log(self, log_path: str) -> Look | None:
        """This look with the stamp of the last segment, ``log_path`` (None: it is gone)."""
        try:
            return self._replace(stamps=(*self.stamps, *_log_stamp(log_path)), log_path=log_path)
        except OSError:
            return None


class BoundsCache:
    """Partition directory -> its bounds while unchanged (module docstring). Thread-safe."""

    def __init__(
        self, clock_ns: Callable[[], int] = time.time_ns, watch: DirectoryWatch | None = None
    ) -> None:
        self._clock_ns = clock_ns
        self._watch = watch
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0  # looks answered from the cache (tests, metrics)

    def get(self, directory: str, log_start: int) -> PartitionBounds | None:
        """The bounds kept for ``directory`` if its files and ``log_start`` are as they were."""
        with self._lock:
            entry = self._entries.get(directory)
        if entry is not None and entry.generation is not None and self._watch is not None:
            now = self._watch.generation(directory)
            if now != entry.generation or entry.stamps[-1] != log_start:
                return None
            self.hits += 1
            return entry.bounds
        found = self._stamps_now(directory)
        if found is None or (*found[1], log_start) != found[0].stamps:
            return None
        self.hits += 1
        return found[0].bounds

    def token(self, directory: str) -> tuple[int, ...] | None:
        """A value that changes whenever the partition's files do (a waiting fetch's look for
        changes): its watch's generation, else the stamps of a kept partition (two ``stat``
        calls instead of a listing); None where the partition is neither watched nor kept, or
        its stamps have not settled (a change within the same clock tick could leave them as
        they are)."""
        if self._watch is not None:
            generation = self._watch.generation(directory)
            if generation is not None:
                return (generation,)
        found = self._stamps_now(directory)
        if found is None or not _settled(found[1], self._clock_ns()):
            return None
        return found[1]

    @property
    def watch(self) -> DirectoryWatch | None:
        return self._watch

    def watched(self, directory: str) -> bool:
        """Whether :meth:`token` of ``directory`` is its watch's generation (every change of
        its files then reaches the watch's ``on_change``)."""
        return self._watch is not None and self._watch.generation(directory) is not None

    def _stamps_now(self, directory: str) -> tuple[_Entry, _Stamps] | None:
        """The kept entry of ``directory`` and its files' stamps now (None: none kept, or its
        files are gone)."""
        with self._lock:
            found = self._entries.get(directory)
        if found is None:
            return None
        try:
            return found, (*_dir_stamp(directory), *_log_stamp(found.log_path))
        except OSError:
            return None

    def look(self, directory: str) -> Look | None:
        """The directory's stamp (and its watch's generation) before it is listed (None: it is
        gone)."""
        generation = None if self._watch is None else self._watch.watch(directory)
        at = self._clock_ns()
        try:
            return Look(directory, at, _dir_stamp(directory), generation=generation)
        except OSError:
            return None

    def keep(
        self, look: Look | None, part: ReadOnlyPartition, log_start: int,
        scan: Callable[[], PartitionBounds],
    ) -> PartitionBounds:  # fmt: skip
        """``scan()`` of ``part`` (opened, with ``log_start``, after ``look``), kept for the
        next look with its last segment's stamp."""
        if look is not None and part.bases:
            look = look.at_log(part.file(part.bases[-1], ".log"))
        found = scan()
        self.put(look, log_start, found)
        return found

    def put(self, look: Look | None, log_start: int, bounds: PartitionBounds) -> None:
        """Keep ``bounds``, read after ``look`` (with its last segment's stamp) and with the
        checkpointed ``log_start``, if the directory is watched or every stamp has settled;
        else forget the partition."""
        if look is None or not look.log_path:
            return
        with self._lock:
            if look.generation is None and not _settled(look.stamps, look.at_ns):
                self._entries.pop(look.directory, None)
                return
            stamps = (*look.stamps, log_start)
            self._entries[look.directory] = _Entry(look.log_path, stamps, bounds, look.generation)
            self._entries.move_to_end(look.directory)
            while len(self._entries) > MAX_PARTITIONS:
                self._entries.popitem(last=False)

    def __reduce__(self) -> tuple[type[BoundsCache], tuple[()]]:
        """Pickled (a Spark closure), a new empty cache without a watch: what it keeps is the
        process's own."""
        return (BoundsCache, ())


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
