"""The sink's committed appends of a micro-batch, every partition's in one call of the C library
(``storage/native/committed.c``): :func:`kafkatier.storage.log.committed.write_committed`'s
one-pass case over arrays, with the Python left to reading each partition's state (or carrying
it from the last call: :mod:`~kafkatier.storage.log.commit_fields`) and setting what changed.

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
from kafkatier.storage.log import commit_fields as f
from kafkatier.storage.log.append import marker_bytes
from kafkatier.storage.log.commit_fields import Carried, Indexes, read_fields
from kafkatier.storage.log.queued_writes import QueuedWrites
from kafkatier.storage.producer.entry import NUM_BATCHES_TO_RETAIN, BatchMetadata

if TYPE_CHECKING:
    from kafkatier.storage.index.offset_index import OffsetIndex
    from kafkatier.storage.index.time_index import TimeIndex
    from kafkatier.storage.log.log import Log
    from kafkatier.storage.log.segment import LogSegment

_new = tuple.__new__  # a NamedTuple from a tuple of its fields, without its Python __new__

CHUNK: Final = 64
"""Partitions a call of the library takes (its writes are handed over together)."""

Append = tuple["Log", Sequence[memoryview], int]  # the log, its batches' bytes, first sequence
# its place in the appends, log, segment, indexes, kt_commit_in, the indexes' free slots (None:
# read from them)
Chosen = tuple[int, "Log", "LogSegment", Indexes, list[int], "tuple[int, int] | None"]


def append_committed_all(
    appends: Sequence[Append], marker_fields: tuple[int, int, int], queued: QueuedWrites,
    coordinator_epoch: int = 0, after_chunk: Callable[[], None] | None = None,
    chunk: int = CHUNK, later: Later | None = None, carried: Carried | None = None,
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
    next batch's job runs); None: set before this returns. ``carried``: each taken log's state
    as this call leaves it, for the next call to start from instead of reading the log
    (:class:`~kafkatier.storage.log.commit_fields.Carried`, whose rules the caller keeps)."""
    kernels = native.native()
    if kernels is None:
        return list(range(len(appends)))
    producer_id, producer_epoch, timestamp = marker_fields
    if carried is not None:
        carried.begin((producer_id, producer_epoch, coordinator_epoch))
    marker = marker_bytes(wire.ControlType.COMMIT, producer_id, producer_epoch, coordinator_epoch,
                          timestamp, wire.NO_PARTITION_LEADER_EPOCH)  # fmt: skip
    left: list[int] = []
    for start in range(0, len(appends), chunk):
        part = range(start, min(start + chunk, len(appends)))
        refused = _append_chunk(kernels, appends, part, marker, marker_fields, queued,
                                coordinator_epoch, later, carried)  # fmt: skip
        if refused is None:  # no CRC instruction here: nothing done, none will be
            return left + list(range(start, len(appends)))
        left += refused
        if after_chunk is not None and len(refused) < len(part):
            after_chunk()
    return left


def _append_chunk(
    kernels: Any, appends: Sequence[Append], chunk: range, marker: bytes,
    marker_fields: tuple[int, int, int], queued: QueuedWrites, coordinator_epoch: int,
    later: Later | None, carried: Carried | None,
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
            found = None if carried is None else carried.take(
                log, batches, first_sequence, marker_fields[2], len(views)
            )  # fmt: skip
            if found is None:
                read = read_fields(log, batches, first_sequence, marker_fields,
                                   coordinator_epoch, len(views))  # fmt: skip
                if read is None:
                    left.append(i)
                    continue
                (ints, indexes), segment, free = read, log.segments[-1], None
            else:
                ints, segment, indexes, free = found
            fields += ints
            views += batches
            chosen.append((i, log, segment, indexes, ints, free))
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
    for k, (i, _, segment, _, ints, _) in enumerate(chosen):
        at = k * width
        if out[at + f.STATUS]:  # refused: handed back
            segment.unpin_unused()
            left.append(i)
        else:
            taken.append(k)
            queued.track(segment, ints[f.FD], ints[f.POSITION], out[at + f.SIZE])
    queued.writes.filled(done.taken, done.keep)
    books = Later() if later is None else later
    books.add(_placed(chosen, taken, done, marker_fields, coordinator_epoch, carried))
    if later is None:
        books.apply()
    queued.relieve()  # no more files pinned than the queue may hold
    return sorted(left)


_OFFSET_ENTRY, _TIME_ENTRY = wire.OFFSET_INDEX_ENTRY.size, wire.TIME_INDEX_ENTRY.size
_META: Final = len(BatchMetadata._fields)  # a batch's ints in ``Committed.batches``


def _unpin(chosen: Sequence[Chosen]) -> None:
    for _, _, segment, _, _, _ in chosen:
        segment.unpin_unused()


def _placed(
    chosen: Sequence[Chosen], taken: list[int], done: Any, marker_fields: tuple[int, int, int],
    coordinator_epoch: int, carried: Carried | None,
) -> _Call:  # fmt: skip
    """The taken partitions' segments as their appends leave them (each one's kt_commit_out in
    ``done.out``), what :meth:`_Call.book` sets of them later, and what ``carried`` keeps."""
    out, width = done.out, done.width
    call = _Call(done, marker_fields, coordinator_epoch)  # not ``done``'s buffers
    for k in taken:
        _, log, segment, indexes, ints, free = chosen[k]
        at = k * width
        segment.placed(ints[f.POSITION] + out[at + f.SIZE], out[at + f.O_SINCE],
                       (out[at + f.O_BEST_TS], out[at + f.O_BEST_OFFSET]))  # fmt: skip
        call.logs.append(log)
        call.offset_indexes.append(indexes[0])
        call.time_indexes.append(indexes[1])
        call.places.append(k)
        first, count = ints[f.BATCH_START], ints[f.BATCH_COUNT]
        call.batches += (first, count)
        if carried is not None:
            last_seqs = done.batches[_META * first : _META * (first + count) : _META]
            carried.keep(log, ints, segment, indexes, free, out[at : at + width], last_seqs)
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
        self.metas: list[int] = done.batches  # 4 ints a batch (BatchMetadata's fields)
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
            retained = [_new(BatchMetadata, metas[_META * i : _META * i + _META])
                        for i in range(max(first, end - NUM_BATCHES_TO_RETAIN), end)]  # five
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

