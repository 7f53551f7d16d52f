"""Validation of one producer's appends before they reach the log (Kafka's ``ProducerAppendInfo``).

Nothing here touches disk; the state it produces is persisted by the manager as 46-byte
``wire.SNAPSHOT_ENTRY`` records in ``.snapshot`` files (kafka-format.md §7.1). The rules are those
of §7.4, in the pre-KIP-890 form Kafka applies to transaction versions 0/1 (a marker's epoch may
equal the producer's current epoch).
"""

from __future__ import annotations

import logging
from typing import Protocol

from kafkatier.storage.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from kafkatier.storage.producer.entry import (
    AppendOrigin,
    CompletedTxn,
    ProducerStateEntry,
)
from kafkatier.storage.wire import INT32_MAX, NO_PRODUCER_EPOCH, NO_SEQUENCE, ControlType

log = logging.getLogger(__name__)


class BatchLike(Protocol):
    """The header fields of a v2 record batch that producer state needs (``RecordBatch``).

    Declared as read-only properties so frozen dataclasses and property-based classes both fit.
    """

    @property
    def producer_id(self) -> int: ...
    @property
    def producer_epoch(self) -> int: ...
    @property
    def base_sequence(self) -> int: ...
    @property
    def last_sequence(self) -> int: ...
    @property
    def base_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def max_timestamp(self) -> int: ...
    @property
    def is_transactional(self) -> bool: ...
    @property
    def is_control(self) -> bool: ...
    @property
    def records_count(self) -> int: ...

    def control_record(self) -> tuple[ControlType, int]:
        """(control type, coordinatorEpoch) of a control batch's single record."""
        ...


def in_sequence(last_seq: int, next_seq: int) -> bool:
    """``next`` follows ``last``, including the wrap from INT32_MAX back to 0 (§14 item 13)."""
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class ProducerAppendInfo:
    """Checks a request's batches for one producer and accumulates the resulting state.

    Built by ``ProducerStateManager.prepare_update`` from the producer's stored entry; the stored
    entry is not mutated until ``ProducerStateManager.update`` merges :meth:`to_entry` back, so a
    rejected request leaves no trace.
    """

    def __init__(
        self, producer_id: int, current_entry: ProducerStateEntry, origin: AppendOrigin
    ) -> None:
        self.producer_id = producer_id
        self.origin = origin
        self._current = current_entry
        self._updated = current_entry.without_batches()
        self._updated.producer_id = producer_id
        self._started: list[int] = []

    def __repr__(self) -> str:
        return (
            f"ProducerAppendInfo(producer_id={self.producer_id}, origin={self.origin.name}, "
            f"entry={self._updated!r}, started_transactions={self._started})"
        )

    def to_entry(self) -> ProducerStateEntry:
        return self._updated

    @property
    def started_transactions(self) -> list[int]:
        """First offsets of the transactions opened by this request, in append order."""
        return list(self._started)

    def append(self, batch: BatchLike) -> CompletedTxn | None:
        """Validate and record one batch; a COMMIT/ABORT marker may complete a transaction."""
        if not batch.is_control:
            self.append_data_batch(
                batch.producer_epoch,
                batch.base_sequence,
                batch.last_sequence,
                batch.max_timestamp,
                batch.base_offset,
                batch.last_offset,
                batch.is_transactional,
            )
            return None
        if batch.records_count == 0:
            return None  # the cleaner removed the marker: the transaction is already gone
        control_type, coordinator_epoch = batch.control_record()
        # A marker batch holds one record whose timestamp is the batch's max timestamp.
        return self.append_end_txn_marker(
            control_type,
            batch.producer_epoch,
            coordinator_epoch,
            batch.base_offset,
            batch.max_timestamp,
        )

    def append_data_batch(
        self,
        epoch: int,
        first_seq: int,
        last_seq: int,
        last_timestamp: int,
        first_offset: int,
        last_offset: int,
        is_transactional: bool,
    ) -> None:
        self._check_producer_epoch(epoch, first_offset)
        if self.origin is AppendOrigin.CLIENT:
            self._check_sequence(epoch, first_seq, first_offset)
        self._updated.add_batch(
            epoch, last_seq, last_offset, last_offset - first_offset, last_timestamp
        )
        open_txn = self._updated.current_txn_first_offset
        if open_txn is not None and not is_transactional:
            raise InvalidTxnStateError(
                "non-transactional batch while a transaction is open",
                producer_id=self.producer_id,
                offset=first_offset,
                txn_first_offset=open_txn,
            )
        if open_txn is None and is_transactional:
            self._updated.current_txn_first_offset = first_offset
            self._started.append(first_offset)

    def append_end_txn_marker(
        self,
        control_type: ControlType,
        producer_epoch: int,
        coordinator_epoch: int,
        marker_offset: int,
        timestamp: int,
    ) -> CompletedTxn | None:
        """Close the open transaction, if any; a marker for an empty txn completes nothing."""
        if control_type not in (ControlType.COMMIT, ControlType.ABORT):
            raise InvalidRecordError(
                f"control record type {control_type!r} is not a transaction marker",
                producer_id=self.producer_id,
                offset=marker_offset,
            )
        self._check_producer_epoch(producer_epoch, marker_offset)
        self._check_coordinator_epoch(coordinator_epoch, marker_offset)
        open_txn = self._updated.current_txn_first_offset
        completed = None
        if open_txn is not None:
            completed = CompletedTxn(
                self.producer_id, open_txn, marker_offset, control_type is ControlType.ABORT
            )
        self._updated.end_txn(producer_epoch, coordinator_epoch, timestamp)
        return completed

    def _check_producer_epoch(self, producer_epoch: int, offset: int) -> None:
        current = self._updated.producer_epoch
        if producer_epoch >= current:
            return
        message = f"producer epoch {producer_epoch} is older than the current epoch {current}"
        if self.origin is AppendOrigin.REPLICATION:
            log.warning("%s (producer_id=%s, offset=%s)", message, self.producer_id, offset)
            return
        raise InvalidProducerEpochError(
            message, producer_id=self.producer_id, offset=offset, epoch=producer_epoch
        )

    def _check_sequence(self, producer_epoch: int, first_seq: int, offset: int) -> None:
        stored_epoch = self._updated.producer_epoch
        if producer_epoch != stored_epoch:
            if first_seq != 0 and stored_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"new epoch {producer_epoch} (was {stored_epoch}) must start at sequence 0, "
                    f"got {first_seq}",
                    producer_id=self.producer_id,
                    offset=offset,
                )
            return
        if not self._updated.is_empty:
            last_seq = self._updated.last_seq
        elif producer_epoch == self._current.producer_epoch:
            last_seq = self._current.last_seq
        else:
            last_seq = NO_SEQUENCE
        # A producer whose every batch was removed (retention, DeleteRecords) has no epoch left:
        # it may resume with any sequence.
        if self._current.producer_epoch == NO_PRODUCER_EPOCH or in_sequence(last_seq, first_seq):
            return
        raise OutOfOrderSequenceError(
            f"sequence {first_seq} does not follow the last sequence {last_seq}",
            producer_id=self.producer_id,
            offset=offset,
        )

    def _check_coordinator_epoch(self, coordinator_epoch: int, offset: int) -> None:
        current = self._updated.coordinator_epoch
        if current <= coordinator_epoch:
            return
        message = f"coordinator epoch {coordinator_epoch} is older than {current}"
        if self.origin is AppendOrigin.REPLICATION:
            log.info("%s (producer_id=%s, offset=%s)", message, self.producer_id, offset)
            return
        raise TransactionCoordinatorFencedError(
            message, producer_id=self.producer_id, offset=offset
        )
