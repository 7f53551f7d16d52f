"""Read-only access to partition logs for the ``kafkatier`` data source: no recovery, no writes,
no locks, so a reader may run beside the single writer (the sink) appending to the same log.

A partition directory is opened as its ``<base>.log`` segments (files with a cleaner or
retention suffix are ignored) through ``LogSegment(writable=False)``; missing indexes read as
empty. The log start offset is the first segment's base, raised by the log dir's
``log-start-offset-checkpoint`` when that says more.

What a reader may read of it (log start, high watermark, last stable offset) is ``bounds.py``.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, cast

from kafkatier.storage.checkpoint.checkpoint_file import (
    LOG_START_OFFSET_CHECKPOINT,
    OffsetCheckpointFile,
)
from kafkatier.storage.config.internal_topics import managed_partition, matches_pattern
from kafkatier.storage.errors import KafkaTierError, StorageError
from kafkatier.storage.index.txn_index import AbortedTxn, TransactionIndex
from kafkatier.storage.log.active_index import walk_start
from kafkatier.storage.log.batch_position import BatchPosition
from kafkatier.storage.log.creation import topics_being_created
from kafkatier.storage.log.segment import AnyBatch, LogSegment
from kafkatier.storage.log.tail import LogFile
from kafkatier.storage.producer.snapshot import SNAPSHOT_SUFFIX
from kafkatier.storage.record.records import iter_batches
from kafkatier.storage.wire import (
    INT64_MAX,
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
        parsed = managed_partition(child.name) if child.is_dir() else None
        if parsed is None or parsed[0] in creating:
            continue
        if (wanted is not None and parsed[0] in wanted) or (
            regex is not None and matches_pattern(regex, parsed[0])
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
        self.path = os.path.join(log_dir, f"{topic}-{partition}")
        names = os.listdir(self.path)
        self.bases = sorted(int(n[:20]) for n in names if _SEGMENT_NAME.fullmatch(n))
        self.snapshots = _snapshot_offsets(names)
        """Offsets of the producer snapshots listed with the segments."""
        self._opened: dict[int, LogSegment] = {}
        self.log_start_offset = max(self.bases[0] if self.bases else 0, log_start_hint)

    @functools.cached_property
    def directory(self) -> Path:
        """The partition's directory (``path`` as a ``Path``, made when first asked for)."""
        return Path(self.path)

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
        return sum(self.log_sizes())

    def log_sizes(self) -> list[int]:
        """The size of each segment's ``.log`` (:meth:`size_bytes`), oldest first."""
        sizes = []
        for base in self.bases:
            try:
                sizes.append(os.stat(self.file(base, ".log")).st_size)
            except FileNotFoundError:
                sizes.append(0)
        return sizes

    @property
    def segments(self) -> list[LogSegment]:
        return [self.segment(b) for b in self.bases]

    @property
    def active_segment(self) -> LogSegment:
        return self.segment(self.bases[-1])

    def segments_from(self, offset: int) -> Iterator[LogSegment]:
        """The segment holding ``offset`` (the last with base <= offset) and every later one."""
        for base in self.bases_from(offset):
            yield self.segment(base)

    def bases_from(self, offset: int) -> list[int]:
        """The bases of :meth:`segments_from`, no segment opened."""
        return self.bases[max(bisect.bisect_right(self.bases, offset) - 1, 0) :]

    def log_end_offset(self) -> int:
        """The offset after the last whole batch on disk (a torn tail does not count)."""
        if not self.bases:
            return self.log_start_offset
        base = self.bases[-1]
        with self.last_log() as log:  # framed from the last entry of its index, checked
            last = log.table(walk_start(log, self.file(base, ".index"), base, INT64_MAX)).last
            return self.end_of(None if last is None else last.last_offset)

    def end_of(self, last: int | None) -> int:
        """The log end offset, given the last segment's last offset (None: no batch)."""
        end = last + 1 if last is not None else self.bases[-1]
        return max(end, self.log_start_offset)

    def last_log(self) -> LogFile:
        """The last segment's ``.log`` alone, for its batch headers (``tail.py``: no index
        opened, a small file read at once)."""
        return LogFile(self.file(self.bases[-1], ".log"))

    def file(self, base: int, suffix: str) -> str:
        """The path of ``<base><suffix>`` in the partition's directory (``.log``, ``.snapshot``)."""
        return os.path.join(self.path, segment_file_name(base, suffix))

    def offset_for_timestamp(self, timestamp: int) -> int | None:
        """Kafka's ListOffsets by time, via the engine's lookup: it only reads ``segments``,
        ``active_segment`` and ``log_start_offset``, which this view has."""
        if not self.bases:
            return None
        from kafkatier.storage.log.reader import offset_for_timestamp  # the engine: lazily

        return offset_for_timestamp(cast("Log", self), timestamp)

    def aborted_txns(self, start: int, end: int) -> list[AbortedTxn]:
        """``.txnindex`` entries overlapping [start, end) (Kafka's collectAbortedTransactions),
        read from the files alone (no segment opened)."""
        found: list[AbortedTxn] = []
        for base in self.bases_from(start):
            index = TransactionIndex(Path(self.file(base, ".txnindex")), base)
            txns, complete = index.collect_aborted_txns(start, end)
            found.extend(txns)
            if complete:
                break
        return found


class SegmentBytes(Protocol):
    """What reading runs of batches needs of a segment: ``LogSegment`` or ``LogFile``."""

    @property
    def log_path(self) -> str | Path: ...

    def read_bytes(self, position: int, size: int) -> bytes: ...


def byte_ranges(
    headers: Iterable[BatchPosition], position: int, end_offset: int, chunk_bytes: int
) -> Iterator[tuple[int, int, bool]]:
    """(position, size, legacy) of runs of whole batches (``headers``, from the one at
    ``position`` on) until one holds ``end_offset - 1`` or beyond, at most ``chunk_bytes`` each
    (one batch may exceed it), never mixing v2 and legacy (magic 0/1) batches. Only headers are
    read; a legacy header gives only its wrapper's last offset, so the stop is judged by the
    last offsets already covered (a batch past the end may come along: readers filter records
    by offset)."""
    begin = end = position
    legacy = False
    covered = -1
    for header in headers:
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


def read_batches(segment: SegmentBytes, position: int, size: int) -> Iterator[AnyBatch]:
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


def _snapshot_offsets(names: Iterable[str]) -> list[int]:
    """Offsets of the ``<offset>.snapshot`` names (Kafka's listSnapshotFiles), in order."""
    found = []
    for name in names:
        if name.endswith(SNAPSHOT_SUFFIX):
            with contextlib.suppress(ValueError):  # not a snapshot name: never ours to touch
                found.append(offset_from_file_name(name))
    return sorted(found)
