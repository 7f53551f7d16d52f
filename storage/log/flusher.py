"""The flush threads of a log dir: fsyncs of many partitions at once (opening and closing
them too: both fsync a few files per partition).

fsync releases the GIL, and the filesystem commits concurrent fsyncs together (one journal
commit for many files on ext4), so flushing a thousand partitions from a few threads takes a
fraction of the time one thread would. The threads are started at first need and reused until
:meth:`Flusher.stop` (a thread pool per flush cost more than the fsyncs of a small batch).
Flushing in the background while the writer appends was measured slower: the threads' Python
between fsyncs fights the appends for the GIL.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Final, TypeVar

THREADS: Final = 8
T = TypeVar("T")


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
        futures = [self._submit(action, items[i::shares]) for i in range(shares)]
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
