"""A bound on the descriptors a process's logs hold open: ``log.max.open.files``.

A Kafka broker keeps every segment's ``.log`` open and maps an index only when it is first
needed (``LazyIndex``), and asks its operators for a ``ulimit -n`` of 100,000. A writer here may
hold thousands of partitions in a process whose limit is 1,024, so every descriptor a writable
segment keeps -- its ``.log`` file and each mapped index (Python's ``mmap`` keeps a duplicate of
the descriptor it maps, before Python 3.13's ``trackfd=False``) -- is a *handle* counted by a
:class:`FileBudget`. When a new handle would exceed the budget, the least recently used idle
handles are closed, by the CLOCK approximation of LRU: a handle used since the hand last passed
gets a second chance. A closed handle is reopened by its next use, transparently: only the
descriptor goes, never what its owner knows (sizes, entries, dirty state), and the bytes written
through it stay in the page cache, where the next ``fsync`` of the file -- through any
descriptor -- makes them durable (Linux reports a writeback error to the first ``fsync`` after
it, whichever descriptor it comes through).

A handle in use is never closed under its user: :class:`BudgetedFile` counts its users (a
thread using it holds a pin), and an index is busy while its lock is held. When every handle
is busy the budget is exceeded for that moment rather than anything failing.

The setting: ``log.max.open.files`` (RocksDB's ``max_open_files``, with Kafka's prefix for the
log manager's settings); -1, the default, derives it from the process's ``RLIMIT_NOFILE``: half
of the soft limit (512 under the common 1,024), leaving the rest to sockets, libraries and the
short-lived descriptors of fsyncs, checkpoint writes and readers' maps.
"""

from __future__ import annotations

import os
import resource
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Final, Protocol

from kafkatier.storage.errors import ConfigError, StorageError

LOG_MAX_OPEN_FILES: Final = "log.max.open.files"
MIN_OPEN_FILES: Final = 16
_UNBOUNDED_SOFT_LIMIT: Final = 1 << 20
_SPARE_CANDIDATES: Final = 8


class Handle(Protocol):
    """Something holding one descriptor that it can give back and take again later."""

    referenced: bool  # used since the CLOCK hand last passed it

    def release_if_idle(self) -> bool:
        """Close the descriptor unless in use; True if it was closed (and :meth:`FileBudget.
        closed` called)."""


def default_max_open_files() -> int:
    """Half of the soft ``RLIMIT_NOFILE`` (at least :data:`MIN_OPEN_FILES`)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft > _UNBOUNDED_SOFT_LIMIT:
        soft = _UNBOUNDED_SOFT_LIMIT
    return max(MIN_OPEN_FILES, soft // 2)


def resolve_max_open_files(value: int | None) -> int:
    """``log.max.open.files`` as given (None or -1: derived from the limit); a ConfigError
    naming the setting for anything below :data:`MIN_OPEN_FILES`."""
    if value is None or value == -1:
        return default_max_open_files()
    if value < MIN_OPEN_FILES:
        raise ConfigError(
            f"must be -1 (half the open-file limit) or at least {MIN_OPEN_FILES}",
            setting=LOG_MAX_OPEN_FILES,
            value=value,
        )
    return value


class FileBudget:
    """The open handles of one budget, oldest first, and the CLOCK hand that evicts them."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._open: OrderedDict[Handle, None] = OrderedDict()
        self.evictions = 0  # handles closed to make room (for tests and metrics)

    @property
    def open_handles(self) -> int:
        return len(self._open)

    def opened(self, handle: Handle) -> None:
        """Count a handle that just took its descriptor; close idle ones beyond the limit."""
        handle.referenced = True
        with self._lock:
            self._open[handle] = None
            excess = len(self._open) - self.limit
            candidates = self._candidates(excess) if excess > 0 else []
        for victim in candidates:  # outside the lock: a victim's release takes it again
            if excess <= 0:
                break
            if victim is not handle and victim.release_if_idle():
                self.evictions += 1
                excess -= 1

    def closed(self, handle: Handle) -> None:
        """Forget a handle whose descriptor was closed (a no-op for one not counted)."""
        with self._lock:
            self._open.pop(handle, None)

    def _candidates(self, excess: int) -> list[Handle]:
        """CLOCK: from the oldest, a referenced handle loses its bit and goes to the back, an
        unreferenced one is a candidate (some spare ones, for those found busy); at most two
        turns of the hand."""
        wanted = excess + _SPARE_CANDIDATES
        found: list[Handle] = []
        for _ in range(2 * len(self._open)):
            if len(found) >= wanted:
                break
            handle = next(iter(self._open))
            self._open.move_to_end(handle)
            if handle.referenced:
                handle.referenced = False
            else:
                found.append(handle)
        return found


_process_budget: FileBudget | None = None
_process_lock = threading.Lock()


def process_budget() -> FileBudget:
    """The budget shared by every writable segment not given another: descriptors are a
    process's, whichever log directory holds them."""
    global _process_budget
    with _process_lock:
        if _process_budget is None:
            _process_budget = FileBudget(default_max_open_files())
        return _process_budget


class BudgetedFile:
    """A file's descriptor, opened at first use and given back when the budget needs room.

    ``with f.use() as fd:`` pins the descriptor for the block (nested and concurrent uses pin it
    too); only an unpinned one is closed. Without a budget the descriptor is opened at once
    and kept until :meth:`close` (a reader's segment must stay readable after another process
    deletes its file)."""

    def __init__(self, path: Path, flags: int, budget: FileBudget | None, fd: int = -1) -> None:
        self.path = path
        self._flags = flags
        self._budget = budget
        self._lock = threading.Lock()
        self._fd = fd
        self._pins = 0
        self._closed = False
        self.referenced = True
        if budget is None and fd < 0:
            self._fd = os.open(path, flags)
        elif budget is not None and fd >= 0:
            budget.opened(self)

    @classmethod
    def writable(cls, path: Path, budget: FileBudget) -> tuple[BudgetedFile, int | None]:
        """The file at ``path`` and its size, or None for a file created now (empty, its
        descriptor open); an existing file is only stat'ed (opened at first use)."""
        try:
            return cls(path, os.O_RDWR, budget), os.stat(path).st_size
        except FileNotFoundError:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            return cls(path, os.O_RDWR, budget, fd), None

    def use(self) -> _Pinned:
        return _Pinned(self)

    def pin(self) -> int:
        """The descriptor, pinned until :meth:`unpin` (``use()`` without its context-manager
        object, for a write path that runs per partition and batch)."""
        opened = False
        with self._lock:
            if self._closed:
                raise StorageError("file closed", file=str(self.path))
            if self._fd < 0:
                self._fd = os.open(self.path, self._flags)
                opened = True
            self._pins += 1
            fd = self._fd
        self.referenced = True
        if opened and self._budget is not None:
            self._budget.opened(self)
        return fd

    def unpin(self) -> None:
        with self._lock:
            self._pins -= 1

    def release_if_idle(self) -> bool:
        if not self._lock.acquire(blocking=False):
            return False
        try:
            if self._pins or self._fd < 0:
                return False
            os.close(self._fd)
            self._fd = -1
        finally:
            self._lock.release()
        if self._budget is not None:
            self._budget.closed(self)
        return True

    def fsync(self) -> None:
        """fsync the file: through the open descriptor, else a short-lived one (not counted:
        a flush of many evicted files must not churn the budget)."""
        with self._lock:
            if self._closed:
                raise StorageError("file closed", file=str(self.path))
            if self._fd >= 0:
                self._pins += 1
                fd = self._fd
            else:
                fd = -1
        if fd < 0:
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            return
        try:
            os.fsync(fd)
        finally:
            self.unpin()

    def close(self) -> None:
        """Close for good: a later use raises (as a closed channel does)."""
        with self._lock:
            fd, self._fd = self._fd, -1
            self._closed = True
        if fd >= 0:
            os.close(fd)
            if self._budget is not None:
                self._budget.closed(self)

    @property
    def is_open(self) -> bool:
        return self._fd >= 0


class _Pinned:
    """The context manager of :meth:`BudgetedFile.use` (a class: cheaper than a generator)."""

    __slots__ = ("_file",)

    def __init__(self, file: BudgetedFile) -> None:
        self._file = file

    def __enter__(self) -> int:
        return self._file.pin()

    def __exit__(self, *exc: object) -> None:
        self._file.unpin()
