"""Where the cleaner reads segments from and writes cleaned segments to.

The cleaner (``compact.py``) sees a partition only through :class:`SegmentStore`: segment facts
(base offset, sizes, mtime), batches read in bounded chunks, aborted transactions, and a
two-step write of cleaned segments (build one, then swap it in for the old ones). Local
partition directories are :class:`LocalSegmentStore`; a tiered copy in S3 can implement the same
protocol later. The local swap is Kafka's crash-safe protocol (kafka-format.md §11.4):
``.cleaned`` files, renamed to ``.swap``, old segments renamed to ``.deleted``, ``.swap`` renamed to
the final names, directory fsynced; then, as Kafka's ``UnifiedLog.replaceSegments``, the producer
snapshots of old segments that got no cleaned successor are deleted. Opening the partition again
(``storage.log.loader.complete_interrupted_operations``) finishes or undoes an interrupted swap.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from kafkatier.storage import wire
from kafkatier.storage.fsutil import fsync_dir
from kafkatier.storage.index.txn_index import AbortedTxn
from kafkatier.storage.log.batch_position import BatchInfo
from kafkatier.storage.log.log import Log
from kafkatier.storage.log.segment import AnyBatch, LogSegment
from kafkatier.storage.record.records import chunked_batches

CRASH_ENV = "KAFKATIER_CLEANER_CRASH_AFTER"
"""Test hook: SIGKILL this process right after the n-th step (1-based) of writing/swapping."""


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """What grouping and the dirty-ratio arithmetic need to know about one segment."""

    base_offset: int
    size: int
    offset_index_bytes: int
    time_index_bytes: int
    last_modified_ms: int


class CleanedSegment(Protocol):
    """A segment being written by the cleaner, not yet part of the log."""

    base_offset: int

    def append_batches(self, data: bytes, infos: Sequence[BatchInfo]) -> None: ...

    def append_aborted_txn(self, txn: AbortedTxn) -> None: ...

    def discard(self) -> None:
        """Delete its files: a group whose cleaning failed (a full disk) leaves no space taken
        and the log as it was."""

    @property
    def size(self) -> int: ...


class SegmentStore(Protocol):
    """The cleaner's view of one partition's segments (module docstring)."""

    io_buffer_size: int
    """How many bytes one read asks for."""
    reads_ahead: bool
    """Whether the store reads ahead itself (``read_ahead`` then starts no thread of its own)."""

    def segment_infos(self) -> list[SegmentInfo]: ...

    def read_batches(self, base_offset: int, start_offset: int = -1) -> Iterator[AnyBatch]: ...

    def start_position(self, base_offset: int, start_offset: int) -> int: ...

    def read_chunk(self, base_offset: int, position: int, size: int) -> bytes: ...

    def location(self, base_offset: int) -> str: ...

    def read_next_offset(self, base_offset: int) -> int: ...

    def aborted_txns(self, start_offset: int, upper_bound: int) -> list[AbortedTxn]: ...

    def create_cleaned(self, base_offset: int) -> CleanedSegment: ...

    def replace_segments(
        self, new: CleanedSegment, old_bases: Sequence[int], last_modified_ms: int
    ) -> None: ...

    def finish(self) -> None: ...


class _CrashHook:
    """Counts protocol steps; kills the process at the step named by :data:`CRASH_ENV`."""

    def __init__(self) -> None:
        value = os.environ.get(CRASH_ENV)
        self.target = int(value) if value else 0
        self.steps = 0

    def step(self) -> None:
        self.steps += 1
        if self.steps == self.target:
            os.kill(os.getpid(), signal.SIGKILL)


class _LocalCleaned:
    """A ``<base>.*.cleaned`` segment in the partition directory."""

    def __init__(self, segment: LogSegment, hook: _CrashHook) -> None:
        self.segment = segment
        self.base_offset = segment.base_offset
        self._hook = hook

    @property
    def size(self) -> int:
        return self.segment.size

    def append_batches(self, data: bytes, infos: Sequence[BatchInfo]) -> None:
        self.segment.append(data, infos)
        self._hook.step()

    def append_aborted_txn(self, txn: AbortedTxn) -> None:
        self.segment.append_aborted_txn(txn)

    def discard(self) -> None:
        self.segment.delete()


class LocalSegmentStore:
    """A :class:`Log`'s segments on local disk; swaps update ``log.segments`` in place."""

    reads_ahead = False

    def __init__(self, log: Log, io_buffer_size: int = 256 << 10) -> None:
        self.log = log
        self.io_buffer_size = max(io_buffer_size, wire.BATCH_HEADER_SIZE)
        self.hook = _CrashHook()
        self._deleted: list[LogSegment] = []
        self._deleted_snapshots: list[Path] = []

    def _segment(self, base_offset: int) -> LogSegment:
        for segment in self.log.segments:
            if segment.base_offset == base_offset:
                return segment
        raise KeyError(f"no segment with base offset {base_offset} in {self.log.directory}")

    def segment_infos(self) -> list[SegmentInfo]:
        return [
            SegmentInfo(
                s.base_offset,
                s.size,
                s.offset_index.valid_bytes,
                s.time_index.valid_bytes,
                s.last_modified_ms,
            )
            for s in self.log.segments
        ]

    def read_batches(self, base_offset: int, start_offset: int = -1) -> Iterator[AnyBatch]:
        """Batches from the index position of ``start_offset``, read ``io_buffer_size`` bytes at
        a time (``records.chunked_batches``), so memory stays bounded whatever the segment size."""
        segment = self._segment(base_offset)
        return chunked_batches(segment.read_bytes, segment.size,
                               self.start_position(base_offset, start_offset),
                               self.io_buffer_size, str(segment.log_path))  # fmt: skip

    def start_position(self, base_offset: int, start_offset: int) -> int:
        """Where reading for ``start_offset`` begins (its offset-index position; -1: 0)."""
        segment = self._segment(base_offset)
        return segment.offset_index.lookup(start_offset)[1] if start_offset >= 0 else 0

    def read_chunk(self, base_offset: int, position: int, size: int) -> bytes:
        """Up to ``size`` bytes of the segment's log from ``position``, one read."""
        return self._segment(base_offset).read_bytes(position, size)

    def location(self, base_offset: int) -> str:
        """The segment's log file, as errors name it."""
        return str(self._segment(base_offset).log_path)

    def read_next_offset(self, base_offset: int) -> int:
        return self._segment(base_offset).read_next_offset()

    def aborted_txns(self, start_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Kafka's ``collectAbortedTransactions``: from the segment holding ``start_offset`` on,
        until a segment's search is complete."""
        found: list[AbortedTxn] = []
        for segment in self.log.segments_from(start_offset):
            txns, complete = segment.collect_aborted_txns(start_offset, upper_bound)
            found.extend(txns)
            if complete:
                break
        return found

    def create_cleaned(self, base_offset: int) -> _LocalCleaned:
        directory = self.log.directory
        for ext in (".log", ".index", ".timeindex", ".txnindex"):  # a stale earlier attempt
            (directory / wire.segment_file_name(base_offset, ext + ".cleaned")).unlink(
                missing_ok=True
            )
        segment = LogSegment(
            directory,
            base_offset,
            index_interval_bytes=self.log.config.index_interval_bytes,
            max_index_size=self.log.config.segment_index_bytes,
            suffix=".cleaned",
        )
        return _LocalCleaned(segment, self.hook)

    def replace_segments(
        self, new: CleanedSegment, old_bases: Sequence[int], last_modified_ms: int
    ) -> None:
        """§11.4 steps 1-4 for one group: finish the ``.cleaned`` files, then swap them in."""
        assert isinstance(new, _LocalCleaned)
        cleaned = new.segment
        try:
            cleaned.on_become_inactive()
            cleaned.flush()
            mtime = last_modified_ms / 1000
            os.utime(cleaned.log_path, (mtime, mtime))
        except BaseException:
            new.discard()  # not swapped in yet: the log is as it was
            raise
        self.hook.step()
        self._rename(cleaned, ".swap")
        old = [self._segment(base) for base in old_bases]
        for segment in old:
            segment.close_handlers()
            self._rename(segment, ".deleted")
            self._deleted.append(segment)
        self._rename(cleaned, "")
        fsync_dir(self.log.directory)
        self.hook.step()
        self._install(cleaned, old)
        for segment in old:  # UnifiedLog.replaceSegments: snapshots of the segments that went
            if segment.base_offset != cleaned.base_offset:
                snapshot = self.log.producer_state.delete_snapshot(segment.base_offset)
                if snapshot is not None:
                    self._deleted_snapshots.append(snapshot)

    def _rename(self, segment: LogSegment, suffix: str) -> None:
        """Kafka's ``changeFileSuffixes``, one file at a time (``.log`` last), each a step."""
        directory = segment.directory
        base = segment.base_offset
        for ext, index in (
            (".index", segment.offset_index),
            (".timeindex", segment.time_index),
            (".txnindex", segment.txn_index),
        ):
            index.rename_to(directory / wire.segment_file_name(base, ext + suffix))
            self.hook.step()
        target = directory / wire.segment_file_name(base, ".log" + suffix)
        os.replace(segment.log_path, target)
        segment.log_path = target
        segment.suffix = suffix
        self.hook.step()

    def _install(self, cleaned: LogSegment, old: list[LogSegment]) -> None:
        segments = self.log.segments
        first = segments.index(old[0])
        segments[first : first + len(old)] = [cleaned]

    def finish(self) -> None:
        """Remove the ``.deleted`` files (no background scheduler here, so at once rather than
        after ``file.delete.delay.ms``; a crash leaves them for the loader to remove)."""
        for segment in self._deleted:
            segment.delete()
        for snapshot in self._deleted_snapshots:
            snapshot.unlink(missing_ok=True)
        self._deleted.clear()
        self._deleted_snapshots.clear()
