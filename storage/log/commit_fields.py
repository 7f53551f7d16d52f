"""A partition's ``kt_commit_in`` (``storage/native/committed.c``): what the C library's committed
append of its batches starts from, read from the log's objects (:func:`read_fields`) or carried
over from the last call that appended to it (:class:`Carried`).

Why carried: reading a partition's state from its objects (its producer entry, its active
segment, both indexes, its settings) cost 9-14 us a partition in a plain process, while each
read timed alone added up to about half of that (likely the cache misses of touching some twenty
objects a partition), and about 12.6 ms of a warm micro-batch into 1,024 partitions; a carried
row costs 1.5-2.9 us (docs/performance.md, stop 66). A partition's state after a
call is its state before, moved by what the call did (``kt_commit_out``), so the next call can
start from that, as long as nothing else changed the log meanwhile.

``kt_commit_in``, one row of ints a partition (the field names are ``committed.c``'s):
batch start and count (its batches' rows in the call), first sequence, the producer's last
sequence, first offset (the producer state's map end offset), the active segment's base offset
and size (``I_POSITION``), the room left under ``segment.bytes``, the largest batch allowed
(``max.message.bytes``, at most ``segment.bytes``), the topic codec (-1: none), the indexes'
free slots (the fewer), the bytes since the last index entry, ``index.interval.bytes``, the
running max timestamp and its offset, the time index's last timestamp, the largest timestamp
the ``segment.ms`` rule allows, the leader epoch, the ``.log``'s pinned descriptor, then the
producer's retained last sequences, padded with -2 to five.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from kafkatier.storage import wire
from kafkatier.storage.log.committed import ready_entry
from kafkatier.storage.log.roll import time_roll_limit
from kafkatier.storage.producer.entry import NUM_BATCHES_TO_RETAIN

if TYPE_CHECKING:
    from kafkatier.storage.index.offset_index import OffsetIndex
    from kafkatier.storage.index.time_index import TimeIndex
    from kafkatier.storage.log.log import Log
    from kafkatier.storage.log.segment import LogSegment

Indexes = tuple["OffsetIndex", "TimeIndex"]

NOT_A_SEQUENCE: Final = -2  # pads the producer's retained last sequences to five
# kt_commit_in's fields used here
BATCH_START, BATCH_COUNT, FIRST_SEQUENCE, LAST_SEQ, FIRST_OFFSET = 0, 1, 2, 3, 4
POSITION, ROOM, INDEX_ROOM, SINCE, BEST_TS, BEST_OFFSET, LAST_TIME_TS = 6, 7, 10, 11, 13, 14, 15
TIME_LIMIT, LEADER_EPOCH, FD, RETAINED = 16, 17, 18, 19
# kt_commit_out's
STATUS, END_OFFSET, SIZE, O_SINCE, O_BEST_TS, O_BEST_OFFSET = 0, 1, 2, 5, 6, 7
OFFSET_ENTRIES, TIME_ENTRIES, LAST_TIME_ENTRY_TS = 8, 9, 14


def read_fields(
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
        *retained, *[NOT_A_SEQUENCE] * (NUM_BATCHES_TO_RETAIN - len(retained)),
    ], (offsets, times)  # fmt: skip


class Carried:
    """Each log's kt_commit_in as the last call that took it left it (:meth:`keep`), for the
    next call (:meth:`take`), with its active segment, its indexes and their free slots.

    Valid only while nothing but those calls (and the ``Later`` books they leave, applied in
    order) changes the logs: the caller forgets a log (:meth:`forget`) before appending to it
    any other way, and forgets them all before anything else may have touched them (a reopen,
    a recovery, a failed batch, another writer's turn). A call the library refused a partition
    in leaves it forgotten (taken entries are used once), so the full path's appends, rolls
    included, never meet a carried entry. What a carried entry cannot know it checks: the
    leader epoch (one attribute of the log), the ``segment.ms`` limit against the marker's
    timestamp; the producer, its epoch and the coordinator epoch are the calls' (another
    forgets every entry). A segment whose ``segment.ms`` rule goes by the clock (its first
    batch has no timestamp) is not carried."""

    __slots__ = ("_logs", "_producer")

    def __init__(self) -> None:
        self._logs: dict[Log, tuple[list[int], LogSegment, Indexes, int, int]] = {}
        self._producer: tuple[int, int, int] | None = None

    def __len__(self) -> int:
        return len(self._logs)

    def forget(self, log: Log | None = None) -> None:
        """Forget ``log``'s entry, or every entry (None)."""
        if log is None:
            self._logs.clear()
        else:
            self._logs.pop(log, None)

    def begin(self, producer: tuple[int, int, int]) -> None:
        """A call by ``producer`` (producer id, epoch, coordinator epoch) begins: every entry
        is forgotten if the last call's was another."""
        if producer != self._producer:
            self._logs.clear()
            self._producer = producer

    def take(
        self, log: Log, batches: Sequence[memoryview], first_sequence: int, timestamp: int,
        batch_start: int,
    ) -> tuple[list[int], LogSegment, Indexes, tuple[int, int]] | None:  # fmt: skip
        """``log``'s kt_commit_in for these batches (its ``.log`` pinned open, index space
        reserved), its segment, indexes and their free slots, from its entry, which is used up;
        None without one, or where the entry cannot say (the caller then reads the log:
        :func:`read_fields`)."""
        found = self._logs.pop(log, None)
        if found is None or not batches:
            return None
        ints, segment, indexes, offset_free, time_free = found
        if ints[TIME_LIMIT] < timestamp or ints[LEADER_EPOCH] != log.leader_epoch:
            return None
        segment.reserve_index_entries(indexes, len(batches) + 1)  # as ``placing_state``
        ints[BATCH_START], ints[BATCH_COUNT], ints[FIRST_SEQUENCE] = (
            batch_start, len(batches), first_sequence
        )  # fmt: skip
        ints[FD] = segment.pin_for_write(sum([batch.nbytes for batch in batches]))
        return ints, segment, indexes, (offset_free, time_free)

    def keep(
        self, log: Log, ints: list[int], segment: LogSegment, indexes: Indexes,
        free: tuple[int, int] | None, row: Sequence[int], last_seqs: list[int],
    ) -> None:  # fmt: skip
        """``log``'s entry after a call took it: ``ints`` its kt_commit_in in the call (the
        list is kept and changed), ``free`` its indexes' free slots before it (None: read
        them, the call's appends not yet set on them), ``row`` its kt_commit_out,
        ``last_seqs`` its batches' last sequences in order."""
        if free is None:
            based = segment.rolling_based_timestamp
            if based is None or based < 0:
                return  # the segment.ms limit goes by the clock: read it every time
            free = indexes[0].free_slots, indexes[1].free_slots
        offset_free = free[0] - row[OFFSET_ENTRIES]
        time_free = free[1] - row[TIME_ENTRIES]
        size = row[SIZE]
        retained = [seq for seq in ints[RETAINED:] if seq != NOT_A_SEQUENCE] + last_seqs
        retained = retained[-NUM_BATCHES_TO_RETAIN:]
        ints[RETAINED:] = [*retained, *[NOT_A_SEQUENCE] * (NUM_BATCHES_TO_RETAIN - len(retained))]
        ints[LAST_SEQ], ints[FIRST_OFFSET] = retained[-1], row[END_OFFSET]
        ints[POSITION] += size
        ints[ROOM] -= size
        ints[INDEX_ROOM] = min(offset_free, time_free)
        ints[SINCE], ints[BEST_TS], ints[BEST_OFFSET] = row[O_SINCE : O_BEST_OFFSET + 1]
        if row[TIME_ENTRIES]:
            ints[LAST_TIME_TS] = row[LAST_TIME_ENTRY_TS]
        self._logs[log] = (ints, segment, indexes, offset_free, time_free)
