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
import operator
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from kafkatier.storage import wire
from kafkatier.storage.checkpoint.leader_epoch import LeaderEpochFileCache
from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.errors import OffsetOutOfRangeError
from kafkatier.storage.file_budget import FileBudget
from kafkatier.storage.fsutil import as_path
from kafkatier.storage.log.append import (
    AppendTarget,
    LogAppendInfo,
    Validated,
    append_rules,
    commit_producer_state,
    commit_validated,
    duplicate_info,
    marker_bytes,
    validate_append,
    validate_committed,
    validate_marker,
)
from kafkatier.storage.log.batch_position import BatchInfo
from kafkatier.storage.log.committed import write_committed
from kafkatier.storage.log.delayed_delete import PendingDeletions
from kafkatier.storage.log.durability import Durability
from kafkatier.storage.log.queued_writes import QueuedWrites
from kafkatier.storage.log.roll import needs_new_segment, should_roll
from kafkatier.storage.log.segment import LogSegment
from kafkatier.storage.log.validator import AppendRules, parse_incoming
from kafkatier.storage.producer.entry import AppendOrigin
from kafkatier.storage.producer.state import ProducerStateManager
from kafkatier.storage.record.batch import RecordBatch

Clock = Callable[[], int]
_base_offset = operator.attrgetter("base_offset")  # segments are in base offset order
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
        self.directory = as_path(directory)
        self.directory_name = str(self.directory)  # named in every append's errors
        self.topic = topic
        self.partition = partition
        self.config = config
        self.segments = segments
        self.producer_state = producer_state
        self.leader_epoch_cache = leader_epoch_cache
        self.log_start_offset = log_start_offset
        self.remote_start = 0
        """A tiered log's checkpointed log start below its local segments (DeleteRecords into
        the remote range, the sidecar's remote expiry), 0 if none: the writer's own
        ``log_start_offset`` is the local one, and its checkpoints must keep this for the
        sidecar and readers (``LogDirectory.checkpoint``)."""
        self.recovery_point = recovery_point
        self.clock = clock
        self.budget = budget  # where its segments' descriptors are counted (None: the process's)
        self.leader_epoch = max(leader_epoch_cache.latest_epoch or 0, 0)
        self.pending_deletions = PendingDeletions()  # ``.deleted`` files awaiting removal
        self.durability = Durability()  # what is not fsynced yet (the first flush: the dir too)
        self._rules: tuple[LogConfig, AppendRules] | None = None  # see _append_target

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
        i = bisect.bisect_right(self.segments, offset, key=_base_offset) - 1
        if i < 0:
            raise OffsetOutOfRangeError(
                f"offset {offset} is before the first segment", file=str(self.directory)
            )
        return self.segments[i]

    def segments_from(self, offset: int) -> list[LogSegment]:
        i = max(bisect.bisect_right(self.segments, offset, key=_base_offset) - 1, 0)
        return self.segments[i:]

    # ------------------------------------------------------------------ appends
    # Validation and the producer state it commits: append.py; when to roll: roll.py.

    def append(
        self,
        data: bytes | bytearray | memoryview,
        *,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        owned: bool = False,
    ) -> LogAppendInfo:
        """Validate, assign offsets to and write the v2 batches in ``data`` (Kafka's leader append).

        Validation (CRC, counts, sizes, producer epochs and sequences) happens for every batch
        before anything is written, so a rejected append leaves the log untouched. Batches the
        producer already appended (same producer, epoch and sequence range among its last five)
        are skipped. ``owned``: ``data`` is a bytearray the caller hands over (the sink's pieces,
        the Arrow encoder's output): offsets are assigned in it instead of in a copy, and the
        caller must not use it afterwards.
        """
        buf = data if owned and isinstance(data, bytearray) else bytearray(data)
        return self.append_batches(parse_incoming(buf, origin), origin=origin)

    def append_batches(
        self, incoming: list[RecordBatch], *, origin: AppendOrigin = AppendOrigin.CLIENT
    ) -> LogAppendInfo:
        """:meth:`append` of batches ``parse_incoming`` parsed and checked for ``origin``, in a
        buffer the log now owns (offsets go in in place): for a writer that reads the batches
        itself before appending them (the sink gives them their sequences), so they are
        parsed and their CRCs checked once."""
        found = validate_append(incoming, origin, self._append_target(), owned=True)
        if not found.placed:
            return duplicate_info(found.duplicates, len(incoming))
        return self._append_validated(found, origin)

    def _append_validated(
        self, found: Validated, origin: AppendOrigin, *, with_marker: bool = False
    ) -> LogAppendInfo:
        placed = found.placed
        first = placed[0]
        self._assign_leader_epoch(first.base_offset)
        self._write(found, origin, with_marker)
        many = len(placed) > 1
        return LogAppendInfo(
            first.base_offset,
            placed[-1].last_offset,
            max([b.max_timestamp for b in placed]) if many else first.max_timestamp,
            len(placed),
            sum([b.records_count for b in placed]) if many else first.records_count,
            len(found.duplicates),
        )

    @property
    def append_rules(self) -> AppendRules:
        """The append checks' view of the config (computed again only when it is replaced)."""
        if self._rules is None or self._rules[0] is not self.config:
            self._rules = (self.config, append_rules(self.config))
        return self._rules[1]

    def _append_target(self) -> AppendTarget:
        """What the append checks read of this log, now."""
        rules = self.append_rules
        return AppendTarget(
            self.producer_state,
            self.config,
            rules,
            self.producer_state.map_end_offset,
            self.leader_epoch,
            self.clock() if rules.log_append_time else wire.NO_TIMESTAMP,
            self.directory_name,
        )

    def _assign_leader_epoch(self, start_offset: int) -> None:
        """A new epoch's first offset in the leader-epoch checkpoint, written at once."""
        latest = self.leader_epoch_cache.latest_epoch
        if latest is None or latest < self.leader_epoch:
            self.leader_epoch_cache.assign(self.leader_epoch, start_offset)
            self.write_epochs_unsynced()

    def write_epochs_unsynced(self) -> None:
        """The leader-epoch checkpoint, if it changed (or is missing), written without fsync:
        the next flush syncs it and its name (durability.py), as Kafka 3.7 defers it off the
        append path; a torn one is rebuilt from the batches at the next load."""
        cache = self.leader_epoch_cache
        if cache.dirty or not cache.path.exists():
            cache.flush(sync=False)
            self.durability.file_written(cache.path)

    def snapshot_unsynced(self) -> None:
        """The producer state's snapshot at its end (if it moved since the last), written
        without fsync: the next flush syncs it and its name, as a roll's. One lost in a crash
        before then costs the next open a replay; a torn one fails its CRC-32C and is
        discarded. (A recovery of 1,024 partitions spent 0.48 s of 3.1 s, under cProfile, in
        the fsyncs of these snapshots and their directories when each was synced at once.)"""
        path = self.producer_state.take_snapshot(sync=False)
        if path is not None:
            self.durability.file_written(path)

    def _write(self, found: Validated, origin: AppendOrigin, with_marker: bool = False) -> None:
        """Append in chunks that fit the active segment, rolling between them (§9.2). Each
        chunk's producer state is committed before the next roll, so the new segment's base
        offset and its producer snapshot both describe the log up to that chunk; one chunk
        (the usual case: all the batches fit the active segment after the first one's roll
        check, which is when no batch would start a new chunk) commits the state validation
        computed. ``with_marker``: the last batch is the COMMIT marker of the others
        (``append_committed``), which gets the roll check of an append of its own, as the
        coordinator's marker would (an index may have filled, or its timestamp be later)."""
        batches = found.placed
        first = batches[0]
        self._maybe_roll(first.size_in_bytes, first)
        marker = batches[-1] if with_marker and len(batches) > 1 else None
        if marker is None and (len(batches) == 1 or not needs_new_segment(
            self.segments[-1], self.config, sum([b.size_in_bytes for b in batches]),
            batches[-1].last_offset,
        )):  # fmt: skip
            self.write_indexed(batches)
            commit_validated(self.producer_state, found, self.segment_for)
            return
        chunk = [first]
        chunk_bytes = first.size_in_bytes
        for batch in batches[1:]:
            pending = chunk_bytes + batch.size_in_bytes
            if batch is marker or needs_new_segment(
                self.active_segment, self.config, pending, batch.last_offset
            ):
                self.write_indexed(chunk)
                commit_producer_state(self.producer_state, chunk, origin, self.segment_for)
                self._maybe_roll(batch.size_in_bytes, batch)
                chunk, chunk_bytes = [], 0
            chunk.append(batch)
            chunk_bytes += batch.size_in_bytes
        self.write_indexed(chunk)
        commit_producer_state(self.producer_state, chunk, origin, self.segment_for)

    def write_indexed(self, chunk: Sequence[RecordBatch]) -> None:
        """Write a chunk that fits the active segment, indexing it batch by batch."""
        if len(chunk) == 1:
            only = chunk[0]
            info = BatchInfo(0, only.size_in_bytes, only.last_offset, only.max_timestamp)
            self.segments[-1].append(only.buffer, (info,))
            return
        infos: list[BatchInfo] = []
        position = 0
        for batch in chunk:
            infos.append(
                BatchInfo(position, batch.size_in_bytes, batch.last_offset, batch.max_timestamp)
            )
            position += batch.size_in_bytes
        self.active_segment.append([batch.buffer for batch in chunk], infos)

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
        segment = self.new_segment(new_base)
        self.segments.append(segment)
        self.durability.rolled(new_base, snapshot)
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
            self.durability.segment_created()

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
        marker = self._marker(control, producer_id, producer_epoch, coordinator_epoch, timestamp)
        found = validate_marker(marker, control, coordinator_epoch, self._append_target())
        return self._append_validated(found, AppendOrigin.COORDINATOR)

    def append_committed(
        self,
        incoming: list[RecordBatch],
        producer_id: int,
        producer_epoch: int,
        *,
        coordinator_epoch: int = 0,
        timestamp: int | None = None,
        queued: QueuedWrites | None = None,
    ) -> LogAppendInfo:
        """:meth:`append_batches` of one producer's transactional batches, then the COMMIT
        marker of their transaction, in one write: the same bytes and producer state as the
        append and :meth:`write_txn_marker` one after the other, for a writer that already
        decided the commit (the sink, whose decision is durable in its write-ahead log before
        anything reaches the log). ``producer_epoch`` is the marker's (at least the batches').
        ``queued``: the write may be left to it (``write_committed``'s one-pass case)."""
        now = self.clock() if timestamp is None else timestamp
        commit = wire.ControlType.COMMIT
        marker = self._marker(commit, producer_id, producer_epoch, coordinator_epoch, now)
        fields = (producer_id, producer_epoch, now)
        written = write_committed(self, incoming, marker, fields, coordinator_epoch, queued)
        if written is not None:
            return written
        found = validate_committed(incoming, marker, coordinator_epoch, self._append_target())
        return self._append_validated(found, AppendOrigin.CLIENT, with_marker=True)

    def _marker(
        self, control: wire.ControlType, producer_id: int, producer_epoch: int,
        coordinator_epoch: int, timestamp: int | None,
    ) -> bytes:  # fmt: skip
        """A marker batch for this log's leader epoch (now, unless ``timestamp`` is given)."""
        now = self.clock() if timestamp is None else timestamp
        return marker_bytes(
            control, producer_id, producer_epoch, coordinator_epoch, now, self.leader_epoch
        )

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
    # Kafka's two levels of flush, and why the lighter one is enough: durability.py.

    @property
    def has_unflushed_data(self) -> bool:
        """Whether :meth:`flush_data` has anything to fsync."""
        return self.durability.has_unflushed_data(self)

    @property
    def needs_flush(self) -> bool:
        """Whether :meth:`flush` has anything to do (appends above the recovery point, or
        files not yet fsynced)."""
        return self.durability.needs_flush(self)

    def flush_data(self, *, covered: bool = False) -> None:
        """Make every append durable, not the indexes; the recovery point moves only to a roll
        since the last flush (``Durability.flush_data``; ``covered``: after a syncfs)."""
        self.durability.flush_data(self, covered=covered)

    def flush(self, *, covered: bool = False) -> None:
        """fsync everything above the recovery point (segments, indexes, roll snapshots, the
        directory when it holds new names); the recovery point becomes the end."""
        self.durability.flush(self, covered=covered)

    def write_index_entries(self) -> None:
        """The index entries kept in memory (``index/base.py``) of the segments a flush makes
        durable written into their files: a syncfs begun after it covers them."""
        for segment in self.segments_from(self.recovery_point):
            segment.write_index_entries()

    def close(self, *, sync: bool = True) -> None:
        """Clean close (§9.4): producer snapshot at the end offset, flush (if anything
        changed since the last: the snapshot's fsync goes with it, as Kafka's, without the
        directory's; a snapshot lost in a crash costs the next open a replay, nothing more),
        trimmed indexes.

        ``sync=False``: the same writes, no fsync; the caller then makes the filesystem durable
        (one syncfs for a log dir's many partitions) and calls ``flush(covered=True)``, which
        moves the recovery point to the end as the flush here would have."""
        snapshot = self.producer_state.take_snapshot(sync=False)
        if snapshot is not None:
            self.durability.unsynced_files.append(snapshot)
        if sync and self.needs_flush:
            self.flush()
        if sync:  # else the caller, once every log's snapshot is written (LogDirectory.close)
            self.producer_state.delete_stray_files()
        self.leader_epoch_cache.flush(sync=sync)
        for segment in self.segments:
            segment.close()
