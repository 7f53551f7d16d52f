"""The ``.index`` file: a sparse map from offsets to byte positions in the segment's ``.log``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

from kafkatier.storage import wire
from kafkatier.storage.errors import CorruptIndexError
from kafkatier.storage.file_budget import FileBudget
from kafkatier.storage.index.base import FixedEntryIndex, InvalidIndexEntryError

DEFAULT_MAX_INDEX_SIZE = 10 * 1024 * 1024  # segment.index.bytes


class OffsetIndex(FixedEntryIndex):
    """Kafka's ``OffsetIndex`` (kafka-format.md §4).

    On disk: 8-byte entries, no header, big-endian::

        int32 relative offset   offset - base_offset, strictly increasing
        int32 position          byte position of a batch in the .log

    An entry ``(o, p)`` says the batch starting at ``p`` ends at offset ``o`` (Kafka writes the
    batch's *last* offset with its *start* position). Lookups round down: the segment then scans
    forward from the position, so a sparse index only costs scan length, never correctness.
    """

    ENTRY: ClassVar = wire.OFFSET_INDEX_ENTRY
    OFFSET_FIELD: ClassVar[int] = 0

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
        self._last_offset = self._last_entry()[0]

    def _parse(self, slot: int) -> tuple[int, int]:
        relative, position = self._raw(slot)
        return self.base_offset + relative, position

    def _last_entry(self) -> tuple[int, int]:
        if self._entries == 0:
            return self.base_offset, 0
        return self._parse(self._entries - 1)

    def _entries_changed(self) -> None:
        self._last_offset = self._last_entry()[0]

    @property
    def last_offset(self) -> int:
        """The last entry's offset, or the base offset when empty."""
        return self._last_offset

    def append(self, offset: int, position: int) -> None:
        """Add ``(offset, position)``; the offset must exceed every earlier one."""
        self.append_all(((offset, position),))

    def append_all(self, entries: Sequence[tuple[int, int]]) -> None:
        """:meth:`append` of each ``(offset, position)`` in turn, all checked before any is
        stored (a segment indexes the batches of one append at once)."""
        if not entries:
            return
        with self._lock:
            self._check_can_append(self._entries + len(entries) > self.max_entries)
            last, slot, pack = self._last_offset, self._entries, self.ENTRY.pack
            packed = bytearray()
            for offset, position in entries:
                if slot and offset <= last:
                    self._refuse(offset, last, slot)
                packed += pack(self._relative_offset(offset), position)
                last, slot = offset, slot + 1
            self._write(packed, len(entries))
            self._last_offset = last

    def append_packed(self, packed: bytearray, first: int, last: int, count: int) -> None:
        """:meth:`append_all` of ``count`` entries the caller packed (``ENTRY``, offsets
        relative to this index's base), their offsets increasing from ``first`` to ``last``:
        the same checks, on those two (the segment's one pass over an append's batches)."""
        with self._lock:
            self._check_can_append(self._entries + count > self.max_entries)
            if self._entries and first <= self._last_offset:
                self._refuse(first, self._last_offset, self._entries)
            self._relative_offset(first)  # each raises where it does not fit the index
            self._relative_offset(last)
            self._write(packed, count)
            self._last_offset = last

    def _refuse(self, offset: int, last: int, slot: int) -> None:
        raise InvalidIndexEntryError(
            f"offset {offset} is no larger than the last offset {last}",
            file=str(self._path),
            slot=slot,
        )

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """The entry with the largest offset <= ``target_offset``, else ``(base_offset, 0)``."""
        with self._lock:
            slot = self._largest_lower_bound(target_offset, 0)
            return (self.base_offset, 0) if slot < 0 else self._parse(slot)

    def sanity_check(self) -> None:
        with self._lock:
            if self._entries and self._last_offset < self.base_offset:
                raise CorruptIndexError(
                    f"last offset {self._last_offset} is below the base offset {self.base_offset}",
                    file=str(self._path),
                    position=(self._entries - 1) * self.ENTRY.size,
                )
            self._check_length()
