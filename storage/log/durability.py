"""What of a partition log is durable, and making the rest so: Kafka's two levels of flush.

* ``flush`` is Kafka's ``LocalLog.flush``: every segment above the recovery point with its
  indexes, the producer snapshots written at roll, the directory when it holds new names; then
  the recovery point moves to the log end.
* ``flush_data`` is what a writer needs before it acknowledges (the sink before its commit
  decision): the ``.log`` bytes appended since their last fsync, the small files written
  without fsync since (the producer snapshots of rolls, the leader-epoch checkpoint of an epoch
  change: Kafka 3.7 defers their fsyncs too, KAFKA-15046) and the names of new files. The
  indexes are not msynced and the recovery point stays, except that a roll since the last flush
  gets Kafka's flush at roll (the rolled segments in full, then the recovery point moves to the
  newest roll's base; Kafka schedules that flush when it rolls). ``flush.messages`` and
  ``flush.ms`` turn it into a full ``flush``.

Why the ``.log`` bytes are enough: below the recovery point everything is durable; above it the
loader, after an unclean shutdown, re-validates every batch, cuts the file at the first torn one,
and rebuilds the indexes, the producer state (from the newest intact snapshot at or below the
point) and the leader epochs. A roll snapshot lost before its fsync is therefore harmless too,
and so is a leader-epoch checkpoint (the loader rebuilds one that does not parse).

A flag is cleared before its fsync and set again if the fsync fails, so a write racing a flush
in another thread is never marked durable by it. ``covered=True`` tells both flushes that the
caller has just synced the whole filesystem (``syncfs``, begun after every write of this log:
``LogDirectory``): they move the same marks and recovery point, and call nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.config.spec import LONG_MAX
from kafkatier.storage.fsutil import fsync_dir, fsync_file
from kafkatier.storage.log.segment import LogSegment


class FlushedLog(Protocol):
    """What :class:`Durability` reads of the log it flushes (``Log``)."""

    directory: Path
    config: LogConfig
    clock: Callable[[], int]
    recovery_point: int

    @property
    def log_end_offset(self) -> int: ...

    def segments_from(self, offset: int) -> list[LogSegment]: ...


class Durability:
    """One partition log's writes not yet fsynced, beside its segments' own flags."""

    def __init__(self) -> None:
        self.dir_unsynced = True  # a file created since the directory's last fsync
        self.rolled_to: int | None = None  # the newest roll's base, if not flushed yet
        self.unsynced_files: list[Path] = []  # written without fsync, fsynced by the next flush
        self.last_flush_ms: int | None = None  # the last full flush (or first look), flush.ms

    def segment_created(self) -> None:
        self.dir_unsynced = True

    def rolled(self, base: int, snapshot: Path | None) -> None:
        """A roll to ``base``, with the producer snapshot it wrote without fsync (if any)."""
        if snapshot is not None:
            self.file_written(snapshot)
        self.rolled_to = base

    def file_written(self, path: Path) -> None:
        """``path`` replaced (``fsutil.atomic_write``) without fsync: the next flush syncs it
        and its directory."""
        self.unsynced_files.append(path)
        self.dir_unsynced = True

    def has_unflushed_data(self, log: FlushedLog) -> bool:
        """Whether :meth:`flush_data` has anything to fsync."""
        return (
            self.dir_unsynced
            or self.rolled_to is not None
            or bool(self.unsynced_files)
            or any(s.unsynced for s in log.segments_from(log.recovery_point))
        )

    def needs_flush(self, log: FlushedLog) -> bool:
        """Whether :meth:`flush` has anything to do."""
        return log.recovery_point < log.log_end_offset or self.has_unflushed_data(log)

    def flush_data(self, log: FlushedLog, *, covered: bool = False) -> None:
        """The appends durable (module docstring)."""
        if self._full_flush_due(log):
            self.flush(log, covered=covered)
            return
        if self.rolled_to is not None:
            self._flush_rolled(log, self.rolled_to, covered)
        for segment in log.segments_from(log.recovery_point):
            segment.flush_data(covered=covered)
        self._sync_files(covered)
        if self.dir_unsynced:
            self._sync_dir(log, covered)

    def covered(self, log: FlushedLog) -> None:
        """``flush_data(covered=True)`` where :meth:`has_unflushed_data`, for a log a syncfs
        has just covered: in the common case (only appends since the last flush) the segments'
        marks cleared in one pass, without the general path's checks (a writer's flush of a
        thousand partitions after each batch took about 6 us a partition)."""
        if self.dir_unsynced or self.rolled_to is not None or self.unsynced_files:
            self.flush_data(log, covered=True)
            return
        segments = [s for s in log.segments_from(log.recovery_point) if s.unsynced]
        if segments and self._full_flush_due(log):
            self.flush(log, covered=True)
            return
        for segment in segments:
            segment.flush_data(covered=True)

    def flush(self, log: FlushedLog, *, covered: bool = False) -> None:
        """Everything durable; the recovery point becomes the log end (module docstring)."""
        end = log.log_end_offset
        segments = log.segments_from(log.recovery_point)
        for segment in segments:
            segment.flush(covered=covered)
        self._sync_files(covered)
        if self.dir_unsynced or any(s.base_offset >= log.recovery_point for s in segments):
            self._sync_dir(log, covered)
        log.recovery_point = end
        self.rolled_to = None
        if log.config.flush_ms < LONG_MAX:
            self.last_flush_ms = log.clock()

    def _flush_rolled(self, log: FlushedLog, upto: int, covered: bool) -> None:
        """Kafka's flush at roll: every segment below ``upto`` with its indexes, the roll
        snapshots, the directory; then the recovery point moves to ``upto``."""
        for segment in log.segments_from(log.recovery_point):
            if segment.base_offset >= upto:
                break
            segment.flush(covered=covered)
        self._sync_files(covered)
        self._sync_dir(log, covered)
        log.recovery_point = max(log.recovery_point, upto)
        self.rolled_to = None

    def _full_flush_due(self, log: FlushedLog) -> bool:
        """Kafka's ``flush.messages`` (offsets since the recovery point) and ``flush.ms``."""
        cfg = log.config
        if log.log_end_offset - log.recovery_point >= cfg.flush_messages:
            return True
        if cfg.flush_ms >= LONG_MAX:
            return False
        now = log.clock()
        if self.last_flush_ms is None:
            self.last_flush_ms = now
        return now - self.last_flush_ms >= cfg.flush_ms

    def _sync_files(self, covered: bool) -> None:
        """fsync the files written without it (a later roll or retention may have removed a
        snapshot: it needs nothing; a file written twice is synced once)."""
        synced: set[Path] = set()
        while self.unsynced_files:
            path = self.unsynced_files[0]
            if not covered and path not in synced:
                with contextlib.suppress(FileNotFoundError):
                    fsync_file(path)
                synced.add(path)
            self.unsynced_files.pop(0)

    def _sync_dir(self, log: FlushedLog, covered: bool) -> None:
        self.dir_unsynced = False
        if covered:
            return
        try:
            fsync_dir(log.directory)
        except BaseException:
            self.dir_unsynced = True
            raise
