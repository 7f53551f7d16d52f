"""Reads from a partition log: by offset, by timestamp, bounded fetches, records and Arrow.

A fetch is bounded by the high watermark (``read_uncommitted``) or the last stable offset
(``read_committed``), as a broker bounds it. ``read_committed`` readers drop the data of aborted
transactions the way Kafka's consumer does: the fetch returns the aborted transactions from the
segments' ``.txnindex`` files, and :class:`AbortedTransactionFilter` skips a producer's
transactional batches from an aborted transaction's first offset until its ABORT marker.
"""

from __future__ import annotations

import enum
import heapq
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from kafkatier.storage.errors import OffsetOutOfRangeError
from kafkatier.storage.index.txn_index import AbortedTxn
from kafkatier.storage.log.batch_position import BatchPosition
from kafkatier.storage.log.log import Log
from kafkatier.storage.log.segment import AnyBatch, LogSegment
from kafkatier.storage.record.record import Record
from kafkatier.storage.wire import ControlType


class IsolationLevel(enum.Enum):
    """Kafka's consumer ``isolation.level``."""

    READ_UNCOMMITTED = "read_uncommitted"
    READ_COMMITTED = "read_committed"

    @classmethod
    def parse(cls, value: str | IsolationLevel) -> IsolationLevel:
        return value if isinstance(value, IsolationLevel) else cls(value.strip().lower())


@dataclass(frozen=True, slots=True)
class FetchData:
    """Whole batches starting at the batch holding ``start_offset`` (Kafka's FetchDataInfo)."""

    start_offset: int
    data: bytes
    aborted: tuple[AbortedTxn, ...] = ()


@dataclass
class AbortedTransactionFilter:
    """Kafka's consumer-side aborted-data skipping, one pass over batches in offset order."""

    aborted: list[tuple[int, int, AbortedTxn]] = field(default_factory=list)
    _aborted_pids: set[int] = field(default_factory=set)

    @classmethod
    def of(cls, txns: list[AbortedTxn]) -> AbortedTransactionFilter:
        heap = [(t.first_offset, i, t) for i, t in enumerate(txns)]
        heapq.heapify(heap)
        return cls(heap)

    def keep(self, batch: Any) -> bool:
        """False for control batches and for data of aborted transactions."""
        if batch.is_transactional:
            while self.aborted and self.aborted[0][0] <= batch.last_offset:
                self._aborted_pids.add(heapq.heappop(self.aborted)[2].producer_id)
        if batch.is_control:
            if batch.is_transactional and self._is_abort_marker(batch):
                self._aborted_pids.discard(batch.producer_id)
            return False
        return not (batch.is_transactional and batch.producer_id in self._aborted_pids)

    @staticmethod
    def _is_abort_marker(batch: Any) -> bool:
        control = getattr(batch, "control_record", None)
        if control is None or getattr(batch, "records_count", 1) == 0:
            return False
        return bool(control()[0] == ControlType.ABORT)


def upper_bound(log: Log, isolation: IsolationLevel) -> int:
    if isolation is IsolationLevel.READ_COMMITTED:
        return log.last_stable_offset
    return log.high_watermark


def check_offset(log: Log, offset: int) -> None:
    if offset < log.log_start_offset or offset > log.log_end_offset:
        raise OffsetOutOfRangeError(
            f"offset {offset} is outside [{log.log_start_offset}, {log.log_end_offset}]",
            file=str(log.directory),
        )


def read(
    log: Log,
    start_offset: int,
    max_bytes: int = 1024 * 1024,
    isolation: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
) -> FetchData:
    """Up to ``max_bytes`` of whole batches (at least one) from the batch holding the offset."""
    check_offset(log, start_offset)
    bound = upper_bound(log, isolation)
    for segment in log.segments_from(start_offset):
        found = segment.translate_offset(start_offset)
        if found is None or (found.base_offset >= bound and found.last_offset >= bound):
            continue
        end_pos = found.position
        for header in segment.scan_headers(found.position):
            if header.base_offset >= bound or (
                end_pos > found.position and end_pos + header.size - found.position > max_bytes
            ):
                break
            end_pos = header.position + header.size
        data = segment.read_bytes(found.position, end_pos - found.position)
        aborted = _aborted(log, start_offset, bound) if _committed(isolation) else ()
        return FetchData(start_offset, data, aborted)
    return FetchData(start_offset, b"")


def _committed(isolation: IsolationLevel) -> bool:
    return isolation is IsolationLevel.READ_COMMITTED


def _aborted(log: Log, start: int, bound: int) -> tuple[AbortedTxn, ...]:
    """Aborted transactions overlapping [start, bound), collected across segments (Kafka's
    ``collectAbortedTransactions``: stop once a segment's search is complete)."""
    found: list[AbortedTxn] = []
    for segment in log.segments_from(start):
        txns, complete = segment.collect_aborted_txns(start, bound)
        found.extend(txns)
        if complete:
            break
    return tuple(found)


def visible_range(
    log: Log, start_offset: int | None, end_offset: int | None, isolation: IsolationLevel
) -> tuple[int, int]:
    """[start, stop) of a read: start defaults to the log start (and must be in range), stop is
    ``end_offset`` capped by the isolation level's bound (HW or LSO)."""
    start = log.log_start_offset if start_offset is None else start_offset
    check_offset(log, start)
    bound = upper_bound(log, isolation)
    return start, bound if end_offset is None else min(end_offset, bound)


def segment_starts(log: Log, start: int, stop: int) -> Iterator[tuple[LogSegment, BatchPosition]]:
    """Each segment a read of [start, stop) touches, with its first batch at or after ``start``."""
    for segment in log.segments_from(start):
        if segment.base_offset >= stop:
            return
        found = segment.translate_offset(start)
        if found is not None:
            yield segment, found


def iter_batches(
    log: Log,
    start_offset: int | None = None,
    end_offset: int | None = None,
    isolation: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
) -> Iterator[AnyBatch]:
    """Stored batches overlapping [start, min(end, bound)), control batches included."""
    start, stop = visible_range(log, start_offset, end_offset, isolation)
    for segment, found in segment_starts(log, start, stop):
        for batch in segment.batches(found.position):
            if batch.base_offset >= stop:
                return
            yield batch


def iter_records(
    log: Log,
    start_offset: int | None = None,
    end_offset: int | None = None,
    isolation: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
) -> Iterator[Record]:
    """Data records in [start, end) visible at ``isolation`` (the slow, per-record path)."""
    start, stop = visible_range(log, start_offset, end_offset, isolation)
    keep = batch_filter(log, start, stop, isolation)
    for batch in iter_batches(log, start, stop, isolation):
        if not keep(batch):
            continue
        for record in batch.records():
            if start <= record.offset < stop:
                yield record


def batch_filter(log: Log, start: int, stop: int, isolation: IsolationLevel) -> Any:
    """The predicate a reader applies per batch: drop control batches, and aborted data when
    reading committed."""
    if _committed(isolation):
        return AbortedTransactionFilter.of(list(_aborted(log, start, stop))).keep
    return lambda batch: not batch.is_control


def offset_for_timestamp(log: Log, timestamp: int) -> int | None:
    """The earliest offset whose timestamp is >= ``timestamp`` (Kafka's ListOffsets by time)."""
    for segment in log.segments:
        if segment.max_timestamp < timestamp and segment is not log.active_segment:
            continue
        found = segment.find_offset_by_timestamp(timestamp, log.log_start_offset)
        if found is not None:
            return found
    return None
