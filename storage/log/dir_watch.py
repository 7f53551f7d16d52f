"""Changes to partition directories as the kernel reports them (Linux ``inotify(7)``), so that a
reader keeping what it read of many partitions (``bounds_cache``) learns which ones changed
without a ``stat`` of each.

Why: a consumer tailing a topic names every partition in each fetch, and ``kafkatier serve``
checked each one's directory and last segment with two ``stat`` calls per look (four a fetch,
with the long poll's look for changes): at 1,024 partitions that was a quarter of an idle
fetch's CPU, and the long poll's repeated looks cost a tenth of a core per idle consumer. A
Kafka broker learns of appends from its own writes; here the writers are other processes, and
the kernel tells of their writes instead.

Each watched directory has a *generation*, a number that changes whenever anything in it is
written, created, removed or renamed (a ``write`` to a segment, a roll, a new snapshot, a
deleted segment) or the directory itself goes. Events are read from the inotify descriptor on
every :meth:`DirectoryWatch.generation` call (a non-blocking ``read``: no thread, and a change a
writer finished before the call is always seen); a queue overflow (more events than the kernel
keeps between two reads) changes every generation. A directory that cannot be watched (the
per-user watch limit, ``fs.inotify.max_user_watches``, reached; a filesystem without inotify
such as most network mounts) gets None, and its reader falls back to its own checks.

Writes through a shared mapping (``mmap``) raise no event; kafkatier's and Kafka's writers
append to segments with ``write`` (the indexes, which are mapped, change only with their
segment's ``.log``).

Not ``watchdog`` (which the sidecar uses to start its passes): it delivers events from its own
thread, some time after they happened, and has no way to ask "is there anything pending now";
a reader answering from kept bounds would then serve a partition as it was before a write that
finished before the request (a ``produce`` done, and ListOffsets still at the old end). Reading
the descriptor in the caller's thread makes the order exact, and one descriptor serves any
number of folders (watchdog's observer takes a thread and an inotify instance for each
non-recursive watch; the default limit is 128 instances a user).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import itertools
import os
import select
import struct
import sys
import threading
from collections.abc import Callable
from typing import Final

IN_MODIFY: Final = 0x002
IN_MOVED_FROM: Final = 0x040
IN_MOVED_TO: Final = 0x080
IN_CREATE: Final = 0x100
IN_DELETE: Final = 0x200
IN_DELETE_SELF: Final = 0x400
IN_MOVE_SELF: Final = 0x800
IN_Q_OVERFLOW: Final = 0x4000
IN_IGNORED: Final = 0x8000
IN_ONLYDIR: Final = 0x0100_0000
_GONE: Final = IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED
WATCHED: Final = (IN_MODIFY | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
                  | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)  # fmt: skip
"""What changes a generation: any file of the directory written, created, removed or renamed,
or the directory itself removed or renamed."""

_EVENT: Final = struct.Struct("iIII")  # wd, mask, cookie, len (then len bytes of name)
_SHARED: tuple[int, DirectoryWatch | None] | None = None  # (the process that made it, it)
_SHARED_LOCK = threading.Lock()
_READ_BYTES: Final = 64 * 1024


class DirectoryWatch:
    """Directory -> its generation (module docstring). Thread-safe; :meth:`open` makes one."""

    def __init__(self, fd: int, libc: ctypes.CDLL) -> None:
        self._fd = fd
        self._libc = libc
        self._pending = select.poll()
        self._pending.register(fd, select.POLLIN)
        self._lock = threading.Lock()
        self._wd_of: dict[str, int] = {}
        self._dir_of: dict[int, str] = {}
        self._generations: dict[str, int] = {}
        self._next = itertools.count(1)
        self.overflows = 0  # queue overflows seen (tests, metrics)
        self.on_change: Callable[[], None] | None = None
        """Called (in whichever thread read them) after events changed any generation: a
        waiter on changes (``kafkatier serve``'s long polls) learns of them without looking."""

    @classmethod
    def shared(cls) -> DirectoryWatch | None:
        """One watch for the whole process (made at the first call; a forked child makes its
        own, since a descriptor shared with the parent would split the events between them):
        readers that keep bounds (each streaming query) share it, as a user's inotify
        instances are few (``fs.inotify.max_user_instances``, 128 by default)."""
        global _SHARED
        with _SHARED_LOCK:
            if _SHARED is None or _SHARED[0] != os.getpid():
                _SHARED = (os.getpid(), cls.open())
            return _SHARED[1]

    @classmethod
    def open(cls) -> DirectoryWatch | None:
        """A new watch, or None where the system has no inotify (not Linux, or no descriptor
        left)."""
        if not sys.platform.startswith("linux"):
            return None
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        return None if fd < 0 else cls(fd, libc)

    def watch(self, directory: str) -> int | None:
        """``directory``'s generation, watching it from now on if it was not (None: it cannot
        be watched). Take it *before* reading the directory's files: any change after it moves
        the generation."""
        with self._lock:
            changed = self._drain()
            if directory not in self._wd_of:
                wd = self._libc.inotify_add_watch(self._fd, os.fsencode(directory), WATCHED)
                if wd >= 0:
                    self._forget_wd(wd)  # the same inode watched under another name before
                    self._wd_of[directory] = wd
                    self._dir_of[wd] = directory
                    self._generations[directory] = next(self._next)
            found = self._generations.get(directory)
        self._tell(changed)
        return found

    def generation(self, directory: str) -> int | None:
        """``directory``'s generation now, every change finished before this call counted;
        None where it is not watched (never was, or it went: removed or renamed)."""
        with self._lock:
            changed = self._drain()
            found = self._generations.get(directory)
        self._tell(changed)
        return found

    def drain(self) -> None:
        """Read the pending events now (an event loop's reader of :meth:`fileno`)."""
        with self._lock:
            changed = self._drain()
        self._tell(changed)

    def fileno(self) -> int:
        """The inotify descriptor: readable while events are pending."""
        return self._fd

    def _tell(self, changed: bool) -> None:
        if changed and self.on_change is not None:
            self.on_change()

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
                self._wd_of.clear()
                self._dir_of.clear()
                self._generations.clear()

    def _drain(self) -> bool:
        """Read every pending event, moving the generations of their directories; whether any
        moved (a ``poll`` first: a third of the cost of a ``read`` that finds nothing, the
        common case)."""
        changed = False
        while self._fd >= 0 and self._pending.poll(0):
            try:
                data = os.read(self._fd, _READ_BYTES)
            except BlockingIOError:
                break
            at = 0
            while at + _EVENT.size <= len(data):
                wd, mask, _cookie, length = _EVENT.unpack_from(data, at)
                at += _EVENT.size + length
                changed = self._event(wd, mask) or changed
        return changed

    def _event(self, wd: int, mask: int) -> bool:
        """One event's change of generations; whether it made any."""
        if mask & IN_Q_OVERFLOW:  # events were lost: any directory may have changed
            self.overflows += 1
            for name in self._generations:
                self._generations[name] = next(self._next)
            return True
        directory = self._dir_of.get(wd)
        if directory is None:
            return False
        self._generations[directory] = next(self._next)
        if mask & _GONE:  # its next look watches whatever is at that path then
            if not mask & IN_IGNORED:
                self._libc.inotify_rm_watch(self._fd, wd)
            self._forget_wd(wd)
        return True

    def _forget_wd(self, wd: int) -> None:
        directory = self._dir_of.pop(wd, None)
        if directory is not None:
            self._wd_of.pop(directory, None)
            self._generations.pop(directory, None)

    def __del__(self) -> None:
        fd = getattr(self, "_fd", -1)
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)
