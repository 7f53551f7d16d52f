"""The sink's committed appends of a micro-batch, every partition's in one call of the C library
(``storage/native/committed.c``): :func:`kafkatier.storage.log.committed.write_committed`'s
one-pass case over arrays, with the Python left to reading each partition's state and setting
what changed.

Why: the one-pass case costs about 30 us of Python calls a partition (sequences and CRCs,
offsets, the checks, index entries, the marker, the write's hand-over, the producer's entry),
most of what a warm micro-batch into 1,024 partitions costs over the same batch into 8. Here a
partition's Python is a tuple of its state in and a few assignments out.

The rules are ``write_committed``'s, said in the same places where they can be: the producer's
entry and the leader epoch by :func:`~kafkatier.storage.log.committed.ready_entry`, the
``segment.ms`` rule by :func:`~kafkatier.storage.log.roll.time_roll_limit` (the same rule as a
limit on the timestamps, checked against every batch's instead of the first one's: a partition
it refuses the full path decides), the rest by ``committed.c`` (each check named there); the
index entries follow ``LogSegment._index_batches``. A partition the library does not take keeps
its bytes and state untouched and is the caller's to append the full way (``Log.append_committed``
after the batches' sequences are assigned). Nothing is written before every taken partition's
index entries have their disk space (``LogSegment.placing_state``); the writes go to the
caller's :class:`QueuedWrites`, whose ``finish`` reports a failed one (the caller must then take
the logs' in-memory state as lost, as for any queued write).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

from kafkatier.storage import native, wire
from kafkatier.storage.log.append import marker_bytes
from kafkatier.storage.log.committed import ready_entry
from kafkatier.storage.log.queued_writes import QueuedWrites
from kafkatier.storage.log.roll import time_roll_limit
from kafkatier.storage.producer.entry import NUM_BATCHES_TO_RETAIN, BatchMetadata

if TYPE_CHECKING:
    from kafkatier.storage.index.offset_index import OffsetIndex
    from kafkatier.storage.index.time_index import TimeIndex
    from kafkatier.storage.log.log import Log
    from kafkatier.storage.log.segment import LogSegment

_NOT_A_SEQUENCE: Final = -2  # pads the producer's retained last sequences to five
_new = tuple.__new__  # a NamedTuple from a tuple of its fields, without its Python __new__

CHUNK: Final = 64
"""Partitions a call of the library takes (its writes are handed over together)."""

Append = tuple["Log", Sequence[memoryview], int]  # the log, its batches' bytes, first sequence
Indexes = tuple["OffsetIndex", "TimeIndex"]
Chosen = tuple[int, "Log", "LogSegment", Indexes, list[int]]  # place, log, segment, …, its ints


def append_committed_all(
    appends: Sequence[Append], marker_fields: tuple[int, int, int], queued: QueuedWrites,
    coordinator_epoch: int = 0, after_chunk: Callable[[], None] | None = None,
    chunk: int = CHUNK, later: Later | None = None,
) -> list[int]:  # fmt: skip
    """Each log's batches (their bytes, checked as a client's append: ``parse_incoming``'s
    checks), given base sequences from its first sequence on (CRCs rewritten), and the COMMIT
    marker (``marker_fields``: producer id, epoch, timestamp) appended in one
    write queued to ``queued``, where ``write_committed`` would take the one-pass case; returns
    the positions in ``appends`` of those not taken, in order (nothing of theirs changed).
    Each log at most once (its state is read before any of its appends). The bytes of a taken
    partition's batches are stamped in place.

    ``chunk`` partitions at a time (:data:`CHUNK`), each chunk's writes handed over before the
    next is read: the queue's thread writes them (about 15 us a partition, ext4's) while this
    goes on.
    ``after_chunk``: called after each chunk that took any partition, its writes handed over
    (the crash tests'). ``later``: where the taken partitions' index entries and producer
    entries (with the log end offset) go instead of onto the logs, for the caller to
    :meth:`Later.apply` before anything reads or writes these logs again (the sink, while its
    next batch's job runs); None: set before this returns."""
    kernels = native.native()
    if kernels is None:
        return list(range(len(appends)))
    producer_id, producer_epoch, timestamp = marker_fields
    marker = marker_bytes(wire.ControlType.COMMIT, producer_id, producer_epoch, coordinator_epoch,
                          timestamp, wire.NO_PARTITION_LEADER_EPOCH)  # fmt: skip
    left: list[int] = []
    for start in range(0, len(appends), chunk):
        part = range(start, min(start + chunk, len(appends)))
        refused = _append_chunk(kernels, appends, part, marker, marker_fields, queued,
                                coordinator_epoch, later)  # fmt: skip
        if refused is None:  # no CRC instruction here: nothing done, none will be
            return left + list(range(start, len(appends)))
        left += refused
        if after_chunk is not None and len(refused) < len(part):
            after_chunk()
    return left


def _append_chunk(
    kernels: Any, appends: Sequence[Append], chunk: range, marker: bytes,
    marker_fields: tuple[int, int, int], queued: QueuedWrites, coordinator_epoch: int,
    later: Later | None,
) -> list[int] | None:  # fmt: skip
    """:func:`append_committed_all` of the appends in ``chunk``: those not taken, or None where
    the library can take none (no CRC instruction)."""
    fields: list[int] = []
    views: list[memoryview] = []
    chosen: list[Chosen] = []
    left: list[int] = []
    try:
        for i in chunk:
            log, batches, first_sequence = appends[i]
            found = _fields(log, batches, first_sequence, marker_fields, coordinator_epoch,
                            len(views))  # fmt: skip
            if found is None:
                left.append(i)
                continue
            ints, indexes = found
            fields += ints
            views += batches
            chosen.append((i, log, log.segments[-1], indexes, ints))
        if not chosen:
            return left
        done = kernels.commit_all(queued.writes, fields, views, marker_fields[:2], marker)
    except BaseException:
        _unpin(chosen)
        raise
    if done is None:
        _unpin(chosen)
        return None
    out, width, taken = done.out, done.width, []
    for k, (i, _, segment, _, ints) in enumerate(chosen):
        at = k * width
        if out[at + _STATUS]:  # refused: handed back
            segment.unpin_unused()
            left.append(i)
        else:
            taken.append(k)
            queued.track(segment, ints[_FD], ints[_POSITION], out[at + _SIZE])
    queued.writes.filled(done.taken, done.keep)
    books = Later() if later is None else later
    books.add(_placed(chosen, taken, done, marker_fields, coordinator_epoch))
    if later is None:
        books.apply()
    return sorted(left)


# kt_commit_in's and kt_commit_out's fields that are read here
_BATCH_START, _BATCH_COUNT, _POSITION, _FD = 0, 1, 6, 18
_STATUS, _SIZE, _SINCE, _BEST_TS, _BEST_OFFSET = 0, 2, 5, 6, 7
_OFFSET_ENTRY, _TIME_ENTRY = wire.OFFSET_INDEX_ENTRY.size, wire.TIME_INDEX_ENTRY.size


def _fields(
    log: Log, batches: Sequence[memoryview], first_sequence: int,
    marker_fields: tuple[int, int, int], coordinator_epoch: int, batch_start: int,
) -> tuple[list[int], Indexes] | None:  # fmt: skip
    """The partition's kt_commit_in (its ``.log`` pinned open, index space reserved) and its
    indexes; None where the checks that read Python objects refuse it (the producer's entry,
    the leader epoch, an empty active segment, the segment.ms rule at the marker's timestamp,
    more retained batches than five)."""
    producer_id, producer_epoch, timestamp = marker_fields
    entry = ready_entry(log, producer_id, producer_epoch, coordinator_epoch) if batches else None
    active = log.segments[-1]
    if entry is None or not active.size or len(entry.batch_metadata) > NUM_BATCHES_TO_RETAIN:
        return None
    config, rules = log.config, log.append_rules
    limit = time_roll_limit(active, config, log.clock)
    if limit is None or limit < timestamp:
        return None
    retained = [m.last_seq for m in entry.batch_metadata]
    offsets, times, size, since, best_ts, best_offset, room, last_time = active.placing_state(
        len(batches) + 1  # at most one a batch and the marker
    )
    codec = rules.compression
    fd = active.pin_for_write(sum([batch.nbytes for batch in batches]))
    return [
        batch_start, len(batches), first_sequence, retained[-1],
        log.producer_state.map_end_offset, active.base_offset, size, config.segment_bytes - size,
        min(rules.max_message_bytes, config.segment_bytes), -1 if codec is None else codec,
        room, since, active.index_interval_bytes, best_ts, best_offset, last_time,
        min(limit, wire.INT64_MAX), log.leader_epoch, fd,
        *retained, *[_NOT_A_SEQUENCE] * (NUM_BATCHES_TO_RETAIN - len(retained)),
    ], (offsets, times)  # fmt: skip


def _unpin(chosen: Sequence[Chosen]) -> None:
    for _, _, segment, _, _ in chosen:
        segment.unpin_unused()


def _placed(
    chosen: Sequence[Chosen], taken: list[int], done: Any, marker_fields: tuple[int, int, int],
    coordinator_epoch: int,
) -> _Call:  # fmt: skip
    """The taken partitions' segments as their appends leave them (each one's kt_commit_out in
    ``done.out``), and what :meth:`_Call.book` sets of them later."""
    out, width = done.out, done.width
    call = _Call(done, marker_fields, coordinator_epoch)  # not ``done``'s buffers
    for k in taken:
        _, log, segment, (offsets, times), ints = chosen[k]
        at = k * width
        segment.placed(ints[_POSITION] + out[at + _SIZE], out[at + _SINCE],
                       (out[at + _BEST_TS], out[at + _BEST_OFFSET]))  # fmt: skip
        call.logs.append(log)
        call.offset_indexes.append(offsets)
        call.time_indexes.append(times)
        call.places.append(k)
        call.batches += (ints[_BATCH_START], ints[_BATCH_COUNT])
    return call


class _Call:
    """One call's books (:func:`_placed`): its taken partitions' logs, their indexes, their
    places in the call and their batches' (the first's row in the call, and how many), beside
    the call's own results (of ``done``: its kt_commit_out ints, its batches' metadata and
    packed index entries; not the batches' buffers). A few lists a call
    rather than a tuple and lists a partition: these outlive the micro-batch (the sink sets
    them in its next one's helper thread), so the collector traversed a partition's in the
    young collection at the end of the sink's call and again in the full ones (containers
    alive after a warm batch at 1,024 partitions: 8,283 with them, 4,318 without, nearly all
    the producer entries' batch metadata and two int pairs a partition, tuples of ints that
    the collector untracks at its first look)."""

    __slots__ = ("batches", "coordinator_epoch", "logs", "marker_fields", "metas",
                 "offset_entries", "offset_indexes", "out", "places", "time_entries",
                 "time_indexes", "width")  # fmt: skip

    def __init__(self, done: Any, marker_fields: tuple[int, int, int],
                 coordinator_epoch: int) -> None:  # fmt: skip
        self.logs: list[Log] = []
        self.offset_indexes: list[OffsetIndex] = []
        self.time_indexes: list[TimeIndex] = []
        self.places: list[int] = []
        self.batches: list[int] = []
        self.out: list[int] = done.out
        self.width: int = done.width
        self.metas = [_new(BatchMetadata, meta) for meta in done.batches]
        self.offset_entries: bytearray = done.offset_entries
        self.time_entries: bytearray = done.time_entries
        self.marker_fields, self.coordinator_epoch = marker_fields, coordinator_epoch

    def book(self) -> None:
        """Each taken partition's index entries and producer entry as its append leaves them:
        its kt_commit_out, its first entry's slot in the call's packed entries (its first
        batch's row plus its place), the last five of its batches' metadata."""
        width, metas = self.width, self.metas
        producer_id, _, timestamp = self.marker_fields
        for j, log in enumerate(self.logs):
            k = self.places[j]
            row = self.out[k * width : (k + 1) * width]
            (_, end_offset, _, _, _, _, _, _, offsets, times, first_offset, last_offset,
             first_ts, first_ts_offset, last_ts, last_ts_offset) = row  # fmt: skip
            first = self.batches[2 * j]
            end, slot = first + self.batches[2 * j + 1], first + k
            if offsets:
                at = _OFFSET_ENTRY * slot
                packed = self.offset_entries[at : at + _OFFSET_ENTRY * offsets]
                self.offset_indexes[j].append_packed(packed, first_offset, last_offset, offsets)
            if times:
                at = _TIME_ENTRY * slot
                packed = self.time_entries[at : at + _TIME_ENTRY * times]
                self.time_indexes[j].append_packed(packed, (first_ts, first_ts_offset),
                                                   (last_ts, last_ts_offset), times)  # fmt: skip
            retained = metas[max(first, end - NUM_BATCHES_TO_RETAIN) : end]  # the entry's five
            log.producer_state.add_committed(producer_id, retained, self.coordinator_epoch,
                                             timestamp, end_offset)  # fmt: skip


class Later:
    """The taken partitions' index entries and producer entries of one or more calls, kept
    to be set on their logs by :meth:`apply` (``append_committed_all``'s ``later``): at 1,024
    partitions about 10 ms of Python a micro-batch that the sink moves off its critical path.
    Until then a log's segment has its append (size, bytes since the last index entry) but its
    indexes lack the entries and its producer state the transaction and the log end offset."""

    __slots__ = ("_calls",)

    def __init__(self) -> None:
        self._calls: list[_Call] = []

    def add(self, books: _Call) -> None:
        self._calls.append(books)

    def apply(self) -> None:
        """Set everything kept, in the order kept, and forget it (a second call does nothing)."""
        calls, self._calls = self._calls, []
        for call in calls:
            call.book()

