"""Machinery shared by the offset and time indexes: Kafka's ``AbstractIndex`` (format §4, §5).

Both files are arrays of fixed-size big-endian entries with no header and no checksum. A new
writable file is preallocated (zero-filled) to ``floor(max_index_size / entry_size)`` entries and
memory-mapped; opening an existing file trusts every whole slot in it, so an untrimmed zero tail
counts as entries, exactly as Kafka does. Python cannot mmap an empty file, so a zero-length index
keeps no map at all and reads from an empty buffer. Kafka's search over the entries is
``search.py``.

A writable index given a :class:`~kafkatier.storage.file_budget.FileBudget` counts its map as
one handle: the budget may unmap it while it is idle (its lock free), and the next access maps
it again; the entries, length and dirty state stay in memory meanwhile. A flush of an index
written through a map since closed fsyncs the file itself (the pages stay dirty in the page
cache after an unmap).

Appended entries are kept in memory (:data:`PENDING_BYTES` at most) and written into the map
when a page's worth has gathered, or before anything reads the entries, flushes, trims or closes
the index (``close_handler``, before a deletion or a rebuild, drops them). Nothing needs them in
the file sooner: readers in other processes read the active segment's indexes as empty, or as
hints they check (the JVM reader: a missing entry costs it a longer scan), and the loader
rebuilds the indexes above the recovery point, which moves only with a flush (or a roll, which
trims). Written at each append, every entry cost a write fault on a page the writer's last flush
had cleaned (the sink's syncfs at every micro-batch): in an ad hoc plain-process micro of the
sink's appends at 1,024 partitions (two batches and two entries a partition) a partition took
170 us, 91-99 us with no entry due, and 130-137 us with the entries kept here (and given to each
index in one call per append).
"""

from __future__ import annotations

import errno
import mmap
import os
import struct
import sys
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

from kafkatier.storage import wire
from kafkatier.storage.errors import CorruptIndexError, LogWriteError, StorageError
from kafkatier.storage.file_budget import FileBudget
from kafkatier.storage.fsutil import as_path, fsync_file
from kafkatier.storage.index.search import largest_lower_bound

# Python 3.13+ can map without keeping a duplicate of the descriptor (the map then has no size()
# or resize(), which this module never calls).
_MAP_OPTIONS: dict[str, bool] = {"trackfd": False} if sys.version_info >= (3, 13) else {}
# Lookups binary-search and appends touch one page: no read-ahead. Without this, the first write
# to a page of a preallocated (sparse) index faults in and zero-fills a whole read-ahead window
# (Python's struct.pack_into clears its bytes first), which cost milliseconds per new index.
_RANDOM_ACCESS: int | None = getattr(mmap, "MADV_RANDOM", None)

# Disk blocks are allocated ahead of the writes through the map in steps of this many bytes: a
# write to a hole of a sparse file that the filesystem cannot fill (no space) is a SIGBUS that
# kills the process, where posix_fallocate fails with ENOSPC.
_BACKING_STEP = 64 * 1024

PENDING_BYTES = 4096
"""Entries kept in memory before they are written into the map (a page: one write fault)."""

__all__ = ["FixedEntryIndex", "IndexFullError", "InvalidIndexEntryError"]


class InvalidIndexEntryError(CorruptIndexError, ValueError):
    """An entry Kafka refuses to append: offset not increasing, relative offset outside int32, or
    a timestamp going backwards (Kafka's ``InvalidOffsetException``/``IndexOffsetOverflowException``
    /``IllegalStateException``). A ``ValueError`` too, since the caller passed a bad argument."""


class IndexFullError(StorageError, ValueError):
    """An append to an index with no free slot (Kafka's ``IllegalArgumentException``)."""


class FixedEntryIndex(ABC):
    """A memory-mapped array of ``ENTRY`` structs; ``entries`` of them are valid.

    Subclasses give the entry layout and which field holds the (relative, on disk) offset. One
    lock serialises every operation, standing in for Kafka's ``lock`` and ``remapLock``: a reader
    must never see the map closed under it by a concurrent resize.
    """

    ENTRY: ClassVar[struct.Struct]
    OFFSET_FIELD: ClassVar[int]  # which field of a parsed entry is the absolute offset

    def __init__(
        self,
        path: Path,
        base_offset: int,
        max_index_size: int,
        writable: bool = True,
        *,
        empty: bool = False,
        budget: FileBudget | None = None,
    ) -> None:
        """``empty``: a read-only view that reads as having no entries whatever the file holds
        (a reader of a segment a writer may still be indexing: lookups scan the batches).
        ``budget``: where a writable index's map is counted (None: kept until closed)."""
        if empty and writable:
            raise ValueError(f"an empty view of {path} cannot be writable")
        self._path = as_path(path)
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self.writable = writable
        self._lock = threading.RLock()
        self._map: mmap.mmap | None = None
        self._snapshot = b""  # a read-only index's bytes, read once (see _map_file)
        self._closed = False
        self._exists = True
        self._budget = budget if writable else None
        self._unmapped = False  # the budget took the map: map again at the next access
        self._registering = False  # this index's own registration must not evict it
        self._dirty = False  # entries written since the last flush
        self._pending = bytearray()  # the last entries, not yet in the map (module docstring)
        self._backed = 0  # bytes from the start known allocated on disk (see reserve)
        self.referenced = True
        created = False
        if empty:
            self._exists = False
        else:
            created = self._open_file()
        self._length = len(self._map) if self._map is not None else len(self._snapshot)
        self.max_entries = self._length // self.ENTRY.size
        # A new file has no entries; an existing one is trusted slot by slot (Kafka's loader).
        self._entries = 0 if created else self.max_entries

    # ------------------------------------------------------------------ file and map lifetime

    def _open_file(self) -> bool:
        """Create and preallocate a missing writable file, then map it; True if created."""
        if self._path.exists():
            self._map_file()
            return False
        if not self.writable:
            self._exists = False  # a read-only view of a missing index: empty, nothing created
            return False
        size = self.ENTRY.size
        if self.max_index_size < size:
            raise ValueError(f"invalid max index size {self.max_index_size} for {self._path}")
        with open(self._path, "xb") as f:
            f.truncate(size * (self.max_index_size // size))
        self._map_file()
        return True

    def _map_file(self) -> None:
        """Writable: a shared map. Read-only: the bytes read once, never a map, because the
        writer trims the active segment's preallocated index at roll and close, and touching a
        mapped page past the new end kills the reader with SIGBUS (indexes are small)."""
        if not self.writable:
            self._snapshot = self._path.read_bytes()
            return
        with open(self._path, "r+b") as f:  # the map keeps its own duplicate before 3.13
            length = os.fstat(f.fileno()).st_size
            self._map = (
                mmap.mmap(f.fileno(), length, access=mmap.ACCESS_WRITE, **_MAP_OPTIONS)
                if length
                else None
            )
        if self._map is not None and _RANDOM_ACCESS is not None:
            self._map.madvise(_RANDOM_ACCESS)
        self._unmapped = False
        if self._map is not None and self._budget is not None:
            self._registering = True
            try:
                self._budget.opened(self)
            finally:
                self._registering = False

    def _buffer(self) -> mmap.mmap | bytes:
        """The entries' bytes, every entry in them (lock held)."""
        if self._pending:
            self._write_pending()
        return self._mapped()

    def _mapped(self) -> mmap.mmap | bytes:
        if self._closed:
            raise StorageError("index is closed", file=str(self._path))
        if self._unmapped:
            self._map_file()
        self.referenced = True
        return self._map if self._map is not None else self._snapshot

    def _write_pending(self) -> None:
        """The entries kept in memory written into the map (lock held; their disk blocks were
        allocated when they were appended: :meth:`_write`)."""
        pending = self._pending
        start = self._entries * self.ENTRY.size - len(pending)
        buffer = self._mapped()
        assert isinstance(buffer, mmap.mmap)  # entries were appended: a writable, mapped file
        buffer[start : start + len(pending)] = pending
        self._pending = bytearray()

    @property
    def unwritten(self) -> int:
        """Entries appended but not yet written into the file (module docstring)."""
        return len(self._pending) // self.ENTRY.size

    def write_pending(self) -> None:
        """Write the entries kept in memory into the file (for a flush that follows)."""
        with self._lock:
            if self._pending:
                self._write_pending()

    def _unmap(self) -> None:
        """Close the map (lock held); the budget stops counting it."""
        if self._map is not None:
            self._map.close()
            self._map = None
            if self._budget is not None:
                self._budget.closed(self)

    def release_if_idle(self) -> bool:
        """The budget's eviction: unmap unless in use (lock held by anyone, or registering);
        the next access maps the file again."""
        if self._registering or not self._lock.acquire(blocking=False):
            return False
        try:
            if self._map is None or self._registering:
                return False
            try:
                self._map.close()
            except BufferError:  # a view into the map is still alive: in use
                return False
            self._map = None
            self._unmapped = True
        finally:
            self._lock.release()
        if self._budget is not None:
            self._budget.closed(self)
        return True

    def close_handler(self) -> None:
        """Unmap without trimming (Kafka's ``closeHandler``, used before deletion, or where the
        loader rebuilds what the file lacks): entries kept in memory are dropped."""
        with self._lock:
            self._pending = bytearray()
            self._unmap()
            self._unmapped = False
            self._closed = True

    def close(self) -> None:
        """Kafka's ``close``: trim to the valid entries, then unmap. A read-only index is never
        trimmed, so closing one leaves its file untouched."""
        with self._lock:
            if self.writable and not self._closed:
                self.trim_to_valid_size()
            self.close_handler()

    def resize(self, new_size: int) -> bool:
        """Set the file length to ``new_size`` rounded down to whole entries (mapped again at the
        next access); Kafka uses it to trim on roll/close and to regrow the active segment's
        indexes on load. The valid entries are never cut, so the cached last entry stays."""
        with self._lock:
            size = self.ENTRY.size
            rounded = size * (new_size // size)
            if self._pending:  # first: a full index's trim is a no-op, and a close follows
                self._write_pending()
            if rounded == self._length:
                return False  # also for a read-only index: trimming a trimmed file is a no-op
            self._require_writable("resize")
            if rounded < self._entries * size:
                raise ValueError(
                    f"cannot resize {self._path} to {rounded} bytes: {self._entries} entries in use"
                )
            if self._closed:
                raise StorageError("index is closed", file=str(self._path))
            self._unmap()
            os.truncate(self._path, rounded)
            self._backed = min(self._backed, rounded)
            self._unmapped = True  # mapped again at the next access
            self._length = rounded
            self.max_entries = self._length // size
            return True

    def trim_to_valid_size(self) -> None:
        """Cut the preallocated tail so the file holds exactly the valid entries."""
        with self._lock:
            if not self._closed:
                self.resize(self._entries * self.ENTRY.size)

    def flush(self) -> None:
        """msync the map if an entry was written since the last flush (once the budget
        unmapped it, fsync the file: its pages stay dirty in the page cache)."""
        with self._lock:
            if not self.writable or not self._dirty:
                return
            if self._pending:
                self._write_pending()
            if self._map is not None:
                self._map.flush()
            elif not self._closed:
                fsync_file(self._path)
            self._dirty = False

    def rename_to(self, path: Path) -> None:
        """Atomically rename the file; the map stays valid (it follows the inode on POSIX)."""
        with self._lock:
            try:
                if self._exists:
                    os.replace(self._path, path)
            finally:
                self._path = as_path(path)

    def delete(self) -> bool:
        """Unmap and delete the file; ``False`` if it was missing (Kafka's ``deleteIfExists``)."""
        with self._lock:
            self.close_handler()
            try:
                self._path.unlink()
            except FileNotFoundError:
                return False
            return True

    def _require_writable(self, operation: str) -> None:
        if not self.writable:
            raise StorageError(f"cannot {operation}: index opened read-only", file=str(self._path))

    # ------------------------------------------------------------------ entries

    @property
    def path(self) -> Path:
        return self._path

    @property
    def exists(self) -> bool:
        """False only for a read-only index whose file was missing (read as empty)."""
        return self._exists

    @property
    def entries(self) -> int:
        return self._entries

    @property
    def is_full(self) -> bool:
        return self.free_slots <= 0

    @property
    def free_slots(self) -> int:
        """Entries that can still be appended."""
        return self.max_entries - self._entries

    @property
    def size_in_bytes(self) -> int:
        """Current file length, preallocated tail included (Kafka's ``length()``)."""
        return self._length

    @property
    def valid_bytes(self) -> int:
        """Bytes covered by valid entries (Kafka's ``sizeInBytes()``)."""
        return self._entries * self.ENTRY.size

    def __len__(self) -> int:
        return self._entries

    def _raw(self, slot: int) -> tuple[int, int]:
        """The two stored fields of a slot, relative offset still relative."""
        fields: tuple[int, int] = self.ENTRY.unpack_from(self._buffer(), slot * self.ENTRY.size)
        return fields

    @abstractmethod
    def _parse(self, slot: int) -> tuple[int, int]:
        """A slot as the public entry (absolute offsets)."""

    def entry(self, i: int) -> tuple[int, int]:
        with self._lock:
            if not 0 <= i < self._entries:
                raise IndexError(f"entry {i} out of range: {self._path} has {self._entries}")
            return self._parse(i)

    def __iter__(self) -> Iterator[tuple[int, int]]:
        with self._lock:
            parsed = [self._parse(i) for i in range(self._entries)]
        return iter(parsed)

    def _relative_offset(self, offset: int) -> int:
        relative = offset - self.base_offset
        if not 0 <= relative <= wire.INT32_MAX:
            raise InvalidIndexEntryError(
                f"offset {offset} does not fit the index's relative range",
                file=str(self._path),
                base_offset=self.base_offset,
            )
        return relative

    def can_append_offset(self, offset: int) -> bool:
        """Whether ``offset`` fits the relative int32 range (Kafka's ``canAppendOffset``)."""
        return 0 <= offset - self.base_offset <= wire.INT32_MAX

    def _check_can_append(self, full: bool) -> None:
        """Kafka checks writability and fullness before it looks at the entry itself."""
        self._require_writable("append")
        if full or self._entries >= self.max_entries:
            raise IndexFullError(
                f"attempt to append to a full index ({self._entries} entries; "
                f"segment.index.bytes={self.max_index_size} holds "
                f"{self.max_index_size // self.ENTRY.size} of {self.ENTRY.size} bytes)",
                file=str(self._path),
            )

    def reserve(self, entries: int) -> None:
        """Allocate disk blocks for the next ``entries`` slots (as far as the file goes) unless
        they have them: :class:`LogWriteError` (no space) here, before the caller writes
        anything, instead of a SIGBUS at the write through the map. Written in steps of
        ``_BACKING_STEP`` bytes, so nearly every call only compares two numbers (without the
        lock: only the appending thread changes the entries, the length and the blocks)."""
        backed = self._backed  # min(end, length) <= backed, said without a call: it runs per append
        if backed >= self._length or (self._entries + entries) * self.ENTRY.size <= backed:
            return
        with self._lock:
            end = min((self._entries + entries) * self.ENTRY.size, self._length)
            if end <= self._backed:
                return
            stop = min(self._length, -(-end // _BACKING_STEP) * _BACKING_STEP)
            try:
                fd = os.open(self._path, os.O_RDWR)
                try:
                    os.posix_fallocate(fd, self._backed, stop - self._backed)
                finally:
                    os.close(fd)
            except OSError as exc:
                if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):  # nothing to allocate with
                    raise LogWriteError.of(
                        "cannot allocate index space", exc, file=str(self._path), position=end
                    ) from exc
            self._backed = stop

    def _write(self, packed: bytes | bytearray, count: int) -> None:
        """Store ``count`` entries (``ENTRY``-packed) in the next free slots (callers checked
        that they fit): kept in memory until a page's worth has gathered (module docstring),
        their disk blocks allocated now (:meth:`reserve`), so that no space fails the append
        that adds them, never the later write of the page, a close or a trim."""
        self.reserve(count)
        self._pending += packed
        self._entries += count
        self._dirty = True
        if len(self._pending) >= PENDING_BYTES:
            self._write_pending()

    # ------------------------------------------------------------------ search and truncation

    def _largest_lower_bound(self, target: int, field: int) -> int:
        """Kafka's ``largestLowerBoundSlotFor`` over the valid entries (``search.py``)."""
        return largest_lower_bound(self._parse, self._entries, self.ENTRY.size, target, field)

    def truncate_to(self, offset: int) -> None:
        """Drop every entry with offset >= ``offset``; a larger offset than any entry is a no-op.

        Time-index entries may share an offset (a larger timestamp for the same batch); Kafka's
        search can land on any of them and keep the earlier ones, so an exact hit is walked back
        to the first entry with that offset. With distinct offsets this is exactly Kafka's result.
        """
        with self._lock:
            field = self.OFFSET_FIELD
            slot = self._largest_lower_bound(offset, field)
            if slot < 0:
                keep = 0
            elif self._parse(slot)[field] == offset:
                while slot > 0 and self._parse(slot - 1)[field] == offset:
                    slot -= 1
                keep = slot
            else:
                keep = slot + 1
            self._truncate_to_entries(keep)

    def _truncate_to_entries(self, entries: int) -> None:
        if self._pending:
            self._write_pending()
        self._entries = entries
        self._entries_changed()

    def reset(self) -> None:
        """Drop every entry and regrow the file to ``max_index_size`` (Kafka's ``reset``)."""
        with self._lock:
            self._require_writable("reset")
            self._truncate_to_entries(0)
            self.resize(self.max_index_size)

    @abstractmethod
    def _entries_changed(self) -> None:
        """Refresh any cached last entry after truncation or a remap."""

    def _check_length(self) -> None:
        if self._length % self.ENTRY.size != 0:
            raise CorruptIndexError(
                f"index length is not a multiple of {self.ENTRY.size}",
                file=str(self._path),
                length=self._length,
            )

    @abstractmethod
    def sanity_check(self) -> None:
        """Kafka's ``sanityCheck``: raise :class:`CorruptIndexError` on obvious damage."""
