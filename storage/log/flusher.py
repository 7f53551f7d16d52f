"""Making many partitions durable at once: the flush threads of a log dir, and one syncfs(2)
of its filesystem in place of an fsync per file.

fsync releases the GIL, and the filesystem commits concurrent fsyncs together (one journal
commit for many files on ext4), so flushing a thousand partitions from a few threads takes a
fraction of the time one thread would. The threads are started at first need and reused until
:meth:`Flusher.stop` (a thread pool per flush cost more than the fsyncs of a small batch); they
also close a few partitions (each fsyncs its files) and stage a new topic's (a file's creation is
the kernel's work, outside the GIL). Flushing in the background while the writer appends was
measured slower: the threads' Python between fsyncs fights the appends for the GIL; and opening
partitions, which syncs nothing, runs in the caller's thread (``LogDirectory._open_all``).

Where :data:`SYNCFS_MIN_LOGS` or more partitions need a flush, :class:`FileSystemSync` makes them
durable with one ``syncfs`` instead (``fsutil.syncfs_trusted`` says where that is as strong as
the fsyncs; measured on ext4 with 1,024 files of one append each: 15-55 ms, against 150-240 ms for
their fsyncs from eight threads). The price: it writes back every dirty page of the filesystem,
other programs' too, which is why a few partitions keep their own fsyncs (a log dir on a
filesystem of its own, as Kafka advises for ``log.dirs``, pays nothing for it). PostgreSQL's
``recovery_init_sync_method=syncfs`` makes the same trade.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Final, TypeVar

from kafkatier.storage import fsutil

THREADS: Final = 8
SYNCFS_MIN_LOGS: Final = 16
"""Partitions to flush from which one syncfs replaces their fsyncs (module docstring)."""
T = TypeVar("T")
log = logging.getLogger(__name__)


class Flusher:
    """A reusable pool of :data:`THREADS` threads applying one action to many items."""

    def __init__(self, threads: int = THREADS) -> None:
        self.threads = threads
        self._pool: ThreadPoolExecutor | None = None

    def run(self, action: Callable[[T], None], items: Sequence[T]) -> None:
        """``action`` on every item, the items shared out over the threads; returns once all
        are done, re-raising the first failure."""
        if len(items) <= 1:
            for item in items:
                action(item)
            return
        shares = min(self.threads, len(items))
        futures, here = [], []
        for i in range(shares):
            try:
                futures.append(self._submit(action, items[i::shares]))
            except RuntimeError:  # the interpreter is exiting: no thread takes work any more
                here.append(items[i::shares])  # (a sink closing its logs at the driver's exit)
        try:
            for share in here:
                _each(action, share)
        finally:
            _finish(futures)

    def stop(self) -> None:
        """End the threads (a later :meth:`run` starts new ones)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def _submit(self, action: Callable[[T], None], items: Sequence[T]) -> Future[None]:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="log-flush")
        return self._pool.submit(_each, action, items)


def _each(action: Callable[[T], None], items: Sequence[T]) -> None:
    for item in items:
        action(item)


def _finish(futures: Sequence[Future[None]]) -> None:
    wait(futures)
    for future in futures:
        future.result()


class FileSystemSync:
    """syncfs(2) of the filesystem holding a log dir, where it is trusted.

    The directory stays open from the log dir's opening on, and every syncfs goes through that
    descriptor: Linux reports a writeback error to a descriptor once, when it has not seen it
    yet (errseq), so an error in any file written since the log dir was opened reaches the
    writer, as its fsync of that file would. After a failure the log dir fsyncs each file again
    (the fsync of the file at fault reports its error; one of another program's files does not
    concern it).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        if fsutil.syncfs_trusted(path):
            self._fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)

    @property
    def available(self) -> bool:
        """Whether :meth:`sync` would run a syncfs (it is trusted here and has not failed)."""
        return self._fd is not None

    def sync(self) -> bool:
        """Write back and make durable everything written to the filesystem before the call;
        False (nothing done) where syncfs is not trusted or has failed."""
        if self._fd is None:
            return False
        try:
            fsutil.syncfs(self._fd)
        except OSError as exc:
            log.warning("syncfs of %s failed (%s): fsyncing each file from now on", self.path, exc)
            self.close()
            return False
        return True

    def begin(self, then: Callable[[], None] | None = None) -> Callable[[], bool]:
        """:meth:`sync` in a thread, begun now, and ``then`` after it in the thread if it
        succeeded; returns the function that waits for both and says whether the sync succeeded
        (a failure closes this, as :meth:`sync`'s does). The thread touches no object of the
        caller's but what ``then`` does."""
        fd = self._fd
        failed: list[OSError] = []

        def run() -> None:
            try:
                if fd is None:
                    raise OSError(errno.EBADF, "syncfs is not available")
                fsutil.syncfs(fd)
            except OSError as exc:
                failed.append(exc)
                return
            if then is not None:
                with contextlib.suppress(OSError):  # what it leaves, a later start removes
                    then()

        thread = threading.Thread(target=run, name="log-dir-syncfs", daemon=True)
        thread.start()

        def wait() -> bool:
            thread.join()
            if failed and self._fd is not None:
                log.warning("syncfs of %s failed (%s): fsyncing each file from now on",
                            self.path, failed[0])  # fmt: skip
                self.close()
            return not failed

        return wait

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
