"""The ``.timeindex`` file: the segment's running max timestamp, sampled with the offset index."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

from kafkatier.storage import wire
from kafkatier.storage.errors import CorruptIndexError
from kafkatier.storage.file_budget import FileBudget
from kafkatier.storage.index.base import FixedEntryIndex, InvalidIndexEntryError
from kafkatier.storage.index.offset_index import DEFAULT_MAX_INDEX_SIZE


class TimeIndex(FixedEntryIndex):
    """Kafka's ``TimeIndex`` (kafka-format.md §5).

    On disk: 12-byte entries, no header, big-endian::

        int64 timestamp         the segment's max timestamp so far, strictly increasing
        int32 relative offset   last offset of the batch that carried it, minus base_offset

    The last entry is what a restarted broker believes is the segment's largest timestamp, so it
    drives time retention. One slot is held back (``is_full`` at ``max_entries - 1``) for the
    entry written on roll or close with ``skip_full_check``. An empty index behaves as if its
    last entry were ``(-1, base_offset)``, which is why timestamp -1 never produces an entry.
    """

    ENTRY: ClassVar = wire.TIME_INDEX_ENTRY
    OFFSET_FIELD: ClassVar[int] = 1

    def __init__(
        self,
        path: Path,
        base_offset: int,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
        writable: bool = True,
        *,
        empty: bool = False,
        budget: FileBudget | None = None,
    ) -> None:
        super().__init__(path, base_offset, max_index_size, writable, empty=empty, budget=budget)
        self._last = self._last_entry_from_file()

    def _parse(self, slot: int) -> tuple[int, int]:
        timestamp, relative = self._raw(slot)
        return timestamp, self.base_offset + relative

    def _last_entry_from_file(self) -> tuple[int, int]:
        if self._entries == 0:
            return wire.NO_TIMESTAMP, self.base_offset
        return self._parse(self._entries - 1)

    def _entries_changed(self) -> None:
        self._last = self._last_entry_from_file()

    @property
    def last_entry(self) -> tuple[int, int]:
        """``(timestamp, offset)`` of the last entry, or ``(-1, base_offset)`` when empty."""
        return self._last

    @property
    def free_slots(self) -> int:
        return self.max_entries - 1 - self._entries  # the held-back slot (class docstring)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Append ``(timestamp, offset)`` if the timestamp is larger than the last entry's.

        Repeating the last entry is silently ignored (roll and close both re-offer it); going
        backwards in offset or timestamp is an error, as in Kafka.
        """
        self.maybe_append_all(((timestamp, offset),), skip_full_check)

    def maybe_append_all(
        self, entries: Sequence[tuple[int, int]], skip_full_check: bool = False
    ) -> None:
        """:meth:`maybe_append` of each ``(timestamp, offset)`` in turn, all checked before
        any is stored (a segment indexes the batches of one append at once)."""
        with self._lock:
            self._require_writable("append")
            slots, room, (last_ts, last_offset) = self._entries, self.free_slots, self._last
            packed = bytearray()
            for timestamp, offset in entries:
                if not skip_full_check and room <= 0:
                    self._check_can_append(True)
                if slots and offset < last_offset:
                    raise InvalidIndexEntryError(
                        f"offset {offset} is below the last offset {last_offset}",
                        file=str(self._path),
                        slot=slots,
                    )
                if slots and timestamp < last_ts:
                    raise InvalidIndexEntryError(
                        f"timestamp {timestamp} is below the last timestamp {last_ts}",
                        file=str(self._path),
                        slot=slots,
                    )
                if timestamp > last_ts:  # only a real write needs a free slot (as Java)
                    self._check_can_append(slots >= self.max_entries)
                    packed += self.ENTRY.pack(timestamp, self._relative_offset(offset))
                    slots, room, last_ts, last_offset = slots + 1, room - 1, timestamp, offset
            if packed:
                self._write(packed, slots - self._entries)
                self._last = (last_ts, last_offset)

    def append_packed(
        self, packed: bytearray, first: tuple[int, int], last: tuple[int, int], count: int
    ) -> None:
        """:meth:`maybe_append_all` of ``count`` entries the caller packed (``ENTRY``, offsets
        relative to this index's base), timestamps increasing and offsets not decreasing from
        ``first`` to ``last`` (each ``(timestamp, offset)``), every timestamp above the last
        entry's: the same checks, on those two (the segment's one pass over an append)."""
        with self._lock:
            self._require_writable("append")
            if count > self.free_slots:
                self._check_can_append(True)
            slots, (last_ts, last_offset) = self._entries, self._last
            if slots and (first[1] < last_offset or first[0] <= last_ts):
                raise InvalidIndexEntryError(
                    f"entry {first} does not follow the last entry {self._last}",
                    file=str(self._path),
                    slot=slots,
                )
            self._relative_offset(first[1])  # each raises where it does not fit the index
            self._relative_offset(last[1])
            self._write(packed, count)
            self._last = last

    def lookup(self, target_timestamp: int) -> tuple[int, int]:
        """The entry with the largest timestamp <= the target, else ``(-1, base_offset)``."""
        with self._lock:
            slot = self._largest_lower_bound(target_timestamp, 0)
            return (wire.NO_TIMESTAMP, self.base_offset) if slot < 0 else self._parse(slot)

    def sanity_check(self) -> None:
        with self._lock:
            last_ts, last_offset = self._last
            where = {"file": str(self._path), "position": (self._entries - 1) * self.ENTRY.size}
            if self._entries and last_ts < self._parse(0)[0]:
                raise CorruptIndexError(
                    f"last timestamp {last_ts} is below the first {self._parse(0)[0]}", **where
                )
            if self._entries and last_offset < self.base_offset:
                raise CorruptIndexError(
                    f"last offset {last_offset} is below the base offset {self.base_offset}",
                    **where,
                )
            self._check_length()
