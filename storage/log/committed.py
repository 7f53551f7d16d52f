"""The sink's append of a committed transaction: one producer's data batches and the COMMIT
marker that ends them, checked, placed and written in one pass where Kafka's checks pass with
nothing to rewrite and nothing but the write is due.

The sink appends to every partition of a micro-batch its transactional batches and their
marker (``Log.append_committed``, after its commit decision). They always continue the
producer's sequences at its current epoch, in the topic's codec, with nothing to rewrite, so the
leader's full checks (``validate_committed``: the append, then the marker, each with its
producer state) pass every time; what they cost is their generality: a dozen objects per batch
and as many calls. :func:`write_committed` establishes the same with a few comparisons, and
where no roll and no new leader epoch is due it assigns the offsets, writes the batches and the
marker with one ``pwritev`` and updates the producer's entry in place; where any condition
does not hold it returns None, having changed nothing but the batches' offsets (which the full
path assigns again), and the full checks decide (and name any fault). The driver's appends at
1,024 partitions went from 78 to 40-45 ms a micro-batch when the per-batch objects went (ad hoc
phase timers in the Spark driver, stop 35); joining the placing and the writing into this one
function saved little more (68 to 65 us a partition, an ad hoc plain-process micro). The README
has ``bench/scale_sink.py``'s figures.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from kafkatier.storage import wire
from kafkatier.storage.checkpoint.leader_epoch import LeaderEpochFileCache
from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.log.append import LogAppendInfo
from kafkatier.storage.log.batch_position import BatchInfo
from kafkatier.storage.log.queued_writes import QueuedWrites
from kafkatier.storage.log.roll import time_rolls
from kafkatier.storage.log.segment import LogSegment
from kafkatier.storage.log.validator import AppendRules, assign_offset
from kafkatier.storage.producer.append import in_sequence
from kafkatier.storage.producer.entry import BatchMetadata, ProducerStateEntry
from kafkatier.storage.producer.state import ProducerStateManager
from kafkatier.storage.record.batch import RecordBatch

_KIND = wire.ATTR_TRANSACTIONAL | wire.ATTR_CONTROL  # a data batch's: ATTR_TRANSACTIONAL alone
_new = tuple.__new__  # a NamedTuple from its fields' tuple, without its Python __new__ (0.16 us
# against 0.34, timeit: five a partition)


class CommittedLog(Protocol):
    """What :func:`write_committed` reads and changes of a ``Log``."""

    segments: list[LogSegment]
    producer_state: ProducerStateManager
    config: LogConfig
    leader_epoch: int
    leader_epoch_cache: LeaderEpochFileCache
    clock: Callable[[], int]
    directory_name: str

    @property
    def append_rules(self) -> AppendRules: ...


def write_committed(
    log: CommittedLog,
    batches: Sequence[RecordBatch],
    marker: bytes,
    marker_fields: tuple[int, int, int],
    coordinator_epoch: int,
    queued: QueuedWrites | None = None,
) -> LogAppendInfo | None:
    """Append ``batches`` and their COMMIT ``marker`` (``build_control_batch`` of
    ``marker_fields``: producer id, epoch, timestamp) to ``log`` where ``validate_committed``
    would pass with nothing to rewrite (the producer's entry at the batches' and the marker's
    epoch with no transaction open, sequences continuing its last one, no batch a retained
    one's duplicate, transactional data batches in the topic's codec within
    ``max.message.bytes`` and ``segment.bytes``, no ``LogAppendTime``) and neither a roll nor a
    new leader epoch is due; None where any of that does not hold. ``queued``: where the bytes
    are to be written (:mod:`kafkatier.storage.log.queued_writes`), else at once."""
    producer_id, producer_epoch, timestamp = marker_fields
    state = log.producer_state
    entry = ready_entry(log, producer_id, producer_epoch, coordinator_epoch) if batches else None
    if entry is None:
        return None
    leader_epoch, rules = log.leader_epoch, log.append_rules
    codec, file = rules.compression, log.directory_name
    limit = min(rules.max_message_bytes, log.config.segment_bytes)
    retained = [m.last_seq for m in entry.batch_metadata]
    last_seq, offset = retained[-1], state.map_end_offset
    first_offset, size, records, largest = offset, len(marker), 1, timestamp
    metas, infos, position = [], [], 0
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
        assign_offset(batch.buffer, offset, leader_epoch)
        batch.base_offset, batch.partition_leader_epoch, batch.file = offset, leader_epoch, file
        delta, max_ts, length = batch.last_offset_delta, batch.max_timestamp, batch.size_in_bytes
        offset += delta + 1
        size += length
        records += batch.records_count
        largest = max(largest, max_ts)
        metas.append(_new(BatchMetadata, (last, offset - 1, delta, max_ts)))
        infos.append(_new(BatchInfo, (position, length, offset - 1, max_ts)))
        position += length
        last_seq = last
    due = _full_path_due(log, batches[0], size, len(batches) + 1, (offset, timestamp))
    if len(marker) > limit or due:
        return None
    own = bytearray(marker)
    assign_offset(own, offset, leader_epoch)
    views = [batch.buffer for batch in batches]
    views.append(memoryview(own))
    infos.append(_new(BatchInfo, (position, len(own), offset, timestamp)))
    log.segments[-1].append_placed(views, infos, queued)
    state.add_committed(producer_id, metas, coordinator_epoch, timestamp, offset + 1)
    return LogAppendInfo(first_offset, offset, largest, len(batches) + 1, records, 0)


def ready_entry(
    log: CommittedLog, producer_id: int, producer_epoch: int, coordinator_epoch: int
) -> ProducerStateEntry | None:
    """The producer's entry where a committed append at ``producer_epoch`` needs no more than
    the one-pass checks of the batches: the entry at that epoch, with retained batches and no
    transaction open, no newer coordinator epoch, no ``LogAppendTime``, and the log's leader
    epoch already in its cache (the full path assigns a new epoch its first offset); else None."""
    entry = log.producer_state.producers.get(producer_id)
    if (
        entry is None
        or log.append_rules.log_append_time
        or not entry.batch_metadata
        or entry.current_txn_first_offset is not None
        or entry.coordinator_epoch > coordinator_epoch
        or entry.producer_epoch != producer_epoch
    ):
        return None
    latest = log.leader_epoch_cache.latest_epoch
    return None if latest is None or latest < log.leader_epoch else entry


def _full_path_due(
    log: CommittedLog, first: RecordBatch, size: int, entries: int, marker_at: tuple[int, int]
) -> bool:
    """Whether the append and the marker that follows it could meet a roll (the full path
    decides then): the data append's ``should_roll`` (its first batch; the whole's size), the
    marker's ``needs_new_segment`` and ``segment.ms`` rule after it (``marker_at``: its offset
    and timestamp), or an index filling up within them (``entries``: at most one a batch). An
    empty segment too: the data's largest timestamp would base its time rule, not the marker's.

    Said with one check each: the whole's size covers the data's, the marker's offset (the
    last) the data's relative offsets, room for ``entries`` the indexes being full, and the
    larger of the two timestamps both time rules (the time waited grows with the timestamp,
    or is the clock's for either)."""
    active, config = log.segments[-1], log.config
    return (
        not active.size
        or active.size + size > config.segment_bytes
        or not active.can_convert_to_relative_offset(marker_at[0])
        or not active.index_room(entries)
        or time_rolls(active, config, log.clock, max(first.max_timestamp, marker_at[1]))
    )
