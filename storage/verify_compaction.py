"""What verify may still demand of producer snapshots and transaction indexes once compaction ran.

Kafka's LogCleaner (kafka-format.md §11.3-§11.4) rewrites ``[log start, cleaned end)`` but leaves
the ``.snapshot`` files as they were, and copies a retained ABORT marker's ``.txnindex`` entry
unchanged, while it drops batches (superseded records, aborted data, expired markers) and rebuilds
others with fewer records and a recomputed max timestamp. A snapshot or entry derived from a batch
in the cleaned section can therefore name batches that are gone; what stays true is what every
batch the cleaner keeps (same offsets, producer, epoch and sequences) and Kafka's invariants imply:
producer state only moves forward, a snapshot describes only offsets below its own, an entry's
ABORT marker and its transaction's open state survive as long as any of its data does. Values
derived from batches at or above the cleaned end were not touched and are compared exactly.
"""

from __future__ import annotations

import bisect
from array import array
from dataclasses import dataclass

from kafkatier.storage.errors import KafkaTierError
from kafkatier.storage.producer_snapshot import SnapshotEntry
from kafkatier.storage.records import RecordBatch
from kafkatier.storage.segment import AnyBatch
from kafkatier.storage.txn_index import AbortedTxn
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
        if self._marked or (self._next is not None and self._next < base):
            self.end = max(self.end, base)  # batches dropped from the previous segment's end
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
    """Every batch replayed, 25 bytes each, to ask which batch (if any) still holds an offset."""

    def __init__(self) -> None:
        self.bases, self.lasts, self.pids = array("q"), array("q"), array("q")
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
        self.flags.append(flags)

    def holding(self, offset: int) -> Span | None:
        i = bisect.bisect_left(self.lasts, offset)
        if i == len(self.lasts) or self.bases[i] > offset:
            return None
        return Span(self.bases[i], self.lasts[i], self.pids[i], self.flags[i])

    def has_abort_marker(self, producer_id: int, offset: int) -> bool:
        span = self.holding(offset)
        return span is not None and span.producer_id == producer_id and bool(span.flags & ABORT)


def _is_abort(batch: RecordBatch) -> bool:
    try:
        return batch.control_record()[0] is ControlType.ABORT
    except KafkaTierError:  # an unreadable control record is reported by the scan
        return False


@dataclass(frozen=True, slots=True)
class EntryCase:
    """A snapshot entry (``got``, at index ``i``) and the replay's state (``want``) that differ,
    with the batches the log still holds at the entry's last offset and transaction start."""

    i: int | None
    got: SnapshotEntry | None
    want: SnapshotEntry | None
    at_last: Span | None
    at_txn: Span | None


@dataclass(frozen=True, slots=True)
class Judge:
    """The facts a deferred comparison is judged by, known once the whole partition is read."""

    cleaned_end: int
    first_base: int
    complete: bool
    final_epochs: dict[int, int]

    def untouched(self, offset: int) -> bool:
        return offset >= self.cleaned_end


FIELDS = ("producer_epoch", "last_sequence", "last_offset", "offset_delta", "timestamp",
          "coordinator_epoch", "current_txn_first_offset")  # fmt: skip


def exact_diffs(got: SnapshotEntry, want: SnapshotEntry, names: tuple[str, ...]) -> list[str]:
    return [
        f"{name} {getattr(got, name)} (the log says {getattr(want, name)})"
        for name in names
        if getattr(got, name) != getattr(want, name)
    ]


def judge_entry(case: EntryCase, offset: int, judge: Judge) -> str | None:
    """The problem with one snapshot entry, None if Kafka could have written it."""
    got, want = case.got, case.want
    if got is None:
        assert want is not None
        if want.current_txn_first_offset < 0:
            return None  # it may have expired
        return (f"producer {want.producer_id} is missing although its transaction from offset "
                f"{want.current_txn_first_offset} is open")  # fmt: skip
    pid = got.producer_id
    if judge.cleaned_end <= judge.first_base:  # nothing compacted: the replay is the truth
        if want is None:
            if judge.complete or got.last_offset >= judge.first_base:
                return f"producer {pid} has no batch in the log below offset {offset}"
            return None
        diffs = exact_diffs(got, want, FIELDS)
    else:
        diffs = _compacted_diffs(case, got, want, offset, judge)
    return f"producer {pid}: " + ", ".join(diffs) if diffs else None


def _compacted_diffs(
    case: EntryCase, got: SnapshotEntry, want: SnapshotEntry | None, offset: int, judge: Judge
) -> list[str]:
    last = got.last_offset
    if judge.untouched(last):  # its last batch is as written: so is all it derives from
        if want is None:
            return [f"no batch in the log below offset {offset}, though its last batch at {last} "
                    "is above the compacted section"]  # fmt: skip
        exact = exact_diffs(got, want, FIELDS[:5])
        return exact + _ordering_diffs(got, want, judge, ("coordinator_epoch",), check_txn=True)
    diffs: list[str] = []
    if last >= offset:
        diffs.append(f"last_offset {last} is not below the snapshot's offset {offset}")
    elif (
        last >= judge.first_base
        and case.at_last is not None
        and not (
            case.at_last.producer_id == got.producer_id
            and case.at_last.last == last
            and not case.at_last.flags & CONTROL
        )
    ):
        diffs.append(f"last_offset {last}, but the log holds that offset in "
                     f"{case.at_last.describe()}")  # fmt: skip
    final = judge.final_epochs.get(got.producer_id)
    if final is not None and got.producer_epoch > final:
        diffs.append(f"producer_epoch {got.producer_epoch} is above the epoch {final} the log "
                     "gives the producer later")  # fmt: skip
    diffs += _txn_start_diffs(case, got, judge)
    if want is None:
        return diffs
    if last >= 0 and want.last_offset > last:
        diffs.append(f"last_offset {last}, but the log has its later batch ending at "
                     f"{want.last_offset}")  # fmt: skip
    elif last >= 0 and want.last_offset == last:  # the same batch: same sequences
        diffs += exact_diffs(got, want, ("last_sequence", "offset_delta"))
    epochs = ("producer_epoch", "coordinator_epoch")
    return diffs + _ordering_diffs(got, want, judge, epochs, check_txn=False)


def _ordering_diffs(
    got: SnapshotEntry,
    want: SnapshotEntry,
    judge: Judge,
    epochs: tuple[str, ...],
    *,
    check_txn: bool,
) -> list[str]:
    """What may only have moved forward between the replay's state (built from fewer batches)
    and the snapshot's: epochs, and the start of a transaction the replay still sees open."""
    diffs = []
    for name in epochs:
        if getattr(want, name) > getattr(got, name):
            diffs.append(f"{name} {getattr(got, name)} is below the {getattr(want, name)} the "
                         "log gives")  # fmt: skip
    first, replayed = got.current_txn_first_offset, want.current_txn_first_offset
    if first >= 0 and judge.untouched(first):
        if first != replayed:
            diffs.append(f"current_txn_first_offset {first} (the log says {replayed})")
    elif replayed >= 0 and not 0 <= first <= replayed:
        diffs.append(f"current_txn_first_offset {first}, but the log has its transaction open "
                     f"from {replayed}")  # fmt: skip
    elif check_txn and first >= 0 and replayed < 0:
        diffs.append(f"current_txn_first_offset {first}, but the log has no open transaction "
                     "of this producer after its last batch")  # fmt: skip
    return diffs


def _txn_start_diffs(case: EntryCase, got: SnapshotEntry, judge: Judge) -> list[str]:
    first = got.current_txn_first_offset
    span = case.at_txn
    if first < judge.first_base or span is None:
        return []
    if (
        span.producer_id == got.producer_id
        and span.base == first
        and span.flags & TXN
        and not (span.flags & CONTROL)
    ):
        return []
    return [f"current_txn_first_offset {first}, but the log holds that offset in "
            f"{span.describe()}"]  # fmt: skip


def judge_txn(
    txn: AbortedTxn,
    want: AbortedTxn | None,
    segment: tuple[int, int],
    judge: Judge,
    batches: BatchMap,
) -> str | None:
    """The problem with one ``.txnindex`` entry of the segment spanning offsets
    ``[base, end)`` (paired with the replay's by producer and marker offset), None if Kafka
    could have written it."""
    base, end = segment
    if want == txn or (want is None and not judge.complete and txn.first_offset < base):
        return None  # as expected, or begun before the log start: unknowable
    if want is None:
        if judge.untouched(txn.first_offset):
            return f"entry {txn_text(txn)} matches no aborted transaction in the log"
        return _marker_problem(txn, end, batches)  # its data may all have been compacted away
    if _not_before(txn.first_offset, want.first_offset, judge) and _not_before(
        txn.last_stable_offset, want.last_stable_offset, judge
    ):
        return None
    if judge.untouched(txn.first_offset) and judge.untouched(txn.last_stable_offset):
        return f"entry {txn_text(txn)} differs from the replay, which gives {txn_text(want)}"
    return (f"entry {txn_text(txn)} is not consistent with the replay, which gives "
            f"{txn_text(want)} (compaction only removes the transaction's first batches and "
            "the LSO's earlier transactions)")  # fmt: skip


def _not_before(stored: int, replayed: int, judge: Judge) -> bool:
    """A transaction's first offset, or an LSO (the first offset of the earliest other open
    transaction), as stored against the replay's: equal where the batch it names is untouched;
    in the compacted section that batch may be gone, so the replay's may only be later."""
    return stored == replayed if judge.untouched(stored) else stored <= replayed


def _marker_problem(txn: AbortedTxn, end: int, batches: BatchMap) -> str | None:
    if txn.last_offset >= end:
        return (f"entry {txn_text(txn)} names an ABORT marker beyond this segment, which ends "
                f"before offset {end}")  # fmt: skip
    if batches.has_abort_marker(txn.producer_id, txn.last_offset):
        return None
    span = batches.holding(txn.last_offset)
    held = "no batch" if span is None else span.describe()
    return (f"entry {txn_text(txn)} names an ABORT marker at {txn.last_offset}, but the log "
            f"holds {held} there")  # fmt: skip


def txn_text(txn: AbortedTxn) -> str:
    return (
        f"(producer {txn.producer_id}, first {txn.first_offset}, last {txn.last_offset}, "
        f"LSO {txn.last_stable_offset})"
    )
