"""Checks of a segment's ``.index``, ``.timeindex`` and ``.txnindex`` against its scanned ``.log``.

The offset and time indexes are preallocated and zero-filled (kafka-format.md §4, §5), so the
active segment's files may end in unwritten zero slots; a rolled segment's must have been trimmed.
"""

from __future__ import annotations

from pathlib import Path

from kafkatier.storage.errors import CorruptIndexError
from kafkatier.storage.index.base import FixedEntryIndex
from kafkatier.storage.index.offset_index import OffsetIndex
from kafkatier.storage.index.time_index import TimeIndex
from kafkatier.storage.index.txn_index import AbortedTxn, TransactionIndex
from kafkatier.storage.verify.problem import Findings
from kafkatier.storage.verify.segment import SegmentFacts


def valid_slots(index: FixedEntryIndex, active: bool = True) -> int:
    """Slots before the trailing run of all-zero slots: the preallocated, never written part.

    Kafka never writes an offset entry at position 0 (the first batch of a segment is never
    indexed), so an all-zero offset slot is always unwritten space, even the first one. A time
    index's first entry is all zeros where the segment's largest timestamp so far was 0 (a
    record at the epoch, at relative offset 0): Kafka appends it, its time index starting
    below any timestamp. A rolled segment's index is trimmed to its entries, so there that
    slot is one; in the active segment's it cannot be told from unwritten space.
    """
    if index.entries == 0:
        return 0
    used = -(-len(index.path.read_bytes().rstrip(b"\0")) // index.ENTRY.size)
    if used == 0 and not active and isinstance(index, TimeIndex):
        used = 1
    return min(index.entries, used)


def _check_layout(index: FixedEntryIndex, active: bool, found: Findings) -> int:
    """Length and zero tail; returns the number of written slots."""
    size = index.ENTRY.size
    if index.size_in_bytes % size:
        found.add(
            index.path,
            index.size_in_bytes - index.size_in_bytes % size,
            f"length {index.size_in_bytes} is not a multiple of the {size}-byte entry",
        )
    used = valid_slots(index, active)
    if used < index.entries and not active:
        found.add(
            index.path,
            used * size,
            f"{index.entries - used} zero-filled slots after the "
            "last entry: the index was not trimmed when the segment was rolled, and "
            "Kafka reads them as entries",
        )
    return used


def check_offset_index(
    index: OffsetIndex, facts: SegmentFacts, active: bool, found: Findings
) -> None:
    """Each entry ``(o, p)``: ``p`` starts a batch and ``o`` is the last offset of that batch or,
    since Kafka 3.x indexes a whole multi-batch append at once, of a later batch of the same
    append. Either way a lookup that starts scanning at ``p`` finds every offset >= ``o``, because
    the batch before ``p`` ends below ``o``. Entries strictly increase in both fields."""
    previous: tuple[int, int] | None = None
    for slot in range(_check_layout(index, active, found)):
        offset, position = index.entry(slot)
        where = (index.path, slot * 8, offset)
        if previous is not None and (offset <= previous[0] or position <= previous[1]):
            _add(
                found,
                where,
                f"entry (offset {offset}, position {position}) does not follow "
                f"(offset {previous[0]}, position {previous[1]}): entries must increase",
            )
        previous = (offset, position)
        message = _offset_entry_problem(offset, position, facts)
        if message is not None:
            _add(found, where, message)


def _offset_entry_problem(offset: int, position: int, facts: SegmentFacts) -> str | None:
    if position >= facts.end:  # beyond a torn or corrupt end already reported: not checked
        return (
            None
            if facts.end < facts.size
            else (
                f"entry points to position {position}, past the end of the log ({facts.size} bytes)"
            )
        )
    at = facts.batch_at(position)
    if at is None:
        return f"entry (offset {offset}, position {position}) does not point to a batch start"
    ending = facts.batch_ending_at(offset)
    if ending is None or ending < at:
        return (
            f"entry offset {offset} is not the last offset of the batch at position "
            f"{position} (offsets {facts.bases[at]}..{facts.lasts[at]}) or of a later batch"
        )
    return None


def check_time_index(index: TimeIndex, facts: SegmentFacts, active: bool, found: Findings) -> None:
    """Each entry ``(t, o)``: ``o`` lies in a batch whose max timestamp is ``t`` and no earlier
    batch has a larger one (Kafka records the batch's last offset, 3.7+ the record's); timestamps
    strictly increase. A rolled segment's last entry must be its max timestamp: after a restart
    Kafka takes it as the segment's largest timestamp for retention."""
    previous: tuple[int, int] | None = None
    last_ts = -1
    for slot in range(_check_layout(index, active, found)):
        timestamp, offset = index.entry(slot)
        where = (index.path, slot * 12, offset)
        if previous is not None and (timestamp <= previous[0] or offset < previous[1]):
            _add(
                found,
                where,
                f"entry (timestamp {timestamp}, offset {offset}) does not follow "
                f"(timestamp {previous[0]}, offset {previous[1]}): timestamps must increase",
            )
        previous, last_ts = (timestamp, offset), timestamp
        message = _time_entry_problem(timestamp, offset, facts)
        if message is not None:
            _add(found, where, message)
    largest = facts.max_timestamp
    if not active and not facts.damaged and largest >= 0 and last_ts != largest:
        found.add(
            index.path,
            None,
            f"last entry timestamp {last_ts} is not the segment's "
            f"largest timestamp {facts.max_timestamp}: a restarted broker would apply "
            "retention by the wrong time",
        )


def _time_entry_problem(timestamp: int, offset: int, facts: SegmentFacts) -> str | None:
    at = facts.batch_holding(offset)
    if at is None:
        beyond_damage = facts.damaged and (not facts.lasts or offset > facts.lasts[-1])
        return None if beyond_damage else f"entry offset {offset} is in no batch of the log"
    if facts.max_ts[at] != timestamp or facts.running_max[at] != timestamp:
        return (
            f"entry timestamp {timestamp} is not the largest timestamp up to offset {offset}: "
            f"the batch holding it has {facts.max_ts[at]}, the segment up to there "
            f"{facts.running_max[at]}"
        )
    return None


def read_txn_index(index: TransactionIndex, found: Findings) -> list[AbortedTxn]:
    """The entries, checked for layout and order (kafka-format.md §6)."""
    size, length = AbortedTxn.SIZE, index.size_in_bytes
    if length % size:
        found.add(
            index.path,
            length - length % size,
            f"length {length} is not a multiple of "
            f"the {size}-byte entry: a partial entry at the end",
        )
    try:
        entries = index.all_entries()
    except CorruptIndexError as exc:
        found.add(index.path, exc.context.get("position"), exc.message)
        return []
    previous = None
    for i, txn in enumerate(entries):
        where = (index.path, i * size, txn.last_offset)
        if txn.last_offset < index.base_offset:
            _add(
                found,
                where,
                f"aborted transaction ends at {txn.last_offset}, below the "
                f"segment's base offset {index.base_offset}",
            )
        if txn.first_offset > txn.last_offset:
            _add(
                found,
                where,
                f"first offset {txn.first_offset} is after the ABORT marker "
                f"offset {txn.last_offset}",
            )
        if previous is not None and txn.last_offset <= previous:
            _add(found, where, f"last offset {txn.last_offset} does not follow {previous}")
        previous = txn.last_offset
    return entries


def _add(found: Findings, where: tuple[Path, int, int], message: str) -> None:
    """A problem with an index entry: the file, the entry's byte position, its offset."""
    path, position, offset = where
    found.add(path, position, message, offset=offset)
