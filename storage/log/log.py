"""One partition's log: ordered segments, offsets, producer state, leader epochs, rolls.

On disk a partition is a directory ``<topic>-<partition>`` (kafka-format.md §0) holding segments
(``segment.py``), ``.snapshot`` producer-state files, ``leader-epoch-checkpoint`` and
``partition.metadata``. This class is Kafka's ``UnifiedLog`` + ``LocalLog`` for a single replica
that is always the leader: it validates and appends batches (the checks: ``append.py``), rolls
segments (when: ``roll.py``), keeps the last stable offset, and serves reads
(``reader.py``). Opening and crash recovery live in ``loader.py``.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from kafkatier.storage import wire
from kafkatier.storage.checkpoint.leader_epoch import LeaderEpochFileCache
from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.config.spec import LONG_MAX
from kafkatier.storage.errors import OffsetOutOfRangeError
from kafkatier.storage.file_budget import FileBudget
from kafkatier.storage.fsutil import fsync_dir, fsync_file
from kafkatier.storage.log.append import (
    LogAppendInfo,
    Validated,
    append_rules,
    commit_producer_state,
    commit_validated,
    duplicate_info,
    validate_append,
    validate_marker,
)
from kafkatier.storage.log.batch_position import BatchInfo
from kafkatier.storage.log.delayed_delete import PendingDeletions
from kafkatier.storage.log.roll import needs_new_segment, should_roll
from kafkatier.storage.log.segment import LogSegment
from kafkatier.storage.log.validator import AppendRules, parse_incoming
from kafkatier.storage.producer.entry import AppendOrigin
from kafkatier.storage.producer.state import ProducerStateManager
from kafkatier.storage.record.batch import RecordBatch
from kafkatier.storage.record.builder import build_control_batch

Clock = Callable[[], int]
__all__ = ["Clock", "Log", "wall_clock_ms"]


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


class Log:
    """A partition directory's segments and state (see module docstring)."""

    def __init__(
        self,
        directory: Path,
        topic: str,
        partition: int,
        config: LogConfig,
        segments: list[LogSegment],
        producer_state: ProducerStateManager,
        leader_epoch_cache: LeaderEpochFileCache,
        *,
        log_start_offset: int,
        recovery_point: int,
        clock: Clock = wall_clock_ms,
        budget: FileBudget | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.topic = topic
        self.partition = partition
        self.config = config
        self.segments = segments
        self.producer_state = producer_state
        self.leader_epoch_cache = leader_epoch_cache
        self.log_start_offset = log_start_offset
        self.recovery_point = recovery_point
        self.clock = clock
        self.budget = budget  # where its segments' descriptors are counted (None: the process's)
        self.leader_epoch = max(leader_epoch_cache.latest_epoch or 0, 0)
        self.pending_deletions = PendingDeletions()  # ``.deleted`` files awaiting removal
        self._dir_unsynced = True  # a segment file created since the directory's last fsync
        self._last_flush_ms: int | None = None  # the last full flush (or first look), flush.ms
        self._rules: tuple[LogConfig, AppendRules] | None = None  # see _append_rules
        self._rolled_to: int | None = None  # the newest roll's base, if not flushed yet
        self._unsynced_snapshots: list[Path] = []  # written at roll, fsynced by the next flush

    # ------------------------------------------------------------------ offsets

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.producer_state.map_end_offset

    @property
    def high_watermark(self) -> int:
        """A single always-leader replica: everything appended is replicated."""
        return self.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        first_unstable = self.producer_state.first_unstable_offset()
        hw = self.high_watermark
        return hw if first_unstable is None else min(first_unstable, hw)

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def segment_for(self, offset: int) -> LogSegment:
        """The segment whose base offset is the greatest one <= ``offset``."""
        bases = [s.base_offset for s in self.segments]
        i = bisect.bisect_right(bases, offset) - 1
        if i < 0:
            raise OffsetOutOfRangeError(
                f"offset {offset} is before the first segment", file=str(self.directory)
            )
        return self.segments[i]

    def segments_from(self, offset: int) -> list[LogSegment]:
        bases = [s.base_offset for s in self.segments]
        i = max(bisect.bisect_right(bases, offset) - 1, 0)
        return self.segments[i:]

    # ------------------------------------------------------------------ appends
    # Validation and the producer state it commits: append.py; when to roll: roll.py.

    def append(
        self, data: bytes | bytearray | memoryview, *, origin: AppendOrigin = AppendOrigin.CLIENT
    ) -> LogAppendInfo:
        """Validate, assign offsets to and write the v2 batches in ``data`` (Kafka's leader append).

        Validation (CRC, counts, sizes, producer epochs and sequences) happens for every batch
        before anything is written, so a rejected append leaves the log untouched. Batches the
        producer already appended (same producer, epoch and sequence range among its last five)
        are skipped.
        """
        incoming = parse_incoming(data, origin)
        found = validate_append(
            incoming,
            origin,
            self.producer_state,
            self.config,
            next_offset=self.log_end_offset,
            leader_epoch=self.leader_epoch,
            now=self.clock(),
            file=str(self.directory),
            rules=self._append_rules(),
        )
        if not found.placed:
            return duplicate_info(found.duplicates, len(incoming))
        return self._append_validated(found, origin)

    def _append_validated(self, found: Validated, origin: AppendOrigin) -> LogAppendInfo:
        placed = found.placed
        self._assign_leader_epoch(placed[0].base_offset)
        self._write(found, origin)
        return LogAppendInfo(
            first_offset=placed[0].base_offset,
            last_offset=placed[-1].last_offset,
            max_timestamp=max(b.max_timestamp for b in placed),
            num_batches=len(placed),
            num_records=sum(b.records_count for b in placed),
            duplicate_batches=len(found.duplicates),
        )

    def _append_rules(self) -> AppendRules:
        """``append_rules`` of the current config, computed again only when it is replaced."""
        if self._rules is None or self._rules[0] is not self.config:
            self._rules = (self.config, append_rules(self.config))
        return self._rules[1]

    def _assign_leader_epoch(self, start_offset: int) -> None:
        latest = self.leader_epoch_cache.latest_epoch
        if latest is None or latest < self.leader_epoch:
            self.leader_epoch_cache.assign(self.leader_epoch, start_offset)
            self.leader_epoch_cache.flush()

    def _write(self, found: Validated, origin: AppendOrigin) -> None:
        """Append in chunks that fit the active segment, rolling between them (§9.2). Each
        chunk's producer state is committed before the next roll, so the new segment's base
        offset and its producer snapshot both describe the log up to that chunk; one chunk
        (the usual case) commits the state validation computed."""
        batches = found.placed
        chunk: list[RecordBatch] = []
        chunk_bytes = 0
        for batch in batches:
            pending = chunk_bytes + batch.size_in_bytes
            if chunk and needs_new_segment(self.active_segment, self.config, pending, batch):
                self._write_chunk(chunk)
                commit_producer_state(self.producer_state, chunk, origin, self.segment_for)
                chunk, chunk_bytes = [], 0
            if not chunk:
                self._maybe_roll(batch.size_in_bytes, batch)
            chunk.append(batch)
            chunk_bytes += batch.size_in_bytes
        self._write_chunk(chunk)
        if len(chunk) == len(batches):
            commit_validated(self.producer_state, found, self.segment_for)
        else:
            commit_producer_state(self.producer_state, chunk, origin, self.segment_for)

    def _write_chunk(self, chunk: Sequence[RecordBatch]) -> None:
        if len(chunk) == 1:
            only = chunk[0]
            info = BatchInfo(0, only.size_in_bytes, only.last_offset, only.max_timestamp)
            self.active_segment.append(only.buffer, [info])
            return
        data = bytearray()
        infos: list[BatchInfo] = []
        for batch in chunk:
            infos.append(
                BatchInfo(len(data), batch.size_in_bytes, batch.last_offset, batch.max_timestamp)
            )
            data += batch.buffer
        self.active_segment.append(data, infos)

    def _maybe_roll(self, size: int, first: RecordBatch) -> None:
        if should_roll(self.active_segment, self.config, self.clock, size, first):
            self.roll()

    def roll(self) -> LogSegment:
        """Close the active segment for appends and start a new one at the log end offset.

        As Kafka: final time-index entry and trimmed indexes on the old segment, a producer
        snapshot at the new base offset, and the old segment's flush left to the next flush
        (Kafka schedules it at once; here the writer's next ``flush_data``, which the sink runs
        for every batch, or ``flush``), which then moves the recovery point to the new base."""
        new_base = self.log_end_offset
        active = self.active_segment
        if active.size == 0 and active.base_offset == new_base:
            return active
        active.on_become_inactive()
        self.producer_state.update_map_end_offset(new_base)
        snapshot = self.producer_state.take_snapshot(sync=False)
        if snapshot is not None:
            self._unsynced_snapshots.append(snapshot)
        segment = self.new_segment(new_base)
        self.segments.append(segment)
        self._rolled_to = new_base
        return segment

    def new_segment(self, base_offset: int, suffix: str = "") -> LogSegment:
        try:
            return LogSegment(
                self.directory,
                base_offset,
                index_interval_bytes=self.config.index_interval_bytes,
                max_index_size=self.config.segment_index_bytes,
                suffix=suffix,
                created_ms=self.clock(),
                roll_jitter_ms=self.config.random_segment_jitter(),
                budget=self.budget,
            )
        finally:  # once its files exist: their names are durable after the next flush
            self._dir_unsynced = True

    def write_txn_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        *,
        commit: bool,
        coordinator_epoch: int = 0,
        timestamp: int | None = None,
    ) -> LogAppendInfo:
        """Append a COMMIT or ABORT marker, as the transaction coordinator would (§3): what
        ``append(marker, origin=COORDINATOR)`` does, without parsing back the marker."""
        control = wire.ControlType.COMMIT if commit else wire.ControlType.ABORT
        marker = _marker(
            control,
            producer_id,
            producer_epoch,
            coordinator_epoch,
            self.clock() if timestamp is None else timestamp,
            self.leader_epoch,
        )
        found = validate_marker(
            marker,
            control,
            coordinator_epoch,
            self.producer_state,
            self.config,
            next_offset=self.log_end_offset,
            leader_epoch=self.leader_epoch,
            now=self.clock(),
            file=str(self.directory),
            rules=self._append_rules(),
        )
        return self._append_validated(found, AppendOrigin.COORDINATOR)

    def release_removed_segments(self) -> int:
        """Close the oldest segments whose ``.log`` another process removed; returns how many.

        The tiering sidecar deletes local segments whose remote copy is durable (local
        retention), on the files, beside the writer: renamed ``.deleted``, then unlinked. Kafka's
        broker closes a segment when it deletes it; a writer that kept these open would hold
        their descriptors, mappings and disk space for as long as it runs. Local retention only
        ever takes the oldest segments and never the active one, so this looks at the oldest
        only (one ``stat`` when nothing changed). The log start offset stays: the data are
        remote, not gone (Kafka's local log start moves, its log start does not)."""
        released = 0
        while len(self.segments) > 1 and not self.segments[0].log_path.exists():
            self.segments.pop(0).close_handlers()
            released += 1
        return released

    # ------------------------------------------------------------------ durability
    # Two levels, as Kafka: ``flush`` (Kafka's: every file, moves the recovery point) and
    # ``flush_data`` (what a writer needs before it acknowledges: the ``.log`` bytes and their
    # file names durable). Below the recovery point everything is durable; above it the loader
    # re-validates the batches and rebuilds indexes, producer state and leader epochs after an
    # unclean shutdown, so only the ``.log`` bytes must survive for the appends to.

    @property
    def has_unflushed_data(self) -> bool:
        """Whether :meth:`flush_data` has anything to fsync."""
        return (
            self._dir_unsynced
            or self._rolled_to is not None
            or any(s.unsynced for s in self.segments_from(self.recovery_point))
        )

    @property
    def needs_flush(self) -> bool:
        """Whether :meth:`flush` has anything to do (appends above the recovery point, or
        files not yet fsynced)."""
        return self.recovery_point < self.log_end_offset or self.has_unflushed_data

    def flush_data(self) -> None:
        """Make every append durable, without the indexes: fsync the ``.log`` files above the
        recovery point that changed since their last fsync, and the directory if a segment was
        created since its last fsync. The recovery point stays (after a crash the loader
        recovers from it) but for the flush of the segments rolled since the last flush, which
        moves it to the newest roll; ``flush.messages`` or ``flush.ms`` may ask for a full
        flush instead."""
        if self._full_flush_due():
            self.flush()
            return
        if self._rolled_to is not None:
            self._flush_rolled(self._rolled_to)
        for segment in self.segments_from(self.recovery_point):
            segment.flush_data()
        if self._dir_unsynced:
            self._sync_dir()

    def _flush_rolled(self, upto: int) -> None:
        """Kafka's flush at roll: every segment below ``upto`` (the newest roll's base) with
        its indexes, the roll snapshots, the directory; then the recovery point moves there."""
        for segment in self.segments_from(self.recovery_point):
            if segment.base_offset >= upto:
                break
            segment.flush()
        self._sync_snapshots()
        self._sync_dir()
        self.recovery_point = max(self.recovery_point, upto)
        self._rolled_to = None

    def _full_flush_due(self) -> bool:
        """Kafka's ``flush.messages`` (offsets since the recovery point) and ``flush.ms``."""
        cfg = self.config
        if self.log_end_offset - self.recovery_point >= cfg.flush_messages:
            return True
        if cfg.flush_ms >= LONG_MAX:
            return False
        now = self.clock()
        if self._last_flush_ms is None:
            self._last_flush_ms = now
        return now - self._last_flush_ms >= cfg.flush_ms

    def flush(self) -> None:
        """fsync every segment above the recovery point; the recovery point becomes the end.

        As Kafka's ``LocalLog.flush``, the directory is fsynced too when a segment created since
        the last flush is among them: its file names must survive a power loss with its data."""
        end = self.log_end_offset
        segments = self.segments_from(self.recovery_point)
        for segment in segments:
            segment.flush()
        self._sync_snapshots()
        if self._dir_unsynced or any(s.base_offset >= self.recovery_point for s in segments):
            self._sync_dir()
        self.recovery_point = end
        self._rolled_to = None
        if self.config.flush_ms < LONG_MAX:
            self._last_flush_ms = self.clock()

    def _sync_snapshots(self) -> None:
        """fsync the producer snapshots written at roll (a later roll or retention may have
        removed some: those need nothing)."""
        while self._unsynced_snapshots:
            with contextlib.suppress(FileNotFoundError):
                fsync_file(self._unsynced_snapshots[0])
            self._unsynced_snapshots.pop(0)

    def _sync_dir(self) -> None:
        self._dir_unsynced = False  # before the fsync: a segment created meanwhile marks it again
        try:
            fsync_dir(self.directory)
        except BaseException:
            self._dir_unsynced = True
            raise

    def close(self) -> None:
        """Clean close (§9.4): producer snapshot at the end offset, flush (if anything
        changed since the last: the snapshot's fsync goes with it, as Kafka's, without the
        directory's; a snapshot lost in a crash costs the next open a replay, nothing more),
        trimmed indexes."""
        snapshot = self.producer_state.take_snapshot(sync=False)
        if snapshot is not None:
            self._unsynced_snapshots.append(snapshot)
        if self.needs_flush or self._unsynced_snapshots:
            self.flush()
        self.leader_epoch_cache.flush()
        for segment in self.segments:
            segment.close()


@functools.lru_cache(maxsize=4)
def _marker(
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
