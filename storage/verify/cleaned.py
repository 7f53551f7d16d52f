"""Facts a compacted partition's batches give, gathered during verify's replay: how far the
cleaner reached, and which batch (if any) still holds a given offset (``compaction``).

The cleaner (kafka-format.md §11.3) rewrites whole segments from the log start: a segment shows
it was rewritten when its batches leave offset gaps (dropped batches; also before its first batch
or after its last, or all of them: an emptied segment below the next one), hold fewer records
than offsets (removed records; emptied batches, §1.8), or carry a delete horizon (attribute
bit 6). Kafka's ``cleaner-offset-checkpoint`` gives the same
end directly, but a copied partition may lack it.
"""

from __future__ import annotations

import bisect
from array import array
from dataclasses import dataclass

from kafkatier.storage.errors import KafkaTierError
from kafkatier.storage.log.segment import AnyBatch
from kafkatier.storage.record.batch import RecordBatch
from kafkatier.storage.wire import ControlType

TXN, CONTROL, ABORT = 1, 2, 4


class CleanedSection:
    """The end of the compacted part of a partition: the ``cleaner-offset-checkpoint`` entry, or
    further where the batches themselves show the cleaner's work (a copied partition may lack the
    checkpoint): offset gaps, fewer records than offsets (emptied batches too), a delete horizon.
    A segment showing it was rewritten whole, so the section reaches that segment's end."""

    def __init__(self, checkpoint: int | None) -> None:
        self.checkpoint = checkpoint
        self.end = 0  # as far as the batches show
        self._segment: int | None = None
        self._marked = False
        self._next: int | None = None
        self._first = True

    def start_segment(self, base: int) -> None:
        emptied = self._segment is not None and self._first and self._segment < base
        if self._marked or emptied or (self._next is not None and self._next < base):
            self.end = max(self.end, base)  # batches dropped from the previous segment (its end)
        self._segment, self._marked, self._first = base, False, True

    def see(self, batch: AnyBatch) -> None:
        if isinstance(batch, RecordBatch):
            expected = self._segment if self._first else self._next
            if (
                (expected is not None and batch.base_offset > expected)
                or batch.records_count < batch.last_offset_delta + 1
                or batch.delete_horizon_ms is not None
            ):
                self._marked = True
        self._first = False
        self._next = batch.last_offset + 1

    def finish(self, log_end: int | None) -> int:
        """The cleaned end; a checkpoint beyond the log end is ignored, as Kafka resets it (and
        the log dir's check reports it)."""
        end = log_end if log_end is not None else self._next or 0
        if self._marked:
            self.end = max(self.end, end)
        if self.checkpoint is not None and self.checkpoint <= end:
            self.end = max(self.end, self.checkpoint)
        return self.end


@dataclass(frozen=True, slots=True)
class Span:
    """A batch still in the log: its offsets, producer and TXN/CONTROL/ABORT flags."""

    base: int
    last: int
    producer_id: int
    flags: int

    def describe(self) -> str:
        if self.flags & ABORT:
            kind = "an ABORT marker"
        else:
            kind = "a marker" if self.flags & CONTROL else "a batch"
        owner = f"producer {self.producer_id}" if self.producer_id >= 0 else "no producer"
        return f"{kind} of {owner} (offsets {self.base}..{self.last})"


class BatchMap:
    """Every batch replayed, 27 bytes each, to ask which batch (if any) still holds an offset
    and which producer epochs the log shows after a given offset."""

    def __init__(self) -> None:
        self.bases, self.lasts, self.pids = array("q"), array("q"), array("q")
        self.epochs = array("h")
        self.flags = bytearray()

    def add(self, batch: AnyBatch) -> None:
        flags = 0
        if isinstance(batch, RecordBatch):
            flags = (TXN if batch.is_transactional else 0) | (CONTROL if batch.is_control else 0)
            if batch.is_control and batch.records_count > 0 and _is_abort(batch):
                flags |= ABORT
        self.bases.append(batch.base_offset if batch.magic >= 2 else batch.last_offset)
        self.lasts.append(batch.last_offset)
        self.pids.append(batch.producer_id)
        self.epochs.append(batch.producer_epoch)
        self.flags.append(flags)

    def holding(self, offset: int) -> Span | None:
        i = bisect.bisect_left(self.lasts, offset)
        if i == len(self.lasts) or self.bases[i] > offset:
            return None
        return Span(self.bases[i], self.lasts[i], self.pids[i], self.flags[i])

    def has_abort_marker(self, producer_id: int, offset: int) -> bool:
        span = self.holding(offset)
        return span is not None and span.producer_id == producer_id and bool(span.flags & ABORT)

    def later_epochs(self, queries: set[tuple[int, int]]) -> dict[tuple[int, int], int]:
        """For each ``(offset, producer)``: the lowest epoch of that producer's batches (empty
        ones too) starting at or after ``offset``; absent when there are none. A producer's
        epoch never goes down within a log, so no earlier state may name a higher one."""
        found: dict[tuple[int, int], int] = {}
        pending = sorted(queries, reverse=True)
        lowest: dict[int, int] = {}
        watched = {pid for _, pid in queries}
        q = 0
        for i in range(len(self.bases) - 1, -2, -1):
            start = self.bases[i] if i >= 0 else -1
            while q < len(pending) and pending[q][0] > start:
                offset, pid = pending[q]
                if pid in lowest:
                    found[offset, pid] = lowest[pid]
                q += 1
            if i >= 0 and self.pids[i] in watched:
                pid = self.pids[i]
                lowest[pid] = min(lowest.get(pid, self.epochs[i]), self.epochs[i])
        return found


def _is_abort(batch: RecordBatch) -> bool:
    try:
        return batch.control_record()[0] is ControlType.ABORT
    except KafkaTierError:  # an unreadable control record is reported by the scan
        return False
