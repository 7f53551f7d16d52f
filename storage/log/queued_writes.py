"""Appends whose bytes a thread of the C library writes while the caller places the next ones
(``storage/native/writes.c``): the sink's committed appends of a micro-batch, one for each of up
to thousands of partitions.

Why: each small append's ``pwritev`` costs the kernel 11-17 us more than its bytes do (the page
cache, ext4's block reservation, the inode's times: 1,024 appends of 25 KB took 17 ms where 8 of
3.2 MB took 6, ad hoc; about 30 us while the filesystem writes back), about half of what the
driver's Python spends placing the append. Written on the other core, that time overlaps the next
partitions' placing instead of adding to it; what is left when the caller has placed them all,
the caller writes beside the thread (``writes.c``).

The contract: a queued append changes its segment (size, indexes) and its log (producer state,
end offset) at once, as a written one does; its bytes reach the file before :meth:`finish`
returns. A queue holds at most one unwritten append a file (a second one raises ValueError):
the appends left when :meth:`finish` is called are written by the thread and the caller side by
side, in no order between them. :meth:`finish` raises :class:`LogWriteError` for the first
append that failed, after cutting every failed file back to where its append began, and the
caller must then take the logs' in-memory state as lost: the sink reopens its logs from disk
after any failed batch, as after a crash, and completes the decided batch from its write-ahead
log. The segments must stay open until then: the files of appends not yet handed back are
pinned (no descriptor budget closes them; :class:`QueuedWrites` bounds how many), but a
segment's ``close`` would still close its file under the thread; the sink's batch, holding its
turn on the log dir and its own lock, closes none meanwhile. Where the C library is not built,
:meth:`QueuedWrites.open` gives None and callers write as they go.
"""

from __future__ import annotations

import contextlib
import errno
import os
from typing import Any, Protocol

from kafkatier.storage import native
from kafkatier.storage.errors import LogWriteError
from kafkatier.storage.file_budget import FileBudget

SHARED_FINISH = True
"""Whether :meth:`QueuedWrites.finish` writes beside the thread what it has not taken (False: it
waits for the thread alone; ``bench/sink_writes.py`` compares the two)."""


class QueuedSegment(Protocol):
    """What a queue hands a written (or failed) append back to: ``LogSegment``."""

    @property
    def budget(self) -> FileBudget | None: ...

    def finish_queued_write(
        self, fd: int, start: int, size: int, error: OSError | None
    ) -> LogWriteError | None: ...


class QueuedWrites:
    """Up to ``capacity`` appends' writes, queued by :meth:`add` and awaited by :meth:`finish`
    (or the ``with`` block's end, which raises nothing of its own over another error).

    A queued append pins its ``.log`` until its write is done and handed back. A micro-batch
    into thousands of partitions would then hold a descriptor each at once, past what the
    process may open (``ulimit -n``: a sink writing 2,048 partitions under the common 1,024
    failed with EMFILE), so no more appends stay pinned than half the descriptor budget their
    segments are counted in (``log.max.open.files``, by default half of ``ulimit -n``): at
    that many, :meth:`relieve` waits for the thread to write what it was given and hands those
    appends back, unpinned, before more are queued."""

    def __init__(self, writes: Any) -> None:
        self._writes = writes
        self._queued: list[tuple[QueuedSegment, int, int, int]] = []  # segment, fd, start, size
        self._fds: set[int] = set()  # the pinned appends' files: one append a file at a time
        self._most_pinned: int | None = None  # half the pinned segments' budget (None: none yet)
        self._released = 0  # the appends handed back (their results taken) so far
        self._first: LogWriteError | None = None  # the first of those that failed

    @classmethod
    def open(cls, capacity: int) -> QueuedWrites | None:
        """A queue for ``capacity`` appends, or None where the C library is not built (or no
        thread can be started): the appends are then written as they are placed."""
        kernels = native.native()
        if kernels is None or capacity <= 0:
            return None
        try:
            return cls(kernels.Writes(capacity))
        except OSError:
            return None

    @property
    def full(self) -> bool:
        """Whether no more appends can be queued (the next one is written at once)."""
        full: bool = self._writes.full
        return full

    def add(self, segment: QueuedSegment, fd: int, views: list[memoryview], start: int,
            size: int) -> None:  # fmt: skip
        """Queue ``segment``'s append of ``views`` at ``start``; ``fd`` (its ``.log``, pinned
        open by the segment) is handed back to it once written (``finish_queued_write``)."""
        self._one_of(segment, fd)
        self._writes.add(fd, views, start, size)
        self._queued.append((segment, fd, start, size))
        self.relieve()

    @property
    def writes(self) -> Any:
        """The C library's queue (``kernels.Writes``), for a kernel that fills its entries
        itself (``log/committed_all.py``): each entry it hands over is then :meth:`track`-ed,
        and once they are all handed over, :meth:`relieve` called."""
        return self._writes

    def track(self, segment: QueuedSegment, fd: int, start: int, size: int) -> None:
        """The next entry handed over without :meth:`add` is ``segment``'s write of ``size``
        bytes at ``start`` on ``fd`` (in the order of the entries)."""
        self._one_of(segment, fd)
        self._queued.append((segment, fd, start, size))

    def _one_of(self, segment: QueuedSegment, fd: int) -> None:
        """``fd``'s append, the only one pinned on that file (its descriptor stays pinned, so
        no other file takes the number meanwhile; a second append to a file whose first was
        handed back is written after it); ``segment``'s budget bounds the pinned ones."""
        if fd in self._fds:
            raise ValueError(f"a second append to descriptor {fd} in one queue of writes")
        self._fds.add(fd)
        budget = segment.budget
        if budget is not None:
            most = max(1, budget.limit // 2)
            self._most_pinned = most if self._most_pinned is None else min(most, self._most_pinned)

    def relieve(self) -> None:
        """Where half the pinned segments' budget of appends or more hold their files, wait
        until the thread has written every entry handed over, and hand those appends back
        (their files unpinned, a failed one cut back; the first failure is :meth:`finish`'s to
        raise)."""
        pinned = len(self._queued) - self._released
        if self._most_pinned is None or pinned < self._most_pinned:
            return
        self._writes.wait()
        self._hand_back(self._writes.results(self._released, len(self._queued)))

    def _hand_back(self, results: list[int]) -> None:
        """The appends from the first not handed back on, whose writes gave ``results``."""
        done = self._queued[self._released : self._released + len(results)]
        for (segment, fd, start, size), result in zip(done, results, strict=True):
            failed = segment.finish_queued_write(fd, start, size, _error(result, size))
            self._first = self._first or failed
            self._fds.discard(fd)
        self._released += len(results)

    def wait(self) -> None:
        """Until every write queued so far reached its file (failures are :meth:`finish`'s to
        report): for a step that needs the bytes there, as the crash tests' hooks do."""
        self._writes.wait()

    def finish(self) -> None:
        """Wait for every queued write; the first failure raised (see the module docstring)."""
        results = self._writes.finish(SHARED_FINISH)
        self._hand_back(results[self._released :])
        self._queued.clear()
        self._fds.clear()
        self._released = 0
        first, self._first = self._first, None
        if first is not None:
            raise first

    def __enter__(self) -> QueuedWrites:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if kind is None:
            self.finish()
            return
        with contextlib.suppress(LogWriteError):  # wait for the thread; the first error stays
            self.finish()


def _error(result: int, size: int) -> OSError | None:
    """The thread's result of a write of ``size`` bytes (bytes written, or -errno) as an error."""
    if result == size:
        return None
    code = -result if result < 0 else errno.EIO
    return OSError(code, os.strerror(code))
