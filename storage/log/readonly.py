"""Read-only access to partition logs for the ``kafkatier`` data source: no recovery, no writes,
no locks, so a reader may run beside the single writer (the sink) appending to the same log.

A partition directory is opened as its ``<base>.log`` segments (files with a cleaner or
retention suffix are ignored) through ``LogSegment(writable=False)``; missing indexes read as
empty. The log start offset is the first segment's base, raised by the log dir's
``log-start-offset-checkpoint`` when that says more.

The last stable offset (LSO) lives in a writer's memory only, so :func:`scan_bounds` rebuilds it
from the files: it takes the open transactions recorded in the newest producer snapshot
(``<offset>.snapshot``, written at every roll, so usually at the active segment's base) and scans
the batch headers from that offset to the end of the log (61 bytes each; only transaction markers
are read whole), opening a transaction at a producer's first transactional data batch and closing
it at its COMMIT/ABORT marker. LSO = the first offset of the
earliest transaction still open, else the log end. Without a usable snapshot the scan starts at
the log start. The ABORT markers seen in the scan are returned too: a writer appends the marker
to the ``.log`` before it indexes the aborted transaction in ``.txnindex``, so a reader that
trusted only the ``.txnindex`` could, for a moment, see the marker (and the LSO past it) but not
the entry, and show aborted data as committed. Readers use both sources.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

from kafkatier.storage.checkpoint.checkpoint_file import (
    LOG_START_OFFSET_CHECKPOINT,
    OffsetCheckpointFile,
)
from kafkatier.storage.checkpoint.metadata import parse_partition_dir_name
from kafkatier.storage.errors import CorruptSnapshotError, KafkaTierError, StorageError
from kafkatier.storage.index.txn_index import AbortedTxn
from kafkatier.storage.log.batch_position import BatchPosition
from kafkatier.storage.log.creation import topics_being_created
from kafkatier.storage.log.reader import offset_for_timestamp
from kafkatier.storage.log.segment import AnyBatch, LogSegment
from kafkatier.storage.producer.snapshot import list_snapshot_files, read_snapshot
from kafkatier.storage.record.batch import RecordBatch
from kafkatier.storage.record.records import iter_batches
from kafkatier.storage.wire import (
    ATTR_CONTROL,
    ATTR_TRANSACTIONAL,
    BATCH_HEADER,
    BATCH_HEADER_SIZE,
    ControlType,
    offset_from_file_name,
    segment_file_name,
)

if TYPE_CHECKING:
    from kafkatier.storage.log.log import Log

TopicPartition = tuple[str, int]
_SEGMENT_NAME = re.compile(r"\d{20}\.log")


def discover(
    log_dir: Path, topics: Iterable[str] | None, pattern: str | None
) -> list[TopicPartition]:
    """Live partition directories of the named topics (or of topics matching ``pattern``);
    none of a topic whose creation is under way or was interrupted (``creation.py``)."""
    wanted = None if topics is None else set(topics)
    regex = None if pattern is None else re.compile(pattern)
    found: list[TopicPartition] = []
    children = list(Path(log_dir).iterdir()) if Path(log_dir).is_dir() else []
    creating = topics_being_created(child.name for child in children)
    for child in children:
        parsed = parse_partition_dir_name(child.name) if child.is_dir() else None
        if parsed is None or parsed[0] in creating:
            continue
        if (wanted is not None and parsed[0] in wanted) or (
            regex is not None and regex.fullmatch(parsed[0])
        ):
            found.append(parsed)
    return sorted(found)


def checkpointed_log_starts(log_dir: Path) -> dict[TopicPartition, int]:
    """The writer's last ``log-start-offset-checkpoint`` (empty when there is none)."""
    try:
        return OffsetCheckpointFile(Path(log_dir) / LOG_START_OFFSET_CHECKPOINT).read()
    except (FileNotFoundError, StorageError):
        return {}


class ReadOnlyPartition:
    """The segments of one ``<topic>-<partition>`` directory, opened read-only and lazily.

    Index files are memory-mapped, and the writer trims the active segment's preallocated
    indexes when it rolls or closes it: a reader touching a mapped page past the new end of
    file dies of SIGBUS. So the last segment listed (the one that may be active) is opened
    without its indexes (:func:`open_without_indexes`) and searched by scanning its batch
    headers with ``pread``. Earlier segments were trimmed before the next segment's file was
    created, so their indexes no longer change.
    """

    def __init__(self, log_dir: Path, topic: str, partition: int, log_start_hint: int = 0) -> None:
        self.topic = topic
        self.partition = partition
        self.directory = Path(log_dir) / f"{topic}-{partition}"
        self.bases = sorted(
            offset_from_file_name(p.name)
            for p in self.directory.iterdir()
            if _SEGMENT_NAME.fullmatch(p.name)
        )
        self._opened: dict[int, LogSegment] = {}
        self.log_start_offset = max(self.bases[0] if self.bases else 0, log_start_hint)

    def close(self) -> None:
        for segment in self._opened.values():
            segment.close_handlers()
        self._opened.clear()

    def __enter__(self) -> ReadOnlyPartition:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def segment(self, base: int) -> LogSegment:
        if base not in self._opened:
            self._opened[base] = (
                open_without_indexes(self.directory, base)
                if base == self.bases[-1]
                else LogSegment(self.directory, base, writable=False)
            )
        return self._opened[base]

    def size_bytes(self) -> int:
        """Bytes of the ``.log`` files, by their sizes on disk (no segment is opened); a
        segment retention deleted since the listing counts as empty."""
        total = 0
        for base in self.bases:
            with contextlib.suppress(FileNotFoundError):
                total += os.stat(self.directory / segment_file_name(base, ".log")).st_size
        return total

    @property
    def segments(self) -> list[LogSegment]:
        return [self.segment(b) for b in self.bases]

    @property
    def active_segment(self) -> LogSegment:
        return self.segment(self.bases[-1])

    def segments_from(self, offset: int) -> Iterator[LogSegment]:
        """The segment holding ``offset`` (the last with base <= offset) and every later one."""
        first = max(bisect.bisect_right(self.bases, offset) - 1, 0)
        for base in self.bases[first:]:
            yield self.segment(base)

    def log_end_offset(self) -> int:
        """The offset after the last whole batch on disk (a torn tail does not count)."""
        if not self.bases:
            return self.log_start_offset
        return max(self.active_segment.read_next_offset(), self.log_start_offset)

    def offset_for_timestamp(self, timestamp: int) -> int | None:
        """Kafka's ListOffsets by time, via the engine's lookup: it only reads ``segments``,
        ``active_segment`` and ``log_start_offset``, which this view has."""
        if not self.bases:
            return None
        return offset_for_timestamp(cast("Log", self), timestamp)

    def aborted_txns(self, start: int, end: int) -> list[AbortedTxn]:
        """``.txnindex`` entries overlapping [start, end) (Kafka's collectAbortedTransactions)."""
        found: list[AbortedTxn] = []
        for segment in self.segments_from(start):
            txns, complete = segment.collect_aborted_txns(start, end)
            found.extend(txns)
            if complete:
                break
        return found


def byte_ranges(
    segment: LogSegment, position: int, end_offset: int, chunk_bytes: int
) -> Iterator[tuple[int, int, bool]]:
    """(position, size, legacy) of runs of whole batches from ``position`` until one holds
    ``end_offset - 1`` or beyond, at most ``chunk_bytes`` each (one batch may exceed it), never
    mixing v2 and legacy (magic 0/1) batches. Only headers are read; a legacy header gives only
    its wrapper's last offset, so the stop is judged by the last offsets already covered (a
    batch past the end may come along: readers filter records by offset)."""
    begin = end = position
    legacy = False
    covered = -1
    for header in segment.scan_headers(position):
        if covered >= end_offset - 1:
            break
        covered = header.last_offset
        is_legacy = header.magic < 2
        if end > begin and (is_legacy != legacy or end + header.size - begin > chunk_bytes):
            yield begin, end - begin, legacy
            begin = end
        legacy = is_legacy
        end = header.position + header.size
    if end > begin:
        yield begin, end - begin, legacy


def read_batches(segment: LogSegment, position: int, size: int) -> Iterator[AnyBatch]:
    """The batches in ``size`` bytes at ``position``, read with ``pread``. Never through a map of
    the ``.log``: a writer recovering from a crash truncates a torn tail, and a mapped page past
    the end of file is SIGBUS. Framing errors name the file position."""
    try:
        yield from iter_batches(segment.read_bytes(position, size), file=str(segment.log_path))
    except KafkaTierError as exc:
        at = position + int(exc.context.get("position") or 0)
        raise type(exc)(exc.message, **{**exc.context, "position": at}) from exc


def open_without_indexes(directory: Path, base: int) -> LogSegment:
    """``LogSegment(writable=False)`` of ``<base>.log`` whose offset and time indexes read as
    empty (lookups fall back to scanning the batches): the active segment's indexes may be
    preallocated and half-written by the writer. Nothing is created in ``directory``."""
    return LogSegment(directory, base, writable=False, read_indexes=False)


@dataclass(frozen=True)
class PartitionBounds:
    """What a reader may read of one partition at one moment."""

    log_start: int
    high_watermark: int  # the log end offset: a single always-leader replica
    last_stable: int
    aborted: tuple[AbortedTxn, ...] = ()  # ABORT markers seen by the tail scan
    size_bytes: int = 0  # of the segments holding [log_start, high_watermark), if asked for

    def latest(self, committed: bool) -> int:
        """Kafka's end offset for a consumer of that isolation level."""
        return self.last_stable if committed else self.high_watermark

    def aborted_in(self, start: int, end: int) -> tuple[AbortedTxn, ...]:
        return tuple(t for t in self.aborted if t.last_offset >= start and t.first_offset < end)


def scan_bounds(part: ReadOnlyPartition, committed: bool) -> PartitionBounds:
    """Log start, high watermark and LSO of ``part``, read from the files (module docstring)."""
    end = part.log_end_offset()
    if not committed:
        return PartitionBounds(part.log_start_offset, end, end)
    start, ongoing = _snapshot_state(part, end)
    aborted: list[AbortedTxn] = []
    high = start
    for segment in part.segments_from(start):
        found = segment.translate_offset(start)
        for header in segment.scan_headers(found.position) if found is not None else ():
            high = header.last_offset + 1
            if header.magic >= 2:
                _track_txn(segment, header, ongoing, aborted)
    high = max(high, end)
    lso = min([high, *ongoing.values()])
    return PartitionBounds(part.log_start_offset, high, lso, tuple(aborted))


def _track_txn(
    segment: LogSegment, at: BatchPosition, ongoing: dict[int, int], aborted: list[AbortedTxn]
) -> None:
    """Open or close a transaction from one batch's header: only the 61 header bytes are read,
    and the whole batch for a transaction marker (small), never the data."""
    fields = BATCH_HEADER.unpack(segment.read_bytes(at.position, BATCH_HEADER_SIZE))
    attributes, pid = fields[5], fields[9]
    if not attributes & ATTR_TRANSACTIONAL:
        return
    if not attributes & ATTR_CONTROL:
        ongoing.setdefault(pid, at.base_offset)
        return
    first = ongoing.pop(pid, None)
    if first is None:
        return
    marker = RecordBatch(segment.read_bytes(at.position, at.size), file=str(segment.log_path))
    if marker.control_record()[0] == ControlType.ABORT:
        lso = min([at.last_offset + 1, *ongoing.values()])
        aborted.append(AbortedTxn(pid, first, at.last_offset, lso))


def _snapshot_state(part: ReadOnlyPartition, end: int) -> tuple[int, dict[int, int]]:
    """(offset, producer id -> first offset of its open transaction) from the newest readable
    snapshot within the log, else (log start, nothing open)."""
    usable = [
        s for s in list_snapshot_files(part.directory) if part.log_start_offset <= s.offset <= end
    ]
    for snap in reversed(usable):
        try:
            entries = read_snapshot(snap.path)
        except (FileNotFoundError, CorruptSnapshotError):
            continue  # deleted by the writer meanwhile, or torn: an older one will do
        ongoing = {
            e.producer_id: e.current_txn_first_offset
            for e in entries
            if e.current_txn_first_offset >= 0
        }
        return snap.offset, ongoing
    return part.log_start_offset, {}
