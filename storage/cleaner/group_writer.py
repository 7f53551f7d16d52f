"""The writer of one cleaned group (``compact``): the retained batches, appended to the
``.cleaned`` segment a chunk at a time in the order they come.

Where the process has a second core the appends run on a thread of the writer's own (one worker,
so its jobs run in the order given), and so do the deflates the walk hands over
(:meth:`GroupWriter.hand_over`: the kept batches of an inflated run compressed again,
``compressed.deflate``), so the walk's thread only reads and filters. On bench/compaction.py's
zstd input the recompression took about 0.05 s of the rewrite's 0.09, all on the walk's thread;
with lz4 over 1,000,000 keys (63% of the records kept, nearly every batch rebuilt) the walk's
thread spent 0.045 s a rewrite filtering, 0.03 deflating and 0.036 appending and indexing
(``cProfile``, three rewrites, stop 69).

A failed job (a full disk, a batch the codec refuses) is raised on the walk's thread at its
next call or at :meth:`GroupWriter.flush`; the jobs after it still run, on a ``.cleaned``
segment its caller then discards (leaving the ``with`` waits for every job first).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Final

from kafkatier.storage.cleaner.chunk import Deflated
from kafkatier.storage.cleaner.segment_store import CleanedSegment
from kafkatier.storage.errors import CorruptRecordError
from kafkatier.storage.log.batch_position import BatchInfo
from kafkatier.storage.record.records import read_batch

PENDING: Final = 16
"""Jobs the walk lets run ahead of it (their data held meanwhile)."""
BACKLOG = 2
"""Deflates the thread may have waiting before the walk deflates a run itself, so that neither
thread waits for the other."""


class GroupWriter:
    """Appends to ``cleaned``, a chunk of ``chunk_bytes`` at a time; ``threaded``: on a thread
    of its own (a context manager: leaving it waits for the thread's jobs and stops it)."""

    def __init__(self, cleaned: CleanedSegment, chunk_bytes: int, threaded: bool) -> None:
        self.cleaned = cleaned
        self.chunk_bytes = chunk_bytes
        self.data = bytearray()
        self.infos: list[BatchInfo] = []
        self.deflated_bytes = 0
        """Bytes of the batches deflated through :meth:`hand_over` (for the stats)."""
        self._pool = (
            ThreadPoolExecutor(1, thread_name_prefix="kafkatier-cleaner-writer")
            if threaded else None
        )  # fmt: skip
        self._jobs: deque[Future[None]] = deque()
        self._deflates: deque[Future[None]] = deque()

    def __enter__(self) -> GroupWriter:
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)

    def add(self, out: bytes | memoryview) -> None:
        """One batch (the Python path's)."""
        head = read_batch(out)
        if head is None:  # the filter only ever returns whole batches
            raise CorruptRecordError("cleaner produced a partial batch", offset=0)
        self.add_many(bytes(out), [BatchInfo(0, len(out), head.last_offset, head.max_timestamp)])

    def add_many(self, data: bytes, infos: list[BatchInfo]) -> None:
        """Whole batches at once (``chunk``), their positions relative to ``data``."""
        self._run(self._append, data, infos)

    def hand_over(self, deflating: Callable[[], Deflated]) -> bool:
        """``deflating``'s batches deflated and appended on the thread, in their place; False
        (nothing done) where there is no thread or :data:`BACKLOG` deflates wait there (the
        walk then deflates them itself)."""
        if self._pool is None:
            return False
        while self._deflates and self._deflates[0].done():
            self._deflates.popleft()
        if len(self._deflates) >= BACKLOG:
            return False
        future = self._run(self._append_deflated, deflating)
        assert future is not None  # there is a thread
        self._deflates.append(future)
        return True

    def flush(self) -> None:
        """Everything appended (waiting for the thread), a failure raised."""
        self._run(self._write)
        while self._jobs:
            self._jobs.popleft().result()

    def _run(self, job: Callable[..., None], *args: Any) -> Future[None] | None:
        """``job`` on the thread after the jobs before it (its future; a failure of one done
        before it raised here), or here where there is no thread (None)."""
        if self._pool is None:
            job(*args)
            return None
        future = self._pool.submit(job, *args)
        self._jobs.append(future)
        while self._jobs and (self._jobs[0].done() or len(self._jobs) > PENDING):
            self._jobs.popleft().result()
        return future

    def _append_deflated(self, deflating: Callable[[], Deflated]) -> None:
        data, infos = deflating()
        self.deflated_bytes += len(data)
        self._append(data, infos)

    def _append(self, data: bytes, infos: list[BatchInfo]) -> None:
        start = len(self.data)
        self.infos.extend(BatchInfo(start + i.position, i.size, i.last_offset, i.max_timestamp)
                          for i in infos)  # fmt: skip
        self.data += data
        if len(self.data) >= self.chunk_bytes:
            self._write()

    def _write(self) -> None:
        if self.infos:
            self.cleaned.append_batches(bytes(self.data), self.infos)
        self.data = bytearray()
        self.infos = []
