"""What wakes a long-polling fetch: the kernel's report that a partition folder changed.

A fetch at the end of the topic waits up to its ``max.wait.ms`` for records. Looking for them
every 50 ms cost an idle consumer of a 1,024-partition topic a tenth of a core (each look
checked every partition); with the sources' :class:`DirectoryWatch` (inotify) the waits sleep
until some watched folder changes, and a fetch looks at its own partitions only then. The
watch's descriptor is read by the event loop as events come; a change found by a reader thread
first (each read of a watched partition drains the events) is passed on through
``DirectoryWatch.on_change``.
"""

from __future__ import annotations

import asyncio
import contextlib

from kafkatier.storage.log.dir_watch import DirectoryWatch


class FolderChanges:
    """A counter of the changes the watch saw, and a way to wait for the next one. Made and
    used in the event loop's thread (the watch tells it from any thread)."""

    def __init__(self, watch: DirectoryWatch, loop: asyncio.AbstractEventLoop) -> None:
        self.version = 0
        self._watch = watch
        self._loop = loop
        self._next = asyncio.Event()
        watch.on_change = self._told
        loop.add_reader(watch.fileno(), watch.drain)

    async def wait(self, since: int, timeout: float) -> bool:
        """True once :attr:`version` is past ``since`` (at once if it already is), False when
        ``timeout`` seconds pass first."""
        if self.version != since:
            return True
        try:
            await asyncio.wait_for(self._next.wait(), max(timeout, 0))
        except TimeoutError:
            return self.version != since
        return True

    def close(self) -> None:
        self._watch.on_change = None
        with contextlib.suppress(ValueError, RuntimeError):  # the descriptor or loop closed
            self._loop.remove_reader(self._watch.fileno())

    def _told(self) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed: no fetch waits any more
            self._loop.call_soon_threadsafe(self._changed)

    def _changed(self) -> None:
        self.version += 1
        self._next.set()
        self._next = asyncio.Event()
