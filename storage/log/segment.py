"""One log segment: a ``.log`` file of record batches plus its three index files.

On disk (kafka-format.md §1, §4-§6, §9): ``<base>.log`` holds batches back to back with no header or
padding; ``<base>.index`` maps a batch's last offset (relative to ``base``) to its start position,
sparsely (a new entry once more than ``index.interval.bytes`` were appended since the last one);
``<base>.timeindex`` records the segment's running max timestamp with the last offset of the batch
that carried it; ``<base>.txnindex`` lists aborted transactions whose ABORT marker is here.
Names are the 20-digit base offset; ``suffix`` (``.cleaned``, ``.swap``, ``.deleted``) is
appended after the normal extension during the cleaner's and retention's multi-file protocols.
A writable segment's descriptors are counted by a :class:`~kafkatier.storage.file_budget.
FileBudget` (``log.max.open.files``): the ``.log`` is opened at first use and may be closed
while idle, and the offset and time indexes are opened at first use (``segment_indexes.py``,
Kafka's ``LazyIndex``) and may be unmapped while idle; all reopen transparently. A read-only
segment (a reader beside the writer) keeps its ``.log`` open from construction to close, so a
file another process deletes meanwhile stays readable, and reads its indexes at construction,
as they were then.
Finding batch boundaries from their headers is ``batch_position.py`` (with :class:`BatchInfo`
and :class:`BatchPosition`).
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from kafkatier.storage import fsutil, wire
from kafkatier.storage.errors import KafkaTierError, LogWriteError, StorageError
from kafkatier.storage.file_budget import BudgetedFile, FileBudget, process_budget
from kafkatier.storage.index.offset_index import OffsetIndex
from kafkatier.storage.index.time_index import TimeIndex
from kafkatier.storage.index.txn_index import AbortedTxn, TransactionIndex
from kafkatier.storage.log.batch_position import BatchInfo, BatchPosition, header_at
from kafkatier.storage.log.segment_indexes import SegmentIndexes
from kafkatier.storage.record.batch import RecordBatch
from kafkatier.storage.record.legacy import LegacyBatch
from kafkatier.storage.record.records import iter_batches

if TYPE_CHECKING:
    from kafkatier.storage.log.queued_writes import QueuedWrites

AnyBatch = RecordBatch | LegacyBatch
Buffer = bytes | bytearray | memoryview
IOV_MAX = 1024  # the most buffers one pwritev takes on Linux
WRITEBACK_BYTES = 8 << 20  # appended bytes between two write-behind hints (_write_behind)
SUFFIXES = (".log", ".index", ".timeindex", ".txnindex")
__all__ = ["SUFFIXES", "AnyBatch", "LogSegment"]


def _after(views: Sequence[memoryview], skip: int) -> list[memoryview]:
    """``views`` without their first ``skip`` bytes (what a short pwritev left to write)."""
    out: list[memoryview] = []
    for view in views:
        if skip >= view.nbytes:
            skip -= view.nbytes
            continue
        out.append(view[skip:])
        skip = 0
    return out

_OFFSET_ENTRY = OffsetIndex.ENTRY  # the entries _index_batches packs for append_packed
_TIME_ENTRY = TimeIndex.ENTRY

class LogSegment:
    """A ``.log`` file with its ``.index``, ``.timeindex`` and ``.txnindex`` (module docstring)."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int = 4096,
        max_index_size: int = 10 * 1024 * 1024,
        suffix: str = "",
        writable: bool = True,
        created_ms: int | None = None,
        roll_jitter_ms: int = 0,
        read_indexes: bool = True,
        budget: FileBudget | None = None,
    ) -> None:
        """``budget``: where a writable segment's descriptors are counted (default: the
        process's, :func:`~kafkatier.storage.file_budget.process_budget`)."""
        self.directory = fsutil.as_path(directory)
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.suffix = suffix
        self.writable = writable
        self._budget = (budget or process_budget()) if writable else None
        created = False
        if self._budget is not None:
            self._file, size = BudgetedFile.writable(self._path(".log"), self._budget)
            created, self.size = size is None, size or 0
        else:
            self._file = BudgetedFile(self._path(".log"), os.O_RDONLY, None)
            with self._file.use() as fd:
                self.size = os.fstat(fd).st_size
        self._indexes = SegmentIndexes(
            self._path,
            base_offset,
            max_index_size,
            writable=writable,
            read_indexes=read_indexes,  # False: read-only, lookups scan the batches instead
            budget=self._budget,
        )
        if created or not writable:
            self._indexes.open_now()
        self.txn_index = TransactionIndex(self._path(".txnindex"), base_offset)
        self.created_ms = created_ms if created_ms is not None else int(time.time() * 1000)
        self.roll_jitter_ms = roll_jitter_ms
        self.rolling_based_timestamp: int | None = None
        self._bytes_since_last_index_entry = 0
        self._max_ts: tuple[int, int] | None = None  # (max timestamp, offset of its batch)
        self._unsynced = writable  # an earlier process's writes may sit in the page cache only
        self._writeback_from = self.size  # where start_writeback last left off

    def _path(self, ext: str) -> Path:
        return self.directory / wire.segment_file_name(self.base_offset, ext + self.suffix)

    @property
    def log_path(self) -> Path:
        return self._file.path

    @log_path.setter
    def log_path(self, path: Path) -> None:
        self._file.path = path

    @property
    def offset_index(self) -> OffsetIndex:
        return self._indexes.offset.get()

    @property
    def time_index(self) -> TimeIndex:
        return self._indexes.time.get()

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path}, size={self.size})"

    # ----------------------------------------------------------------- timestamps

    @property
    def max_timestamp_and_offset(self) -> tuple[int, int]:
        """Running max timestamp and its batch's last offset; after a reopen, the time index's
        last entry (Kafka's ``readMaxTimestampAndOffsetSoFar``)."""
        if self._max_ts is None:
            self._max_ts = self.time_index.last_entry
        return self._max_ts

    @property
    def max_timestamp(self) -> int:
        return self.max_timestamp_and_offset[0]

    @property
    def largest_timestamp(self) -> int:
        """What retention judges: the max record timestamp, else the file's mtime (Kafka)."""
        ts = self.max_timestamp
        return ts if ts >= 0 else int(self.log_path.stat().st_mtime * 1000)

    def _track_max(self, timestamp: int, last_offset: int) -> None:
        if timestamp > self.max_timestamp:
            self._max_ts = (timestamp, last_offset)

    def time_waited_for_roll(self, clock: Callable[[], int], message_timestamp: int) -> int:
        """Kafka's ``timeWaitedForRoll``: by record timestamps when the segment's first batch has
        one (read back from the file after a reopen, as ``loadFirstBatchTimestamp``), else by
        the clock (read only then) since this segment object was created."""
        if self.rolling_based_timestamp is None:
            first = None
            if self.size:
                with self._file.use() as fd:
                    first = header_at(fd, 0, self.size, str(self.log_path))
            if first is not None:
                batch = next(self.batches(0, end=first.size), None)
                self.rolling_based_timestamp = None if batch is None else batch.max_timestamp
        based = self.rolling_based_timestamp
        if based is not None and based >= 0:
            return message_timestamp - based
        return clock() - self.created_ms

    # ----------------------------------------------------------------- appends

    @property
    def indexes_full(self) -> bool:
        """Whether the offset or the time index has no free slot (a roll is due)."""
        return self.offset_index.is_full or self.time_index.is_full

    def index_room(self, entries: int) -> bool:
        """Whether both indexes can take ``entries`` more entries."""
        return min(self.offset_index.free_slots, self.time_index.free_slots) >= entries

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= wire.INT32_MAX

    def append(self, data: Buffer | Sequence[Buffer], batches: Sequence[BatchInfo]) -> None:
        """Write ``data`` (whole batches, offsets assigned; or their buffers, written in one
        ``pwritev``) at the end and index it per batch.

        Indexing per batch (not per append, as Kafka 3.x does) keeps every offset-index entry
        equal to the last offset of the batch at its position, which DumpLogSegments verifies.
        """
        if not batches:
            return
        last = batches[-1].last_offset
        if not self.can_convert_to_relative_offset(last):
            raise StorageError(
                "offset does not fit this segment's relative offsets",
                file=str(self.log_path),
                offset=last,
            )
        if self.size == 0:
            self.rolling_based_timestamp = max(b.max_timestamp for b in batches)
        if isinstance(data, (bytes, bytearray, memoryview)):
            views = [memoryview(data).cast("B")]
        else:
            views = [memoryview(part).cast("B") for part in data]
        self.append_placed(views, batches)

    def append_placed(
        self, views: list[memoryview], batches: Sequence[BatchInfo],
        queued: QueuedWrites | None = None,
    ) -> None:  # fmt: skip
        """:meth:`append` of whole batches a caller checked (``views`` of their bytes; offsets
        that fit this segment, which is not empty: the sink's one-pass committed write), their
        bytes written by ``queued`` where given (:mod:`kafkatier.storage.log.queued_writes`)."""
        if len(views) > IOV_MAX:
            views = [memoryview(b"".join(views))]
        start = self.size
        # Whether any batch is due an entry: the bytes since the last one before the last batch
        # (the usual small append has none, and skips the reservation and the entry checks).
        indexes = None
        if self._entry_due(
            self._bytes_since_last_index_entry + batches[-1].position - batches[0].position
        ):
            indexes = (self.offset_index, self.time_index)
            self.reserve_index_entries(indexes, len(batches))
        size = sum([v.nbytes for v in views]) if len(views) > 1 else views[0].nbytes
        if queued is None or queued.full:
            self._write_all(views, start, size)
        else:
            self._queue_write(queued, views, start, size)
        self._index_batches(start, batches, indexes)
        self.size = start + size

    def _queue_write(
        self, queued: QueuedWrites, views: list[memoryview], start: int, size: int
    ) -> None:
        """:meth:`_write_all` handed to ``queued``: the file stays open (pinned) until
        :meth:`finish_queued_write`."""
        queued.add(self, self.pin_for_write(size), views, start, size)
        self._unsynced = True

    @property
    def budget(self) -> FileBudget | None:
        """Where this segment's descriptors are counted (None: read-only, not counted)."""
        return self._budget

    def pin_for_write(self, size: int) -> int:
        """The ``.log``'s descriptor, pinned open for a queued write of ``size`` bytes at the
        end (:meth:`finish_queued_write` unpins it; so does ``unpin_unused``)."""
        try:
            return self._file.pin()
        except OSError as exc:
            raise self._append_error(size, exc, self.size) from exc

    def unpin_unused(self) -> None:
        """:meth:`pin_for_write`'s pin given back without a write."""
        self._file.unpin()

    def placing_state(
        self, entries: int
    ) -> tuple[OffsetIndex, TimeIndex, int, int, int, int, int, int]:
        """What an append placed by the C library starts from (``log/committed_all.py``), with
        disk space reserved for the ``entries`` index entries it may add: both indexes, the
        size, the bytes since the last index entry, the running max timestamp and its offset,
        the indexes' free slots (the fewer) and the time index's last timestamp."""
        offsets, times = self.offset_index, self.time_index
        self.reserve_index_entries((offsets, times), entries)
        best = self.max_timestamp_and_offset
        return (offsets, times, self.size, self._bytes_since_last_index_entry, best[0], best[1],
                min(offsets.free_slots, times.free_slots), times.last_entry[0])  # fmt: skip

    def placed(self, end: int, since: int, best: tuple[int, int]) -> None:
        """The segment after an append placed by the C library and queued (what
        :meth:`append_placed` leaves, by ``_index_batches``' rule; the caller gives the indexes
        their entries): the file ``end``s there, ``since`` bytes since the last index entry,
        ``best`` the running max."""
        self.size, self._unsynced = end, True
        self._bytes_since_last_index_entry, self._max_ts = since, best

    def finish_queued_write(
        self, fd: int, start: int, size: int, error: OSError | None
    ) -> LogWriteError | None:
        """After the queue wrote (or failed to write) this segment's append at ``start``: what
        :meth:`_write_all` does after its write, the file cut back and the error returned on a
        failure; the file unpinned."""
        try:
            if error is None:
                self._write_behind(fd, start + size)
                return None
            self._cut_back(start)
            return self._append_error(size, error, start)
        finally:
            self._file.unpin()

    def _append_error(self, size: int, cause: OSError, start: int) -> LogWriteError:
        """The one-line error of an append of ``size`` bytes at ``start`` that failed."""
        return LogWriteError.of(
            f"cannot append {size} bytes", cause, file=str(self.log_path), position=start
        )

    def _write_all(self, views: list[memoryview], start: int, size: int) -> None:
        """Write ``views`` (of bytes, ``size`` in all) at ``start`` (pwritev, continued after a
        short write). On a failure (no space, quota, I/O error) the bytes written are cut off
        again, so the file ends where it did, and :class:`LogWriteError` names the file and
        position."""
        done = 0
        try:
            fd = self._file.pin()
            try:
                while done < size:
                    written = os.pwritev(fd, _after(views, done) if done else views, start + done)
                    if written == 0:
                        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                    done += written
                self._write_behind(fd, start + size)
            finally:
                self._file.unpin()
        except OSError as exc:
            self._cut_back(start)
            raise self._append_error(size, exc, start) from exc
        finally:  # after the write: an fsync racing it in another thread cannot clear the mark
            self._unsynced = True

    def _write_behind(self, fd: int, end: int) -> None:
        """Every :data:`WRITEBACK_BYTES` appended, have the kernel start writing them back
        (``fsutil.start_writeback``): a large append (``produce``, a big micro-batch) then
        finds little left to write at its flush."""
        if end - self._writeback_from >= WRITEBACK_BYTES:
            fsutil.start_writeback(fd, self._writeback_from, end - self._writeback_from)
            self._writeback_from = end

    def _cut_back(self, size: int) -> None:
        """Best effort: the file back to ``size`` bytes after a failed write (if this fails
        too, the next open's recovery cuts the torn tail, which lies above the recovery
        point: nothing below it was touched)."""
        with contextlib.suppress(OSError), self._file.use() as fd:
            os.ftruncate(fd, size)

    @staticmethod
    def reserve_index_entries(indexes: tuple[OffsetIndex, TimeIndex], entries: int) -> None:
        """Have disk space for the ``entries`` index entries an append may add (at most one a
        batch) before the ``.log`` write, so that no space fails the append before it wrote
        anything (the indexes reserve again as the entries come, for the entries of a roll or a
        close; a reservation is rounded up to 64 KiB: nearly every call compares two numbers)."""
        for index in indexes:
            index.reserve(entries)

    def _entry_due(self, since: int) -> bool:
        """Kafka's rule: a batch gets index entries once more than ``index.interval.bytes``
        were appended since the last entry (said here once: the reservation before a write and
        the entries after it must agree)."""
        return since > self.index_interval_bytes

    def _index_batches(
        self, start: int, batches: Sequence[BatchInfo],
        indexes: tuple[OffsetIndex, TimeIndex] | None,
    ) -> None:  # fmt: skip
        """Index the batches just written at ``start``: the running max timestamp, and, where
        ``indexes`` are given (some batch may be due), an entry in both for each batch due one
        (a loop over locals: it runs for every batch of every append; the entries are packed
        here and go to each index in one call, ``append_packed``)."""
        since = self._bytes_since_last_index_entry
        best = self.max_timestamp_and_offset
        offset_room = time_room = last_ts = 0  # no entry unless due (the indexes stay unopened)
        if indexes is not None:
            offset_room, time_room = indexes[0].free_slots, indexes[1].free_slots
            last_ts = indexes[1].last_entry[0]
        offset_packed, time_packed = bytearray(), bytearray()
        offsets: list[int] = []  # the entries' offsets (the index checks the first and last)
        times: list[tuple[int, int]] = []
        for position, size, last_offset, max_ts in batches:
            if max_ts > best[0]:
                best = self._max_ts = (max_ts, last_offset)
            # An append of many batches may fill an index mid-way (Kafka indexes once per
            # append and rolls before a full index); skipping entries only lengthens scans.
            if offset_room > 0 and time_room > 0 and self._entry_due(since):
                offset_packed += _OFFSET_ENTRY.pack(last_offset - self.base_offset,
                                                    start + position)  # fmt: skip
                offsets.append(last_offset)
                offset_room -= 1
                if best[0] > last_ts:  # the time index takes it (maybe_append)
                    time_packed += _TIME_ENTRY.pack(best[0], best[1] - self.base_offset)
                    times.append(best)
                    time_room, last_ts = time_room - 1, best[0]
                since = 0
            since += size
        if indexes is not None and offsets:
            indexes[0].append_packed(offset_packed, offsets[0], offsets[-1], len(offsets))
            if times:
                indexes[1].append_packed(time_packed, times[0], times[-1], len(times))
        self._bytes_since_last_index_entry = since

    def append_aborted_txn(self, txn: AbortedTxn) -> None:
        self.txn_index.append(txn)

    # ----------------------------------------------------------------- reads

    def read_bytes(self, position: int, size: int) -> bytes:
        with self._file.use() as fd:
            return os.pread(fd, size, position)

    def scan_headers(self, position: int = 0) -> Iterator[BatchPosition]:
        """Batch boundaries from ``position`` on, reading only headers (no CRC check)."""
        while position < self.size:  # read per step: the segment may grow meanwhile
            with self._file.use() as fd:
                found = header_at(fd, position, self.size, str(self.log_path))
            if found is None:
                return
            yield found
            position += found.size

    def translate_offset(self, offset: int, start_position: int = 0) -> BatchPosition | None:
        """The first batch whose last offset is >= ``offset`` (index lookup, then scan)."""
        _, indexed = self.offset_index.lookup(offset)
        for found in self.scan_headers(max(indexed, start_position)):
            if found.last_offset >= offset:
                return found
        return None

    def batches(self, position: int = 0, *, end: int | None = None) -> Iterator[AnyBatch]:
        """Full batches (parsed views) from ``position``; stops at a partial tail."""
        stop = self.size if end is None else min(end, self.size)
        if stop <= position:
            return
        # The map is left to the garbage collector: yielded batches are views into it, and
        # closing it while a caller still holds one would raise (or fault).
        with self._file.use() as fd:  # the map keeps its own descriptor
            view = mmap.mmap(fd, stop, access=mmap.ACCESS_READ)
        yield from iter_batches(memoryview(view), position, stop, file=str(self.log_path))

    def index_leads_to_end(self) -> bool:
        """Whether the offset index's last entry points at a batch from which the batches run
        to the end of the ``.log`` (a clean shutdown's active segment: the next offset is read
        from there; an entry damaged while the clean-shutdown marker stayed led
        :meth:`read_next_offset` to the base offset, and appends reused offsets). Without an
        entry, from the start: a torn last batch there (a cut file) was appended after, and
        the new batches hid behind the bytes no reader gets past."""
        _, position = self.offset_index.lookup(2**63 - 1) if self.offset_index.entries else (0, 0)
        if not self.size:
            return True
        if not 0 <= position < self.size:
            return False
        end = None
        try:
            for found in self.scan_headers(position):
                end = found.position + found.size
        except KafkaTierError:
            return False
        return end == self.size

    def read_next_offset(self) -> int:
        """The offset after the last batch (Kafka's ``readNextOffset``), or the base offset."""
        _, position = self.offset_index.lookup(2**63 - 1)
        last: BatchPosition | None = None
        for last in self.scan_headers(position):  # noqa: B007 - the last one is the answer
            pass
        return last.last_offset + 1 if last is not None else self.base_offset

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int) -> int | None:
        """First offset >= ``starting_offset`` whose record timestamp is >= ``timestamp``."""
        _, ts_offset = self.time_index.lookup(timestamp)
        _, position = self.offset_index.lookup(max(ts_offset, starting_offset))
        for batch in self.batches(position):
            if batch.max_timestamp < timestamp:
                continue
            for record in batch.records():
                if record.timestamp >= timestamp and record.offset >= starting_offset:
                    return record.offset
        return None

    def collect_aborted_txns(
        self, fetch_offset: int, upper_bound: int
    ) -> tuple[list[AbortedTxn], bool]:
        return self.txn_index.collect_aborted_txns(fetch_offset, upper_bound)

    # ----------------------------------------------------------------- lifecycle

    @property
    def unsynced(self) -> bool:
        """Whether the ``.log`` file may hold bytes no fsync has covered yet (true for a
        segment just opened: the process that wrote it may have died before its fsync)."""
        return self._unsynced

    def flush_data(self, *, covered: bool = False) -> None:
        """fsync the ``.log`` file if it changed since its last fsync; the indexes are left
        to :meth:`flush` (the loader rebuilds them from the ``.log`` above the recovery point).
        ``covered``: a syncfs of the filesystem, begun after every write so far, made them
        durable; only the mark is cleared."""
        if self._unsynced:
            self._sync_log(covered)

    def flush(self, *, covered: bool = False) -> None:
        """fsync the ``.log`` file and its indexes (``covered``: as :meth:`flush_data`; index
        entries kept in memory until now are written and synced here: the syncfs could not
        cover them, see :meth:`write_index_entries`)."""
        self._sync_log(covered)
        if not covered or self._indexes.unwritten:
            self._indexes.flush()
        if not covered:
            self.txn_index.flush()

    def write_index_entries(self) -> None:
        """The index entries kept in memory (``index/base.py``) written into their files,
        before a syncfs that is to make this segment durable with its indexes."""
        self._indexes.write_pending()

    def _sync_log(self, covered: bool) -> None:
        self._unsynced = False  # before the fsync: a write racing it marks the file again
        if covered:
            return
        try:
            self._file.fsync()
        except BaseException:
            self._unsynced = True
            raise

    def on_become_inactive(self) -> None:
        """On roll: final time-index entry (the segment's max), indexes trimmed (Kafka)."""
        ts, offset = self.max_timestamp_and_offset
        self.time_index.maybe_append(ts, offset, skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()

    def reset_rolling_state(self) -> None:
        self._bytes_since_last_index_entry = 0

    def truncate_to(self, offset: int) -> int:
        """Drop every batch whose last offset is >= ``offset``; returns bytes removed."""
        found = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        if found is None:
            return 0
        removed = self.size - found.position
        with self._file.use() as fd:
            os.ftruncate(fd, found.position)
        self._unsynced = True
        self.size = found.position
        self._writeback_from = min(self._writeback_from, self.size)
        self._max_ts = None
        if self.time_index.entries == 0:
            self._max_ts = self._rescan_max_timestamp()
        self._bytes_since_last_index_entry = 0
        if self.size == 0:
            self.rolling_based_timestamp = None
        return removed

    def _rescan_max_timestamp(self) -> tuple[int, int]:
        best = (wire.NO_TIMESTAMP, self.base_offset)
        for batch in self.batches():
            if batch.max_timestamp > best[0]:
                best = (batch.max_timestamp, batch.last_offset)
        return best

    def truncate_bytes(self, valid_bytes: int) -> None:
        with self._file.use() as fd:
            os.ftruncate(fd, valid_bytes)
        self._unsynced = True
        self.size = valid_bytes
        self._writeback_from = min(self._writeback_from, self.size)

    def close(self) -> None:
        """Final time-index entry, trimmed indexes, file closed (Kafka's ``LogSegment.close``):
        the entry only if this process tracked the segment's max timestamp (else the time
        index's last entry is that max already), and only opened indexes are trimmed."""
        try:
            if self.writable and self._max_ts is not None and self._max_ts[0] >= 0:
                self.time_index.maybe_append(*self._max_ts, skip_full_check=True)
        finally:  # the entry refused (a full disk): the indexes are trimmed all the same
            self.close_handlers()

    def close_handlers(self) -> None:
        """Close the opened indexes (a writable one is trimmed first) and the ``.log``; each
        is closed even when one before it fails: an index left at its preallocated length is
        mostly holes, whose reading through a map on a full tmpfs is a SIGBUS."""
        try:
            self._indexes.close()
        finally:
            try:
                self.txn_index.close()
            finally:
                self._file.close()

    def abandon(self) -> None:
        """Close the files without writing to any: no index trimmed, no entry kept in memory
        written (``LogDirectory.abandon``)."""
        self._indexes.close_handlers()
        self._file.close()

    def change_suffix(self, new_suffix: str) -> None:
        """Rename all four files from the current suffix to ``new_suffix`` (Kafka's
        ``changeFileSuffixes``), ``.log`` last so a crash leaves the segment recognisable."""
        old_paths = {ext: self._path(ext) for ext in SUFFIXES}
        self.suffix = new_suffix
        self._indexes.rename()
        self.txn_index.rename_to(self._path(".txnindex"))
        os.replace(old_paths[".log"], self._path(".log"))
        self.log_path = self._path(".log")

    def delete(self) -> None:
        """Close and remove every file of this segment (missing files are fine)."""
        self.close_handlers()
        self._indexes.delete()
        self.txn_index.delete()
        self.log_path.unlink(missing_ok=True)

    @property
    def last_modified_ms(self) -> int:
        return int(self.log_path.stat().st_mtime * 1000)
