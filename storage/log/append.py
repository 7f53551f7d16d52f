"""The leader's append checks for one partition log, and the producer state they commit.

Kafka's ``UnifiedLog.analyzeAndValidateRecords`` + ``LogValidator`` + the producer-state half of
``UnifiedLog.append``: every incoming v2 batch is validated and given its offsets before anything
is written (so a rejected append leaves the log untouched), and once a chunk is on disk the
producer entries, aborted-transaction index and map end offset are updated in Kafka's order.
Per-batch rules live in ``validator.py``; the write itself in ``log.py``. The checks take what
they read of the log (its config, producer state, end offset and epoch) as arguments, so this
module sits below :class:`~kafkatier.storage.log.log.Log` instead of beside it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from kafkatier.storage import wire
from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.errors import RecordTooLargeError
from kafkatier.storage.index.txn_index import AbortedTxn
from kafkatier.storage.log.segment import LogSegment
from kafkatier.storage.log.validator import (
    AppendRules,
    assign_offset,
    check_unrewritten,
    needs_rewrite,
    prepare_for_log,
)
from kafkatier.storage.producer.append import ProducerAppendInfo
from kafkatier.storage.producer.entry import AppendOrigin, CompletedTxn
from kafkatier.storage.producer.state import ProducerStateManager
from kafkatier.storage.record.batch import RecordBatch
from kafkatier.storage.record.builder import build_control_batch


class LogAppendInfo(NamedTuple):
    """What an append did: the offsets it took, or the original ones of skipped duplicates
    (a tuple: one is built per append)."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    num_batches: int
    num_records: int
    duplicate_batches: int


def append_rules(cfg: LogConfig) -> AppendRules:
    codec = cfg.codec
    return AppendRules(
        max_message_bytes=cfg.max_message_bytes,
        log_append_time=cfg.timestamp_type is wire.TimestampType.LOG_APPEND_TIME,
        compression=codec,
        compression_level=cfg.compression_level(codec) if codec is not None else None,
    )


@dataclass(slots=True)
class Validated:
    """What :func:`validate_append` found: the batches to write (offsets assigned), the
    duplicates skipped, and the producer state the batches lead to, ready to commit."""

    placed: list[RecordBatch]
    duplicates: list[tuple[int, int]]
    infos: dict[int, ProducerAppendInfo]
    completed: list[CompletedTxn]


class AppendTarget(NamedTuple):
    """What the append checks read of the log they append to: its producer state, config (and
    the rules derived from it), end offset and leader epoch, the time (read only for a
    ``LogAppendTime`` topic, the one rule that needs it; else ``NO_TIMESTAMP``), and its
    directory (named in errors). A tuple: one is built per append."""

    state: ProducerStateManager
    config: LogConfig
    rules: AppendRules
    next_offset: int
    leader_epoch: int
    now: int
    file: str

    def place(self, batch: RecordBatch, offset: int, *, owned: bool = False) -> RecordBatch:
        """``batch`` as it will be written at ``offset``: recompressed or stamped where the topic
        says, offsets and leader epoch assigned; raises if it cannot fit a segment. ``owned``:
        the batch is in a buffer of the log's own, where a batch that needs no rewriting gets its
        offset and epoch in place (no copy, no second parse)."""
        if owned and not needs_rewrite(batch, self.rules):
            check_unrewritten(batch, self.rules)
            set_offset(batch, offset, self)
            out = batch
        else:
            buf = prepare_for_log(batch, self.rules, self.now)
            assign_offset(buf, offset, self.leader_epoch)
            out = RecordBatch(buf, 0, file=self.file)
        check_fits_segment(out, self.config, self.file)
        return out


def validate_append(
    incoming: Sequence[RecordBatch], origin: AppendOrigin, target: AppendTarget, *, owned: bool
) -> Validated:
    """A dry run of the append to ``target``: the batches as they will be written (offsets
    assigned) and the duplicates skipped; raises on any rule broken, having changed nothing of
    the log (``owned``: the batches are in a buffer of the log's own, see ``place``)."""
    state = target.state
    found = Validated([], [], {}, [])
    next_offset = target.next_offset
    for batch in incoming:
        if origin is AppendOrigin.CLIENT and batch.has_producer_id:
            dup = state.find_duplicate_batch(batch)
            if dup is not None:
                found.duplicates.append((dup.first_offset, dup.last_offset))
                continue
        out = target.place(batch, next_offset, owned=owned)
        next_offset = out.next_offset
        if out.has_producer_id:
            info = found.infos.get(out.producer_id)
            if info is None:
                info = found.infos[out.producer_id] = state.prepare_update(out.producer_id, origin)
            txn = info.append(out)
            if txn is not None:
                found.completed.append(txn)
        found.placed.append(out)
    return found


def validate_marker(
    marker: bytes, control: wire.ControlType, coordinator_epoch: int, target: AppendTarget
) -> Validated:
    """:func:`validate_append` of one transaction marker from ``build_control_batch``
    (``control`` and ``coordinator_epoch`` are what it was built with): the same checks and
    state for origin COORDINATOR, without decoding back the record this process just encoded."""
    own = RecordBatch(bytearray(marker), 0, file=target.file)
    out = target.place(own, target.next_offset, owned=True)
    info = target.state.prepare_update(out.producer_id, AppendOrigin.COORDINATOR)
    txn = info.append_end_txn_marker(
        control, out.producer_epoch, coordinator_epoch, out.base_offset, out.max_timestamp
    )
    return Validated([out], [], {out.producer_id: info}, [] if txn is None else [txn])


def validate_committed(
    batches: Sequence[RecordBatch], marker: bytes, coordinator_epoch: int, target: AppendTarget
) -> Validated:
    """:func:`validate_append` of a producer's transactional ``batches`` (origin CLIENT, in a
    buffer of the log's own) followed by the COMMIT ``marker`` that ends their transaction
    (``build_control_batch``), checked and placed as the two appends one after the other
    would be: the marker's state continues the batches' own."""
    found = validate_append(batches, AppendOrigin.CLIENT, target, owned=True)
    at = found.placed[-1].next_offset if found.placed else target.next_offset
    out = target.place(RecordBatch(bytearray(marker), 0, file=target.file), at, owned=True)
    info = found.infos.get(out.producer_id)
    if info is None:
        info = found.infos[out.producer_id] = target.state.prepare_update(
            out.producer_id, AppendOrigin.COORDINATOR
        )
    txn = info.append_end_txn_marker(
        wire.ControlType.COMMIT, out.producer_epoch, coordinator_epoch, out.base_offset,
        out.max_timestamp,
    )  # fmt: skip
    if txn is not None:
        found.completed.append(txn)
    found.placed.append(out)
    return found


def set_offset(batch: RecordBatch, offset: int, target: AppendTarget) -> None:
    """``batch`` (in a buffer of the log's own) given ``offset`` and the leader epoch."""
    assign_offset(batch.buffer, offset, target.leader_epoch)
    batch.base_offset, batch.partition_leader_epoch = offset, target.leader_epoch
    batch.file = target.file


def check_fits_segment(batch: RecordBatch, config: LogConfig, file: str) -> None:
    if batch.size_in_bytes > config.segment_bytes:
        raise RecordTooLargeError(
            f"batch of {batch.size_in_bytes} bytes exceeds segment.bytes={config.segment_bytes}",
            file=file,
            offset=batch.base_offset,
        )


def duplicate_info(duplicates: list[tuple[int, int]], count: int) -> LogAppendInfo:
    first = min(d[0] for d in duplicates) if duplicates else -1
    last = max(d[1] for d in duplicates) if duplicates else -1
    return LogAppendInfo(first, last, wire.NO_TIMESTAMP, 0, 0, count)


def commit_producer_state(
    state: ProducerStateManager,
    batches: Sequence[RecordBatch],
    origin: AppendOrigin,
    segment_for: Callable[[int], LogSegment],
) -> None:
    """Kafka's order for the batches just written: update entries, then index aborted txns
    (in the segment ``segment_for`` gives for the marker's offset) with their LSO, then the end
    offset. Re-applies the checks :func:`validate_append` passed (for a part of its batches)."""
    infos: dict[int, ProducerAppendInfo] = {}
    completed: list[CompletedTxn] = []
    for batch in batches:
        if batch.has_producer_id:
            info = infos.get(batch.producer_id)
            if info is None:
                info = infos[batch.producer_id] = state.prepare_update(batch.producer_id, origin)
            txn = info.append(batch)
            if txn is not None:
                completed.append(txn)
    commit_validated(state, Validated(list(batches), [], infos, completed), segment_for)


def commit_validated(
    state: ProducerStateManager,
    validated: Validated,
    segment_for: Callable[[int], LogSegment],
) -> None:
    """:func:`commit_producer_state` for all of ``validated.placed``, just written, with the
    state :func:`validate_append` computed (nothing changed producer state in between)."""
    for info in validated.infos.values():
        state.update(info)
    for txn in validated.completed:
        if txn.is_aborted:
            lso = state.last_stable_offset(txn)
            segment_for(txn.last_offset).append_aborted_txn(
                AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, lso)
            )
        state.complete_txn(txn)
    state.update_map_end_offset(validated.placed[-1].next_offset)


@functools.lru_cache(maxsize=4)
def marker_bytes(
    control_type: wire.ControlType,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp: int,
    leader_epoch: int,
) -> bytes:
    """``build_control_batch`` remembered: a transaction's markers in every partition are the
    same bytes when written with one timestamp (offsets are assigned on append)."""
    return build_control_batch(
        control_type,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        coordinator_epoch=coordinator_epoch,
        timestamp=timestamp,
        partition_leader_epoch=leader_epoch,
    )
