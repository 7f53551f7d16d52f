"""Opening a partition directory, with Kafka's crash recovery (kafka-format.md §9.3).

Order, as Kafka's ``LogLoader``: finish or undo interrupted multi-file operations (delete
``.deleted`` and ``.cleaned`` files, complete ``.swap`` replacements), load segments, and when the
log dir had no clean shutdown recover every segment from the one holding the recovery point: check
each batch's framing and CRC, rebuild the indexes, the leader-epoch cache, producer state and the
transaction index, and cut the file at the first torn or corrupt batch (later, unflushed segments
then go too). Finally producer state is rebuilt from the latest snapshot plus a replay.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import Path

from kafkatier.storage import wire
from kafkatier.storage.checkpoint.leader_epoch import LeaderEpochFileCache
from kafkatier.storage.checkpoint.metadata import parse_partition_dir_name
from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.errors import (
    CheckpointError,
    CorruptIndexError,
    CorruptRecordError,
    InvalidRecordError,
    StorageError,
)
from kafkatier.storage.file_budget import FileBudget
from kafkatier.storage.fsutil import as_path, fsync_dir
from kafkatier.storage.index.txn_index import AbortedTxn
from kafkatier.storage.log.log import Clock, Log, wall_clock_ms
from kafkatier.storage.log.segment import LogSegment
from kafkatier.storage.producer.entry import AppendOrigin
from kafkatier.storage.producer.state import ProducerStateManager
from kafkatier.storage.record.batch import RecordBatch

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
logger = logging.getLogger(__name__)
INDEX_SUFFIXES = (".index", ".timeindex", ".txnindex")
_INTERRUPTED = (".deleted", ".cleaned", ".swap")


def open_log(
    directory: Path,
    config: LogConfig,
    *,
    recovery_point: int = 0,
    log_start_offset: int = 0,
    clean_shutdown: bool = False,
    clock: Clock = wall_clock_ms,
    budget: FileBudget | None = None,
) -> Log:
    """Open (creating if needed) the partition directory and recover it as a broker would;
    ``budget`` counts its segments' descriptors (None: the process's)."""
    directory = as_path(directory)
    parsed = parse_partition_dir_name(directory.name)
    if parsed is None:
        raise ValueError(f"{directory} is not named <topic>-<partition>")
    topic, partition = parsed
    directory.mkdir(parents=True, exist_ok=True)
    complete_interrupted_operations(directory)
    segments, needs_recovery = load_segments(directory, config, clock, budget)
    producer_state = ProducerStateManager(
        directory, producer_id_expiration_ms=config.producer_id_expiration_ms, clock=clock
    )
    cache = _leader_epochs(directory, segments, needs_recovery)
    if not segments:
        segments = [_new_segment(directory, log_start_offset, config, clock, budget)]
    log = Log(
        directory,
        topic,
        partition,
        config,
        segments,
        producer_state,
        cache,
        log_start_offset=max(log_start_offset, segments[0].base_offset),
        recovery_point=recovery_point,
        clock=clock,
        budget=budget,
    )
    if config.remote_storage_enable and log_start_offset < log.log_start_offset:
        log.remote_start = log_start_offset  # the tiered copy's (Log.remote_start)
    first_to_recover = _first_to_recover(log, needs_recovery, clean_shutdown)
    if first_to_recover is not None:
        recover_from(log, first_to_recover)
    rebuild_producer_state(log)  # as Kafka after recovery: forgets strays, snapshots the end
    active = log.active_segment
    active.offset_index.resize(config.segment_index_bytes)  # Kafka's resizeIndexes at load:
    active.time_index.resize(config.segment_index_bytes)  # trimmed files would look full
    end = log.log_end_offset
    cache.truncate_from_end(end)
    cache.truncate_from_start(log.log_start_offset)
    # A cut checkpoint is written without fsync, as an epoch's assignment is (the next flush
    # syncs it): a crash first leaves the old file, cut again at the next load, or a torn one,
    # rebuilt from the batches (two fsyncs a partition fewer when a log dir opens). Only when
    # cut: an unchanged one's file need not even be looked for.
    if cache.dirty:
        log.write_epochs_unsynced()
    log.leader_epoch = max(cache.latest_epoch or 0, 0)
    log.recovery_point = min(max(log.recovery_point, 0), end)
    return log


def _leader_epochs(
    directory: Path, segments: list[LogSegment], needs_recovery: set[int]
) -> LeaderEpochFileCache:
    """The leader-epoch checkpoint; one that does not parse (it is written without fsync at an
    epoch change, and synced by the next flush: a power loss in between may tear it) is removed
    and rebuilt from the batches, which carry their epochs, by recovering every segment."""
    path = directory / LEADER_EPOCH_CHECKPOINT
    try:
        return LeaderEpochFileCache(path)
    except CheckpointError as exc:
        logger.warning("%s; rebuilding it from the batches of %s", exc, directory)
    path.unlink()
    if segments:
        needs_recovery.add(segments[0].base_offset)
    return LeaderEpochFileCache(path)


def new_log(
    directory: Path,
    config: LogConfig,
    *,
    clock: Clock = wall_clock_ms,
    budget: FileBudget | None = None,
) -> Log:
    """The log of a partition directory known new (``creation.py``: metadata, leader-epoch
    checkpoint and an empty first segment in it, all durable): nothing to load or recover, the
    indexes grown to ``segment.index.bytes`` as at any load; its snapshots (none) and
    leader-epoch checkpoint (epoch 0 from offset 0) are known, not read. Its first flush fsyncs
    the directory once more, under its live name, as for any log opened."""
    directory = as_path(directory)
    parsed = parse_partition_dir_name(directory.name)
    if parsed is None:
        raise ValueError(f"{directory} is not named <topic>-<partition>")
    producer_state = ProducerStateManager(
        directory, producer_id_expiration_ms=config.producer_id_expiration_ms, clock=clock,
        new=True,
    )  # fmt: skip
    segment = _new_segment(directory, 0, config, clock, budget)
    segment.offset_index.resize(config.segment_index_bytes)
    segment.time_index.resize(config.segment_index_bytes)
    return Log(
        directory,
        *parsed,
        config,
        [segment],
        producer_state,
        LeaderEpochFileCache.of_new_partition(directory / LEADER_EPOCH_CHECKPOINT),
        log_start_offset=0,
        recovery_point=0,
        clock=clock,
        budget=budget,
    )


def _new_segment(
    directory: Path, base: int, config: LogConfig, clock: Clock, budget: FileBudget | None
) -> LogSegment:
    return LogSegment(
        directory,
        base,
        index_interval_bytes=config.index_interval_bytes,
        max_index_size=config.segment_index_bytes,
        created_ms=clock(),
        budget=budget,
    )


def _files_with(directory: Path, suffix: str) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.name.endswith(suffix))


def complete_interrupted_operations(directory: Path) -> None:
    """§9.3 steps 1-2: drop ``.deleted``/``.cleaned`` files, finish ``.swap`` replacements
    (one listing when there are none, as almost always)."""
    if not any(name.endswith(_INTERRUPTED) for name in os.listdir(directory)):
        return
    for path in _files_with(directory, ".deleted"):
        path.unlink(missing_ok=True)
    cleaned = _files_with(directory, ".cleaned")
    min_cleaned = min((wire.offset_from_file_name(p.name) for p in cleaned), default=None)
    for path in cleaned:
        path.unlink(missing_ok=True)
    swaps = _files_with(directory, ".swap")
    if min_cleaned is not None:
        for path in [p for p in swaps if wire.offset_from_file_name(p.name) >= min_cleaned]:
            path.unlink(missing_ok=True)
        swaps = _files_with(directory, ".swap")
    log_swaps = [p for p in swaps if p.name.endswith(".log.swap")]
    if not log_swaps:
        for path in swaps:  # index swaps without their log cannot be completed
            path.unlink(missing_ok=True)
        return
    low, high = _swap_range(directory, log_swaps)
    for path in directory.iterdir():
        if _is_segment_file(path.name) and low <= wire.offset_from_file_name(path.name) < high:
            path.unlink()
    for path in swaps:
        os.replace(path, path.with_name(path.name[: -len(".swap")]))
    fsync_dir(directory)


def _swap_range(directory: Path, log_swaps: Iterable[Path]) -> tuple[int, int]:
    low, high = 2**63 - 1, -1
    for path in log_swaps:
        base = wire.offset_from_file_name(path.name)
        segment = LogSegment(directory, base, suffix=".swap", writable=False)
        try:
            low, high = min(low, base), max(high, segment.read_next_offset())
        finally:
            segment.close_handlers()
    return low, high


def _is_segment_file(name: str) -> bool:
    return name[:20].isdigit() and name[20:] in (".log", *INDEX_SUFFIXES)


def _refuse_misnamed(directory: Path, names: set[str]) -> None:
    """A ``.log`` or index file whose name is not a 20-digit base offset (``foo.log``, a
    backup ``00000000000000000000-old.index``): Kafka's loader fails on it too, not knowing
    which segment it is; the error names it (it was a bare ValueError of int())."""
    for name in sorted(names):
        if name.endswith((".log", *INDEX_SUFFIXES)) and not _is_segment_file(name):
            raise StorageError(
                f"{name} is not a segment file name (a segment's files are <20-digit base "
                "offset>.log, .index, .timeindex, .txnindex); move it out of the partition "
                "directory", file=str(directory / name))  # fmt: skip


def load_segments(
    directory: Path, config: LogConfig, clock: Clock, budget: FileBudget | None = None
) -> tuple[list[LogSegment], set[int]]:
    """Segments in offset order; orphan index files removed; those lacking an index noted."""
    names = set(os.listdir(directory))
    _refuse_misnamed(directory, names)
    logs = {wire.offset_from_file_name(n) for n in names if n.endswith(".log")}
    needs_recovery: set[int] = set()
    for name in sorted(n for n in names if n.endswith(INDEX_SUFFIXES)):
        if wire.offset_from_file_name(name) not in logs:
            (directory / name).unlink()
    segments = []
    for base in sorted(logs):
        if wire.segment_file_name(base, ".index") not in names:
            needs_recovery.add(base)
        time_index_missing = wire.segment_file_name(base, ".timeindex") not in names
        segment = _new_segment(directory, base, config, clock, budget)
        if time_index_missing:  # Kafka's sanityCheck: a recreated time index starts empty
            segment.time_index.resize(0)
        try:
            segment.txn_index.sanity_check()
        except CorruptIndexError:
            needs_recovery.add(base)
        segments.append(segment)
    if segments and segments[-1].base_offset not in needs_recovery:
        active = segments[-1]
        if not active.index_leads_to_end():
            logger.warning("%s: the batches from its last entry (or the start) do not run to "
                           "the end of %s; recovering the segment", active.offset_index.path,
                           active.log_path)  # fmt: skip
            needs_recovery.add(active.base_offset)
    return segments, needs_recovery


def _first_to_recover(log: Log, needs: set[int], clean_shutdown: bool) -> int | None:
    candidates = [min(needs)] if needs else []
    if not clean_shutdown:
        candidates.append(
            log.segment_for(max(log.recovery_point, log.segments[0].base_offset)).base_offset
        )
    return min(candidates) if candidates else None


def recover_from(log: Log, first_base: int) -> None:
    """Recover segments from ``first_base`` on; after a truncation, later segments are deleted."""
    rebuild_producer_state(log, up_to=first_base)
    index = next(i for i, s in enumerate(log.segments) if s.base_offset == first_base)
    for position in range(index, len(log.segments)):
        segment = log.segments[position]
        truncated = recover_segment(segment, log.producer_state, log.leader_epoch_cache)
        log.snapshot_unsynced()  # Kafka: so later recoveries need not replay it again
        if truncated > 0:
            later = log.segments[position + 1 :]
            logger.warning(  # as Kafka's broker does: what recovery cut is said, not silent
                "%s: invalid bytes from position %d (offset %d) on, %d bytes: truncated%s",
                segment.log_path, segment.size, segment.read_next_offset(), truncated,
                f"; {len(later)} later segments deleted, from offset {later[0].base_offset}"
                if later else "",
            )  # fmt: skip
            for one in later:
                one.delete()
            del log.segments[position + 1 :]
            break
    end = log.active_segment.read_next_offset()
    log.producer_state.update_map_end_offset(end)
    log.snapshot_unsynced()
    log.write_epochs_unsynced()  # the epochs it rebuilt (or an empty file for a torn one)


def recover_segment(
    segment: LogSegment, producer_state: ProducerStateManager, cache: LeaderEpochFileCache
) -> int:
    """Kafka's ``LogSegment.recover``: rebuild indexes and state, cut at the first bad batch."""
    segment.offset_index.reset()
    segment.time_index.reset()
    segment.txn_index.reset()
    segment._max_ts = (wire.NO_TIMESTAMP, segment.base_offset)
    valid = last_indexed = 0
    next_offset = segment.base_offset
    try:
        for batch in segment.batches():
            batch.ensure_valid()
            if batch.base_offset < next_offset or not segment.can_convert_to_relative_offset(
                batch.last_offset
            ):
                break
            segment._track_max(batch.max_timestamp, batch.last_offset)
            if valid - last_indexed > segment.index_interval_bytes:
                segment.offset_index.append(batch.last_offset, valid)
                segment.time_index.maybe_append(*segment.max_timestamp_and_offset)
                last_indexed = valid
            if isinstance(batch, RecordBatch):
                _replay_epoch(cache, batch)
                replay_batch(producer_state, batch, segment)
            else:
                producer_state.update_map_end_offset(batch.last_offset + 1)
            valid += batch.size_in_bytes
            next_offset = batch.next_offset
    except (CorruptRecordError, InvalidRecordError):
        pass
    truncated = segment.size - valid
    if truncated > 0:
        segment.truncate_bytes(valid)
    segment.offset_index.trim_to_valid_size()
    segment.time_index.maybe_append(*segment.max_timestamp_and_offset, skip_full_check=True)
    segment.time_index.trim_to_valid_size()
    segment.reset_rolling_state()
    return truncated


def _replay_epoch(cache: LeaderEpochFileCache, batch: RecordBatch) -> None:
    epoch = batch.partition_leader_epoch
    latest = cache.latest_epoch
    if epoch >= 0 and (latest is None or epoch > latest):
        cache.assign(epoch, batch.base_offset)


def replay_batch(
    producer_state: ProducerStateManager, batch: RecordBatch, segment: LogSegment | None
) -> None:
    """Apply one stored batch to producer state (origin REPLICATION); with ``segment``, also
    re-create its aborted-transaction index entry, as segment recovery does."""
    if batch.has_producer_id:
        info = producer_state.prepare_update(batch.producer_id, AppendOrigin.REPLICATION)
        completed = info.append(batch)
        producer_state.update(info)
        if completed is not None:
            if completed.is_aborted and segment is not None:
                lso = producer_state.last_stable_offset(completed)
                segment.append_aborted_txn(
                    AbortedTxn(
                        completed.producer_id, completed.first_offset, completed.last_offset, lso
                    )
                )
            producer_state.complete_txn(completed)
    producer_state.update_map_end_offset(batch.last_offset + 1)


def rebuild_producer_state(log: Log, up_to: int | None = None) -> None:
    """Latest snapshot <= the end, then replay stored batches (Kafka's rebuildProducerState)."""
    end = log.active_segment.read_next_offset() if up_to is None else up_to
    state = log.producer_state
    state.truncate_and_reload(log.log_start_offset, end)
    start = max(state.map_end_offset, log.log_start_offset)
    for segment in log.segments_from(start):
        if segment.base_offset >= end:
            break
        _, position = segment.offset_index.lookup(start)
        for batch in segment.batches(position):
            if batch.last_offset < start:
                continue
            if batch.base_offset >= end:
                break
            if isinstance(batch, RecordBatch):
                replay_batch(state, batch, None)
    state.update_map_end_offset(max(end, state.map_end_offset) if up_to is None else end)
    if up_to is None:
        log.snapshot_unsynced()
        state.remove_straggler_snapshots(s.base_offset for s in log.segments)
