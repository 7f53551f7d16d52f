"""One producer's idempotence/transaction state (Kafka's ``BatchMetadata``, ``ProducerStateEntry``).

Persisted form: one ``wire.SNAPSHOT_ENTRY`` per producer in a ``.snapshot`` file (see
:class:`kafkatier.storage.producer.snapshot.SnapshotEntry`), holding only the **last** retained
batch (kafka-format.md §7.1, §14 item 11).
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from kafkatier.storage.producer.snapshot import SnapshotEntry
from kafkatier.storage.wire import NO_PRODUCER_EPOCH, NO_SEQUENCE, NO_TIMESTAMP, decrement_sequence

NUM_BATCHES_TO_RETAIN = 5  # ProducerStateEntry.NUM_BATCHES_TO_RETAIN: the duplicate window


class AppendOrigin(enum.Enum):
    """Who is appending, which decides how much is validated (Kafka's ``AppendOrigin``).

    CLIENT: full epoch and sequence checks. COORDINATOR: epoch checks only (its batches carry no
    sequences). REPLICATION: already validated by the leader, so an old epoch is only logged.
    """

    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"


class BatchMetadata(NamedTuple):
    """What is remembered of one appended batch: enough to recognise a retried duplicate.

    On disk only the newest one survives, as (lastSequence, lastOffset, offsetDelta, timestamp)
    inside a 46-byte snapshot entry. A tuple: one is built per batch appended.
    """

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


class CompletedTxn(NamedTuple):
    """A transaction ended by a marker: ``last_offset`` is the marker's offset (§6)."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


def _batch_window() -> deque[BatchMetadata]:
    return deque(maxlen=NUM_BATCHES_TO_RETAIN)


@dataclass
class ProducerStateEntry:
    """A producer's epoch, last <= 5 batches (oldest first), coordinator epoch and open txn.

    Snapshot form (46 bytes, ``wire.SNAPSHOT_ENTRY``): producerId, epoch, lastSeq, lastDataOffset,
    lastOffsetDelta, lastTimestamp, coordinatorEpoch, currentTxnFirstOffset (-1 when None). Only
    the newest batch is persisted, so a reloaded entry has at most one batch.
    """

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batch_metadata: deque[BatchMetadata] = field(default_factory=_batch_window)
    coordinator_epoch: int = -1
    last_timestamp: int = NO_TIMESTAMP
    current_txn_first_offset: int | None = None

    def __post_init__(self) -> None:
        if self.batch_metadata.maxlen != NUM_BATCHES_TO_RETAIN:
            # Keep only the newest five, as the deque bound does on every later append.
            self.batch_metadata = deque(self.batch_metadata, maxlen=NUM_BATCHES_TO_RETAIN)

    @property
    def is_empty(self) -> bool:
        return not self.batch_metadata

    @property
    def first_seq(self) -> int:
        return self.batch_metadata[0].first_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batch_metadata[-1].last_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def first_data_offset(self) -> int:
        return self.batch_metadata[0].first_offset if self.batch_metadata else -1

    @property
    def last_data_offset(self) -> int:
        return self.batch_metadata[-1].last_offset if self.batch_metadata else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batch_metadata[-1].offset_delta if self.batch_metadata else 0

    def without_batches(self) -> ProducerStateEntry:
        """A copy to accumulate one request's appends into (``withProducerIdAndBatchMetadata``)."""
        return ProducerStateEntry(
            self.producer_id,
            self.producer_epoch,
            coordinator_epoch=self.coordinator_epoch,
            last_timestamp=self.last_timestamp,
            current_txn_first_offset=self.current_txn_first_offset,
        )

    def maybe_update_producer_epoch(self, producer_epoch: int) -> bool:
        """A new epoch forgets the old epoch's batches, so its sequences restart at 0."""
        if self.producer_epoch == producer_epoch:
            return False
        self.batch_metadata.clear()
        self.producer_epoch = producer_epoch
        return True

    def add_batch(
        self,
        producer_epoch: int,
        last_seq: int,
        last_offset: int,
        offset_delta: int,
        timestamp: int,
    ) -> None:
        self.maybe_update_producer_epoch(producer_epoch)
        self.batch_metadata.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def end_txn(self, producer_epoch: int, coordinator_epoch: int, timestamp: int) -> None:
        """Apply a COMMIT/ABORT marker: the txn closes and the marker's epoch becomes current."""
        self._update(producer_epoch, coordinator_epoch, timestamp, (), None)

    def add_committed(
        self, batches: Iterable[BatchMetadata], coordinator_epoch: int, timestamp: int
    ) -> None:
        """Apply a transaction's data ``batches`` and its COMMIT marker (``coordinator_epoch``,
        ``timestamp``), appended together at this entry's epoch with no transaction open (the
        caller checked them: ``place_committed``): the batches retained, no transaction open."""
        self._update(self.producer_epoch, coordinator_epoch, timestamp, batches, None)

    def update(self, next_entry: ProducerStateEntry) -> None:
        """Merge the entry a ProducerAppendInfo accumulated into this stored one."""
        self._update(
            next_entry.producer_epoch,
            next_entry.coordinator_epoch,
            next_entry.last_timestamp,
            next_entry.batch_metadata,
            next_entry.current_txn_first_offset,
        )

    def _update(
        self,
        producer_epoch: int,
        coordinator_epoch: int,
        last_timestamp: int,
        batches: Iterable[BatchMetadata],
        current_txn_first_offset: int | None,
    ) -> None:
        self.maybe_update_producer_epoch(producer_epoch)
        self.batch_metadata.extend(batches)
        self.coordinator_epoch = coordinator_epoch
        self.current_txn_first_offset = current_txn_first_offset
        self.last_timestamp = last_timestamp

    def find_duplicate_batch(
        self, epoch: int, first_seq: int, last_seq: int
    ) -> BatchMetadata | None:
        """The retained batch with exactly this sequence range in the current epoch, if any."""
        if epoch != self.producer_epoch:
            return None
        for batch in self.batch_metadata:
            if batch.last_seq == last_seq and batch.first_seq == first_seq:
                return batch
        return None

    def to_snapshot_entry(self) -> SnapshotEntry:
        return SnapshotEntry(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            last_sequence=self.last_seq,
            last_offset=self.last_data_offset,
            offset_delta=self.last_offset_delta,
            timestamp=self.last_timestamp,
            coordinator_epoch=self.coordinator_epoch,
            current_txn_first_offset=(
                -1 if self.current_txn_first_offset is None else self.current_txn_first_offset
            ),
        )

    @classmethod
    def from_snapshot_entry(cls, entry: SnapshotEntry) -> ProducerStateEntry:
        """Rebuild as Kafka does: a batch only if lastOffset >= 0, stamped with lastTimestamp."""
        batches = _batch_window()
        if entry.last_offset >= 0:
            batches.append(
                BatchMetadata(
                    entry.last_sequence, entry.last_offset, entry.offset_delta, entry.timestamp
                )
            )
        return cls(
            producer_id=entry.producer_id,
            producer_epoch=entry.producer_epoch,
            batch_metadata=batches,
            coordinator_epoch=entry.coordinator_epoch,
            last_timestamp=entry.timestamp,
            current_txn_first_offset=(
                entry.current_txn_first_offset if entry.current_txn_first_offset >= 0 else None
            ),
        )
