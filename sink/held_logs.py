"""A sink's open view of its log dir, and the work on it that waits for a later moment.

Between micro-batches a sink keeps its partitions open (their offsets, producer state and the
state its last appends left, ``commit_fields.Carried``), and two things of the last batch wait:
its index and producer entries (``committed_all.Later``, set beside the next batch's encode
job) and its partitions' flush (:mod:`kafkatier.sink.flushes`). This class holds the view and
those two, and ends them in one of three ways: settled and closed cleanly (the clean-shutdown
marker), dropped (closed without the marker: the next use recovers), or abandoned after another
writer changed the log dir (nothing written from the stale view).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kafkatier.sink.flushes import Flushes
from kafkatier.storage.log.commit_fields import Carried
from kafkatier.storage.log.directory import LogDirectory


class HeldLogs:
    """The log dir as the sink holds it open (``logs``, opened at first use) and what waits."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self._logs: LogDirectory | None = None
        self.generation: str | None = None  # the token of the sink's last turn on the log dir
        self.books: Callable[[], None] | None = None
        """What sets the last batch's index and producer entries (``committed_all.Later``)."""
        self.flushes = Flushes()  # decided batches whose partitions wait for a flush
        self.carried = Carried()
        """Each partition's state as the last batch's appends left it (``commit_fields``):
        forgotten whenever the logs are dropped or closed (recovery runs only on logs opened
        after that)."""

    @property
    def logs(self) -> LogDirectory:
        if self._logs is None:
            self._logs = LogDirectory(self.log_dir)
        return self._logs

    @property
    def is_open(self) -> bool:
        return self._logs is not None

    def catch_up(self) -> None:
        """Set the last batch's index and producer entries, then finish the flush under way,
        if any (its batches' staging files are removed then)."""
        books, self.books = self.books, None
        if books is not None:
            books()
        self.flushes.finish()

    def settle(self) -> None:
        """:meth:`catch_up`, then every decided batch made durable in the partitions and its
        staging files removed."""
        self.catch_up()
        if self._logs is not None:
            self.flushes.flush_all(self._logs)

    def close(self) -> None:
        """Settle, then close the logs cleanly (checkpoints, clean-shutdown marker)."""
        self.carried.forget()
        self.settle()
        self.forget()

    def forget(self) -> None:
        """Close the logs as they are (after :meth:`abandon`, nothing is open)."""
        if self._logs is not None:
            self._logs.close()
            self._logs = None

    def drop(self) -> None:
        """Close the logs without the clean-shutdown marker: the next use reopens (recovers)."""
        self.carried.forget()
        if self._logs is not None:
            try:
                self.settle()  # a reopened log would not know its appends are not durable
            finally:
                self._logs.__exit__(RuntimeError, None, None)
                self._logs = None

    def abandon(self) -> None:
        """Drop the logs after another writer's turn changed the log dir, writing nothing from
        their stale view (``LogDirectory.abandon``): the last batch's index entries would go
        into files the other writer changed, closing would trim its indexes to this view's
        entries, a flush's checkpoints would drop its topics and lower its recovery points.
        The batches that waited for a flush are left to recovery: the bookkeeping file keeps
        their write-ahead records, and their staging files stay until a flush in the logs as
        they are now covers them."""
        self.books = None
        self.carried.forget()
        try:
            self.flushes.abandon()
        finally:
            if self._logs is not None:
                self._logs.abandon()
                self._logs = None

    def lost(self) -> None:
        """Forget the logs without closing them (a recovery that failed: the next batch or
        restart recovers from disk)."""
        self._logs = None
