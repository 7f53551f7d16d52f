"""What Kafka derives from a partition's batches, recomputed and compared with the files that
persist it: ``.snapshot`` producer state (kafka-format.md §7), ``.txnindex`` aborted transactions
(§6) and the ``leader-epoch-checkpoint`` (§8.3).

The replay is Kafka's own (``ProducerStateManager`` fed batch by batch, as
``storage.log.loader.replay_batch`` does at recovery), started from empty state at offset 0, or
from the
snapshot at the first segment's base offset when earlier segments are gone (retention), since
producer state outlives the batches that built it. Where compaction rewrote the log, what the
files may still be asked to agree with is decided in ``compaction``. The leader-epoch
checks (:class:`EpochCheck`, :func:`read_epoch_checkpoint`) are in ``epochs``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from kafkatier.storage.errors import CorruptSnapshotError, InvalidRecordError, ProducerStateError
from kafkatier.storage.index.txn_index import AbortedTxn
from kafkatier.storage.log.segment import AnyBatch
from kafkatier.storage.producer.entry import AppendOrigin, ProducerStateEntry
from kafkatier.storage.producer.snapshot import SnapshotEntry, read_snapshot
from kafkatier.storage.producer.state import ProducerStateManager
from kafkatier.storage.record.batch import RecordBatch
from kafkatier.storage.verify.cleaned import BatchMap, CleanedSection
from kafkatier.storage.verify.compaction import EntryCase, Judge, judge_entry, judge_txn, txn_text
from kafkatier.storage.verify.problem import Findings
from kafkatier.storage.wire import SNAPSHOT_ENTRY, SNAPSHOT_HEADER

__all__ = ["StateReplay"]

_TxnIndexCheck = tuple[tuple[int, int], Path, list[AbortedTxn], list[AbortedTxn]]
"""A segment's offset range, its ``.txnindex``, the entries stored and those the replay gives."""


class StateReplay:
    """Producer state replayed over a partition's batches; its state at each snapshot's offset and
    the aborted transactions it completes per segment are compared with the files once the whole
    partition is read, when it is known how far compaction reached (``compaction``)."""

    def __init__(
        self,
        directory: Path,
        snapshots: dict[int, Path],
        first_base: int,
        found: Findings,
        cleaner_checkpoint: int | None = None,
    ) -> None:
        self.manager = ProducerStateManager(directory)
        self.found = found
        self.first_base = first_base
        self.pending = sorted(snapshots.items())
        self.aborted: dict[int, list[AbortedTxn]] = {}
        self.markers: dict[int, int] = {}  # producer -> offset of its last marker replayed
        self.segment_base = first_base
        self.complete = first_base == 0 or self._start_from_snapshot(snapshots.get(first_base))
        self.lost: str | None = None  # set once a missing file makes the state unknown
        self.section = CleanedSection(cleaner_checkpoint)
        self.batches = BatchMap()
        self.snapshot_cases: list[tuple[int, Path, list[EntryCase]]] = []
        self.txn_indexes: list[_TxnIndexCheck] = []

    def _start_from_snapshot(self, path: Path | None) -> bool:
        if path is None:
            return False
        try:
            entries = read_snapshot(path)
        except CorruptSnapshotError:
            return False  # reported when its turn comes
        for entry in entries:
            self.manager.load_producer_entry(ProducerStateEntry.from_snapshot_entry(entry))
        self.manager.update_map_end_offset(self.first_base)
        return True

    def lose_state(self, cause: str) -> None:
        """Batches are missing from here on (a missing ``.log``): later comparisons are skipped."""
        self.lost = self.lost or cause

    def start_segment(self, base: int) -> None:
        self.segment_base = base
        self.section.start_segment(base)

    def apply(self, batch: AnyBatch) -> None:
        self._compare_due(batch.last_offset if batch.magic < 2 else batch.base_offset)
        self.section.see(batch)
        self.batches.add(batch)
        if isinstance(batch, RecordBatch) and batch.has_producer_id:
            try:
                self._apply_producer_batch(batch)
            except (ProducerStateError, InvalidRecordError) as exc:
                self.found.add(
                    batch.file,
                    batch.position,
                    f"producer state replay fails here: {exc.message}",
                    offset=batch.base_offset,
                )
                self.lose_state(str(batch.file))  # what follows would only repeat the failure
        self.manager.update_map_end_offset(batch.last_offset + 1)

    def _apply_producer_batch(self, batch: RecordBatch) -> None:
        manager = self.manager
        info = manager.prepare_update(batch.producer_id, AppendOrigin.REPLICATION)
        completed = info.append(batch)
        manager.update(info)
        if batch.is_control and batch.records_count:
            self.markers[batch.producer_id] = batch.base_offset
        if completed is None:
            return
        if completed.is_aborted:
            txn = AbortedTxn(
                completed.producer_id,
                completed.first_offset,
                completed.last_offset,
                manager.last_stable_offset(completed),
            )
            self.aborted.setdefault(self.segment_base, []).append(txn)
        manager.complete_txn(completed)

    def _compare_due(self, next_offset: int) -> None:
        while self.pending and self.pending[0][0] <= next_offset:
            self._compare(*self.pending.pop(0))

    def finish(self, log_end: int | None) -> None:
        """Compare the snapshots at the log end and report those beyond it; then judge every
        comparison kept, now that it is known how far compaction reached."""
        if log_end is not None:
            self._compare_due(log_end)
            for offset, path in self.pending:
                if self.lost is None:
                    self.found.add(
                        path,
                        None,
                        f"snapshot at offset {offset} is beyond the log end "
                        f"offset {log_end} (Kafka deletes it at startup)",
                        offset=offset,
                    )
        judge = Judge(
            self.section.finish(log_end),
            self.first_base,
            self.complete,
            self.batches.later_epochs(self._epoch_questions()),
        )
        for offset, path, cases in self.snapshot_cases:
            for case in cases:
                message = judge_entry(case, offset, judge)
                if message is not None:
                    position = None if case.i is None else _entry_position(case.i)
                    self.found.add(path, position, message, offset=offset)
        for segment, path, stored, expected in self.txn_indexes:
            self._judge_txn_index(segment, path, stored, expected, judge)

    def _epoch_questions(self) -> set[tuple[int, int]]:
        return {
            (offset, case.got.producer_id)
            for offset, _, cases in self.snapshot_cases
            for case in cases
            if case.got is not None
        }

    def _compare(self, offset: int, path: Path) -> None:
        """Keep the entries that differ from the replay's state here, to be judged at the end."""
        try:
            entries = read_snapshot(path)
        except CorruptSnapshotError as exc:
            self.found.add(path, exc.context.get("position"), exc.message, offset=offset)
            return
        if self.lost is not None or offset < self.first_base:
            return
        stored: dict[int, tuple[int, SnapshotEntry]] = {}
        for i, entry in enumerate(entries):
            if entry.producer_id in stored:
                self.found.add(path, _entry_position(i),
                               f"producer {entry.producer_id} appears twice")  # fmt: skip
            stored[entry.producer_id] = (i, entry)
        producers = self.manager.producers
        cases = [
            EntryCase(None, None, state.to_snapshot_entry(), None, None)
            for pid, state in producers.items()
            if pid not in stored
        ]
        for pid, (i, entry) in stored.items():
            want = producers[pid].to_snapshot_entry() if pid in producers else None
            if want is not None and self._maybe_expired_since_marker(entry, want):
                want = dataclasses.replace(want, coordinator_epoch=-1)
            if want != entry:
                at_last = self.batches.holding(entry.last_offset)
                at_txn = self.batches.holding(entry.current_txn_first_offset)
                cases.append(EntryCase(i, entry, want, at_last, at_txn))
        if cases:
            self.snapshot_cases.append((offset, path, cases))

    def _maybe_expired_since_marker(self, got: SnapshotEntry, want: SnapshotEntry) -> bool:
        """Kafka drops idle producers without an open txn (at load, §7.1; periodically, §7.4),
        a wall-clock expiry the replay cannot see: one resumed by a data batch after its last
        marker has a fresh entry, coordinator epoch -1 until its next marker."""
        if got.coordinator_epoch != -1 or want.coordinator_epoch < 0:
            return False
        marker = self.markers.get(got.producer_id, self.first_base - 1)  # or in the snapshot
        return want.last_offset > marker

    def check_txn_index(self, base: int, path: Path, stored: list[AbortedTxn]) -> None:
        """Keep the segment's ``.txnindex`` entries and the aborted transactions whose ABORT
        marker the replay met in this segment, to be compared at the end."""
        if self.lost is not None:
            return
        expected = self.aborted.get(base, [])
        end = self.batches.lasts[-1] + 1 if self.batches.lasts else base
        if stored or expected:
            self.txn_indexes.append(((base, max(base, end)), path, stored, expected))

    def _judge_txn_index(
        self,
        segment: tuple[int, int],
        path: Path,
        stored: list[AbortedTxn],
        expected_txns: list[AbortedTxn],
        judge: Judge,
    ) -> None:
        """The index must list exactly the aborted transactions the replay completed in this
        segment, with the LSO Kafka computed then. Entries are paired by producer and marker
        offset, so a wrong field is one problem."""
        expected = {(t.producer_id, t.last_offset): t for t in expected_txns}
        for i, txn in enumerate(stored):
            want = expected.pop((txn.producer_id, txn.last_offset), None)
            message = judge_txn(txn, want, segment, judge, self.batches)
            if message is not None:
                self.found.add(path, i * AbortedTxn.SIZE, message, offset=txn.last_offset)
        for txn in expected.values():
            self.found.add(path, None, f"aborted transaction {txn_text(txn)} is missing",
                           offset=txn.last_offset)  # fmt: skip


def _entry_position(i: int) -> int:
    return SNAPSHOT_HEADER.size + i * SNAPSHOT_ENTRY.size
