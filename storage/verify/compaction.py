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

from dataclasses import dataclass

from kafkatier.storage.index.txn_index import AbortedTxn
from kafkatier.storage.producer.snapshot import SnapshotEntry
from kafkatier.storage.verify.cleaned import CONTROL, TXN, BatchMap, Span


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
    later_epochs: dict[tuple[int, int], int]
    """(snapshot offset, producer) -> the lowest epoch of its batches from that offset on."""

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
        names = FIELDS if judge.complete else _known_from(got, want, judge.first_base)
        diffs = exact_diffs(got, want, names)
    else:
        diffs = _compacted_diffs(case, got, want, offset, judge)
    return f"producer {pid}: " + ", ".join(diffs) if diffs else None


def _known_from(got: SnapshotEntry, want: SnapshotEntry, first_base: int) -> tuple[str, ...]:
    """The fields a replay that starts at ``first_base`` with no snapshot there (local retention
    deleted the older segments; Kafka keeps no snapshot at the log start either) can know: not
    a transaction begun below it, nor a coordinator epoch from a marker below it."""
    unknown = set()
    if 0 <= got.current_txn_first_offset < first_base <= want.current_txn_first_offset:
        unknown.add("current_txn_first_offset")
    if want.coordinator_epoch == -1:
        unknown.add("coordinator_epoch")
    return tuple(name for name in FIELDS if name not in unknown)


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
    later = judge.later_epochs.get((offset, got.producer_id))
    if later is not None and got.producer_epoch > later:
        diffs.append(f"producer_epoch {got.producer_epoch} is above the epoch {later} of its "
                     f"batch at or after offset {offset}")  # fmt: skip
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
