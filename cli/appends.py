"""Appends in a thread of their own, so that a writer encodes its next rows while the last
ones are written: ``kafkatier produce`` spends longer in ``Log.append`` (mostly the ``pwritev``
into the segment, which releases the GIL: 20-45 ms for 16.5 MB, ad hoc) than in the encoder
(numba kernels that release it too: 8-16 ms), so on two cores the two overlap instead of
taking turns."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType
from typing import Final

from kafkatier.storage.log.append import LogAppendInfo
from kafkatier.storage.log.log import Log

AHEAD_BYTES: Final = 64 * 1024 * 1024
"""Encoded bytes queued before the newest job at most: beyond it the writer waits for the
oldest (the memory produce holds beside the chunks read ahead)."""


_Outcome = tuple[list[tuple[Log, LogAppendInfo]], BaseException | None]


class Appends:
    """``Log.append`` of encoded batches, one at a time and in the order given, in one thread;
    ``done(log, info)`` is called in the caller's thread for each, in that order, as the
    caller takes the results (at a :meth:`submit` that waits, and at the end).

    After an append fails, none given after it runs (a log holds the input's first records and
    none after a gap, as a producer's acknowledged sends); the failure is raised to the caller
    when it takes that append's result: at a :meth:`submit` after it or at the end of the
    ``with`` block, which returns only once the thread has let go of the logs. Only the thread
    may use the logs meanwhile."""

    def __init__(self, done: Callable[[Log, LogAppendInfo], None],
                 ahead_bytes: int = AHEAD_BYTES) -> None:  # fmt: skip
        self._done = done
        self._ahead = ahead_bytes
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="kafkatier-append")
        self._pending: deque[tuple[int, Future[_Outcome]]] = deque()
        self._pending_bytes = 0
        self._failed = threading.Event()

    def submit(self, appends: list[tuple[Log, bytearray]]) -> None:
        """Queue ``appends``: each log's encoded batches (from offset 0, owned by the log from
        now on), in this order, as one job of the thread (a chunk of the input for many
        partitions costs one hand-over, not one a partition); waits while more than
        ``ahead_bytes`` wait before them. Raises an earlier append's failure instead, once it
        is known."""
        if self._failed.is_set():
            while self._pending:
                self._settle_oldest()  # raises the failure, in its turn
        size = sum(len(encoded) for _, encoded in appends)
        future = self._pool.submit(self._append_all, appends)
        self._pending.append((size, future))
        self._pending_bytes += size
        while len(self._pending) > 1 and self._pending_bytes - size > self._ahead:
            self._settle_oldest()

    def _append_all(self, appends: list[tuple[Log, bytearray]]) -> _Outcome:
        """The job: what was appended, and the failure that stopped it, if any (nothing runs
        once an earlier job failed)."""
        done: list[tuple[Log, LogAppendInfo]] = []
        if self._failed.is_set():
            return done, None
        for log, encoded in appends:
            try:
                done.append((log, log.append(encoded, owned=True)))
            except BaseException as exc:
                self._failed.set()
                return done, exc
        return done, None

    def _settle_oldest(self) -> None:
        size, future = self._pending.popleft()
        self._pending_bytes -= size
        done, failure = future.result()
        for log, info in done:
            self._done(log, info)
        if failure is not None:
            raise failure

    def __enter__(self) -> Appends:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if exc_type is not None:
                self._failed.set()  # what waits is not appended
            else:
                while self._pending:
                    self._settle_oldest()  # the first failure, if any, is raised here
        finally:
            self._pool.shutdown(wait=True)
