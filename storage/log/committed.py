"""The sink's append of a committed transaction: one producer's data batches and the COMMIT
marker that ends them, placed in one pass where Kafka's checks pass with nothing to rewrite.

The sink appends to every partition of a micro-batch its transactional batches and their
marker (``Log.append_committed``, after its commit decision). They always continue the
producer's sequences at its current epoch, in the topic's codec, with nothing to rewrite, so the
leader's full checks (``validate_committed``: the append, then the marker, each with its
producer state) pass every time; what they cost is their generality: a dozen objects per batch.
:func:`place_committed` establishes the same with a few comparisons, assigns the offsets and
returns what the write and the producer state need (:class:`Placed`); where any condition does
not hold it returns None and the full checks decide (and name any fault). With the write it
allows (``Log._write_placed``), the sink's appends at 1,024 partitions went from 78 to 40-45 ms
a micro-batch (ad hoc phase timers in the Spark driver; the README has ``bench/scale_sink.py``'s
figures).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from kafkatier.storage import wire
from kafkatier.storage.log.append import AppendTarget, LogAppendInfo, set_offset
from kafkatier.storage.log.validator import assign_offset
from kafkatier.storage.producer.append import in_sequence
from kafkatier.storage.producer.entry import BatchMetadata
from kafkatier.storage.record.batch import RecordBatch

_KIND = wire.ATTR_TRANSACTIONAL | wire.ATTR_CONTROL  # a data batch's: ATTR_TRANSACTIONAL alone
_BELOW_ANY = -(1 << 64)  # below every int64 timestamp


class Placed(NamedTuple):
    """A committed transaction placed at the log end: its data batches (offsets and leader
    epoch assigned in place) and its marker, in write order, with what the write, the
    indexes and the producer state need."""

    batches: Sequence[RecordBatch]
    marker: memoryview
    marker_offset: int
    marker_timestamp: int
    coordinator_epoch: int
    size: int
    """The bytes of the batches and the marker."""
    records: int
    """The records of the batches and the marker."""
    max_timestamp_and_offset: tuple[int, int]
    """The largest timestamp and the last offset of the first batch holding it, as a segment's
    running maximum takes them batch by batch."""
    metas: list[BatchMetadata]
    """The producer's entry for each data batch (its last sequence, offset, delta, time)."""

    @property
    def buffers(self) -> list[memoryview]:
        return [*(b.buffer for b in self.batches), self.marker]

    def append_info(self) -> LogAppendInfo:
        first, count = self.batches[0].base_offset, len(self.batches) + 1
        best = self.max_timestamp_and_offset[0]
        return LogAppendInfo(first, self.marker_offset, best, count, self.records, 0)


def place_committed(
    batches: Sequence[RecordBatch],
    marker: bytes,
    marker_fields: tuple[int, int, int],
    coordinator_epoch: int,
    target: AppendTarget,
) -> Placed | None:
    """``batches`` and their COMMIT ``marker`` (``build_control_batch`` of ``marker_fields``:
    producer id, epoch, timestamp) placed at ``target``'s end where ``validate_committed``
    would pass with nothing to rewrite: the producer's entry at the batches' and the marker's
    epoch with no transaction open, sequences continuing its last one, no batch a retained
    one's duplicate, transactional data batches in the topic's codec within
    ``max.message.bytes`` and ``segment.bytes``, no ``LogAppendTime``. None where any of that
    does not hold (only offsets were set, which the full check sets again)."""
    producer_id, producer_epoch, timestamp = marker_fields
    rules = target.rules
    entry = target.state.producers.get(producer_id) if batches else None
    if (
        entry is None
        or rules.log_append_time
        or not entry.batch_metadata
        or entry.current_txn_first_offset is not None
        or entry.coordinator_epoch > coordinator_epoch
        or entry.producer_epoch != producer_epoch
    ):
        return None
    codec = rules.compression
    limit = min(rules.max_message_bytes, target.config.segment_bytes)
    retained = {m.last_seq for m in entry.batch_metadata}
    last_seq, offset = entry.batch_metadata[-1].last_seq, target.next_offset
    size, records, best = len(marker), 1, (_BELOW_ANY, -1)
    metas = []
    for batch in batches:
        last = batch.last_sequence
        if (
            batch.producer_id != producer_id
            or batch.producer_epoch != producer_epoch
            or batch.attributes & _KIND != wire.ATTR_TRANSACTIONAL
            or batch.size_in_bytes > limit
            or last in retained
            or not in_sequence(last_seq, batch.base_sequence)
            or (codec is not None and batch.attributes & wire.ATTR_CODEC_MASK != codec)
        ):
            return None
        set_offset(batch, offset, target)
        offset = batch.next_offset
        size += batch.size_in_bytes
        records += batch.records_count
        if batch.max_timestamp > best[0]:
            best = (batch.max_timestamp, offset - 1)
        metas.append(BatchMetadata(last, offset - 1, batch.last_offset_delta, batch.max_timestamp))
        last_seq = last
    if len(marker) > limit:
        return None
    own = bytearray(marker)
    assign_offset(own, offset, target.leader_epoch)
    if timestamp > best[0]:
        best = (timestamp, offset)
    return Placed(batches, memoryview(own), offset, timestamp, coordinator_epoch, size, records,
                  best, metas)  # fmt: skip
