"""When the sink makes its decided batches durable in the partitions: once every few batches,
not after each one.

A decided batch is durable in its staging files, which are its write-ahead log (fsynced before
the commit decision, :mod:`kafkatier.sink.wal`); its copy in the partitions needs a flush only
before those files may go. So the bookkeeping file keeps the write-ahead record of every decided
batch whose partitions may not be durable yet (the newest as ``wal``, the older ones as
``deferred``), the staging files stay until a flush covers them, and recovery completes every
such batch, oldest first (:func:`kafkatier.sink.append.replay_all`). Nothing a consumer sees
changes: the appends reach the page cache, and every reader, this process's or another's,
reads them there at once, as from a Kafka broker, which leaves its flushes to the operating
system by default (``flush.ms`` and ``flush.messages`` unset).

Why: one flush (a syncfs, ``LogDirectory.flush_data_later``) costs the kernel the writeback of
every partition file written since the last one, whatever each file got. After every
micro-batch of 200,000 rows into 1,024 partitions that was the largest cost the partitions added
to a batch: a warm batch took 199 ms with it and 161 ms with no flush at all, against 128-130 ms
at 8 partitions either way (ad hoc, 2026-12-01, docs/performance.md, stop 65). A flush after
several batches writes each file back once for all of them (``bench/sink_flush.py`` compares
the two ways side by side).

A flush begins after a batch (in a thread, finished before the next decision, as the one after
every batch did) when any of these holds: :data:`MOST_BATCHES` decided batches wait for it; their
staging files hold :data:`MOST_BYTES`; the oldest of them was decided :data:`MOST_SECONDS` ago; a
segment rolled (the tiering sidecar uploads a rolled segment once the recovery point passes it);
or a topic of the batch sets ``flush.ms`` or ``flush.messages`` (a user who asks Kafka for
flushes gets one after every batch). Closing the sink, or reopening its logs, flushes at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final

from kafkatier.sink.stage import StagingPlace
from kafkatier.sink.wal import SPAN_FIELDS, Wal
from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.config.spec import LONG_MAX
from kafkatier.storage.log.directory import FlushUnderWay, LogDirectory

MOST_BATCHES: Final = 8
"""Decided batches whose partitions may wait for one flush (each adds its write-ahead record,
about 60 KB at 1,024 partitions, to every save of the bookkeeping file until the flush)."""
MOST_BYTES: Final = 256 * 1024 * 1024
"""Staging bytes those batches may hold on disk while they wait."""
MOST_SECONDS: Final = 5.0
"""How long the oldest of them may wait (what a power cut may leave for recovery to complete)."""


@dataclass(frozen=True)
class _Waiting:
    """A decided batch whose partitions wait for a flush: its record, its staging files' place
    and bytes, and when it was decided (the clock's seconds)."""

    wal: Wal
    place: StagingPlace
    size: int
    decided: float


class Flushes:
    """The sink's decided batches not yet known durable in the partitions (oldest first), and
    the flush, if one is under way, that will make the first of them so."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._waiting: list[_Waiting] = []
        self._under_way: FlushUnderWay | None = None
        self._covered = 0  # how many of _waiting the flush under way covers

    @property
    def deferred(self) -> list[Wal]:
        """The records the next decision keeps beside its own (``SinkState.deferred``): every
        batch waiting, once any flush under way is finished (:meth:`finish`)."""
        return [waiting.wal for waiting in self._waiting]

    def add(self, wal: Wal, place: StagingPlace) -> None:
        """A batch just appended, waiting for a flush."""
        size = sum(wal.spans[SPAN_FIELDS - 1 :: SPAN_FIELDS])
        self._waiting.append(_Waiting(wal, place, size, self._clock()))

    def due(self, configs: Iterable[LogConfig]) -> bool:
        """Whether a flush should begin now (module docstring), for a batch written to topics
        with ``configs``."""
        if not self._waiting:
            return False
        if any(c.flush_ms < LONG_MAX or c.flush_messages < LONG_MAX for c in configs):
            return True
        return (
            len(self._waiting) >= MOST_BATCHES
            or sum(waiting.size for waiting in self._waiting) >= MOST_BYTES
            or self._clock() - self._waiting[0].decided >= MOST_SECONDS
        )

    def begin(self, logs: LogDirectory) -> None:
        """A flush of every batch waiting begun in a thread (``flush_data_later``); their
        staging files are removed once it is done. One flush at a time: one under way is
        finished first."""
        self.finish()
        places = [waiting.place for waiting in self._waiting]

        def remove() -> None:
            for place in places:
                place.remove()

        self._under_way = logs.flush_data_later(then=remove)
        self._covered = len(places)

    def finish(self) -> None:
        """Wait for the flush under way, if any; the batches it covered no longer wait. A
        failed flush raises, and they still wait."""
        under_way, self._under_way = self._under_way, None
        if under_way is not None:
            under_way.finish()
            del self._waiting[: self._covered]
        self._covered = 0

    def flush_all(self, logs: LogDirectory) -> None:
        """Every batch waiting made durable now (a close, a reopen of the logs)."""
        if self._waiting:
            self.begin(logs)
        self.finish()

    def abandon(self) -> None:
        """Forget what waits, and any flush under way once its thread is done, without touching
        the logs (their view is stale: ``LogDirectory.abandon``); recovery completes every batch
        whose staging files are left, from the bookkeeping file."""
        under_way, self._under_way = self._under_way, None
        self._waiting.clear()
        self._covered = 0
        if under_way is not None:
            under_way.abandon()

    def forget(self) -> None:
        """Drop what waits without a flush: recovery completes it from the bookkeeping file (a
        flush under way is finished first: its thread uses the log dir)."""
        try:
            self.finish()
        finally:
            self._waiting.clear()
