"""Transaction tracking during one cleaning (Kafka's ``CleanedTransactionMetadata``, §11.3).

Aborted transactions (from the ``.txnindex`` files, ordered by first offset) become "ongoing" once
the cleaner reaches their first offset. A data batch of an ongoing aborted transaction may be
discarded; a data batch of any other transactional producer marks a committed transaction as
seen. An ABORT marker is kept (and its entry re-added to the cleaned segment's txn index) while
some batch of its transaction was seen in this pass; a COMMIT marker while some batch of its
transaction was seen; otherwise the marker is discardable (delete horizon, then removal).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable

from kafkatier.storage.index.txn_index import AbortedTxn
from kafkatier.storage.record.batch import RecordBatch
from kafkatier.storage.record.legacy import LegacyBatch
from kafkatier.storage.wire import ControlType


class _AbortedTxnState:
    __slots__ = ("last_observed_batch_offset", "txn")

    def __init__(self, txn: AbortedTxn) -> None:
        self.txn = txn
        self.last_observed_batch_offset: int | None = None


class CleanedTransactionMetadata:
    """See module docstring; ``on_retained_abort`` receives the entries to re-index."""

    def __init__(
        self,
        aborted: Iterable[AbortedTxn] = (),
        on_retained_abort: Callable[[AbortedTxn], None] | None = None,
    ) -> None:
        self._queue: list[tuple[int, int, AbortedTxn]] = []
        self._seq = 0
        self.add_aborted(aborted)
        self.on_retained_abort = on_retained_abort
        self._ongoing_committed: set[int] = set()
        self._ongoing_aborted: dict[int, _AbortedTxnState] = {}

    def add_aborted(self, aborted: Iterable[AbortedTxn]) -> None:
        for txn in aborted:
            heapq.heappush(self._queue, (txn.first_offset, self._seq, txn))
            self._seq += 1

    def _consume_up_to(self, offset: int) -> None:
        while self._queue and self._queue[0][0] <= offset:
            txn = heapq.heappop(self._queue)[2]
            self._ongoing_aborted.setdefault(txn.producer_id, _AbortedTxnState(txn))

    def on_control_batch_read(self, batch: RecordBatch) -> bool:
        """True when the marker may be discarded (an already emptied marker always may)."""
        self._consume_up_to(batch.last_offset)
        control_type, _ = batch.control_record()
        pid = batch.producer_id
        if batch.records_count == 0:
            return True
        if control_type is ControlType.ABORT:
            state = self._ongoing_aborted.pop(pid, None)
            if state is not None and state.last_observed_batch_offset is not None:
                if self.on_retained_abort is not None:
                    self.on_retained_abort(state.txn)
                return False
            return True
        if control_type is ControlType.COMMIT:
            if pid in self._ongoing_committed:
                self._ongoing_committed.discard(pid)
                return False
            return True
        return False

    def on_batch_read(self, batch: RecordBatch | LegacyBatch) -> bool:
        """True when the data batch belongs to an aborted transaction (discardable)."""
        self._consume_up_to(batch.last_offset)
        if not batch.is_transactional:
            return False
        state = self._ongoing_aborted.get(batch.producer_id)
        if state is not None:
            state.last_observed_batch_offset = batch.last_offset
            return True
        self._ongoing_committed.add(batch.producer_id)
        return False
