"""The ``.txnindex`` file: aborted transactions whose ABORT marker landed in this segment."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from kafkatier.storage import wire
from kafkatier.storage.errors import CorruptIndexError
from kafkatier.storage.fsutil import as_path, fsync_file

ABORTED_TXN_VERSION = 0


@dataclass(frozen=True)
class AbortedTxn:
    """One 34-byte ``.txnindex`` entry (kafka-format.md §6), big-endian::

        int16 version            0
        int64 producer_id
        int64 first_offset       first offset of the transaction (maybe in an earlier segment)
        int64 last_offset        offset of the ABORT marker
        int64 last_stable_offset LSO when the marker was written

    Kafka writes one only for an aborted transaction with data, when its ABORT marker is appended.
    """

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    SIZE: ClassVar[int] = wire.ABORTED_TXN_ENTRY.size

    def pack(self) -> bytes:
        return wire.ABORTED_TXN_ENTRY.pack(
            ABORTED_TXN_VERSION,
            self.producer_id,
            self.first_offset,
            self.last_offset,
            self.last_stable_offset,
        )

    @classmethod
    def unpack(cls, buf: bytes | memoryview, pos: int = 0, file: str | None = None) -> AbortedTxn:
        """Parse the entry at ``pos``. Like Kafka, only the version's first (high) byte is read,
        as a signed byte, and only values above 0 are rejected."""
        if len(buf) - pos < cls.SIZE:
            raise CorruptIndexError("truncated aborted-transaction entry", file=file, position=pos)
        version_high_byte = int.from_bytes(buf[pos : pos + 1], "big", signed=True)
        if version_high_byte > ABORTED_TXN_VERSION:
            raise CorruptIndexError(
                f"unexpected aborted transaction version {version_high_byte}",
                file=file,
                position=pos,
            )
        _, pid, first, last, lso = wire.ABORTED_TXN_ENTRY.unpack_from(buf, pos)
        return cls(pid, first, last, lso)


class TransactionIndex:
    """Kafka's ``TransactionIndex``: a plain append-only file of :class:`AbortedTxn` entries.

    Not preallocated and created lazily by the first append, so a segment without aborted
    transactions may have no file at all. Entries have strictly increasing ``last_offset``; a
    partial entry at the end of the file is ignored, as Kafka's reader ignores it. Reads go to the
    file itself (it is small), so a read-only file can be read without a write handle. No
    descriptor is kept between appends (aborted transactions are rare, and a process holding
    thousands of segments must not hold one per file): each append opens, writes and closes,
    and :meth:`flush` fsyncs the file if an append came since the last flush.
    """

    def __init__(self, path: Path, base_offset: int) -> None:
        self._path = as_path(path)
        self.base_offset = base_offset
        self._lock = threading.RLock()
        self._unsynced = False
        self._last_offset: int | None = None
        self._last_offset_known = False

    @property
    def path(self) -> Path:
        return self._path

    @property
    def exists(self) -> bool:
        return self._path.exists()

    @property
    def size_in_bytes(self) -> int:
        try:
            return self._path.stat().st_size
        except FileNotFoundError:
            return 0

    def _entries_with_positions(self) -> Iterator[tuple[AbortedTxn, int]]:
        try:
            data = self._path.read_bytes()
        except FileNotFoundError:
            return
        size = AbortedTxn.SIZE
        for pos in range(0, len(data) - size + 1, size):
            yield AbortedTxn.unpack(data, pos, file=str(self._path)), pos

    def all_entries(self) -> list[AbortedTxn]:
        with self._lock:
            return [txn for txn, _ in self._entries_with_positions()]

    def __iter__(self) -> Iterator[AbortedTxn]:
        return iter(self.all_entries())

    def append(self, txn: AbortedTxn) -> None:
        """Write one entry at the end, creating the file if needed."""
        with self._lock:
            last = self._known_last_offset()
            if last is not None and txn.last_offset <= last:
                raise ValueError(
                    f"last offset {txn.last_offset} of an aborted transaction is not greater "
                    f"than the index's last offset {last} ({self._path})"
                )
            with open(self._path, "ab", buffering=0) as out:
                out.write(txn.pack())
            self._unsynced = True
            self._last_offset = txn.last_offset
            self._last_offset_known = True

    def _known_last_offset(self) -> int | None:
        """Kafka forgets the last offset on reopen; reading it back keeps the order check honest
        for appends after a restart too."""
        if not self._last_offset_known:
            entries = self.all_entries()
            self._last_offset = entries[-1].last_offset if entries else None
            self._last_offset_known = True
        return self._last_offset

    def collect_aborted_txns(
        self, fetch_offset: int, upper_bound_offset: int
    ) -> tuple[list[AbortedTxn], bool]:
        """Aborted transactions overlapping ``[fetch_offset, upper_bound_offset)``, and whether the
        search is complete: once an entry's LSO reaches the upper bound, no later segment can hold
        a transaction that overlaps the range."""
        found: list[AbortedTxn] = []
        for txn in self.all_entries():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return found, True
        return found, False

    def truncate_to(self, offset: int) -> None:
        """Drop every entry with ``last_offset >= offset`` (and everything after it)."""
        with self._lock:
            previous: int | None = None
            for txn, pos in self._entries_with_positions():
                if txn.last_offset >= offset:
                    os.truncate(self._path, pos)
                    self._last_offset, self._last_offset_known = previous, True
                    return
                previous = txn.last_offset

    def reset(self) -> None:
        """Empty the file if there is one; never create it."""
        with self._lock:
            if self._path.exists():
                os.truncate(self._path, 0)
            self._last_offset, self._last_offset_known = None, True

    def flush(self) -> None:
        """fsync the file if appended to since the last flush."""
        with self._lock:
            if self._unsynced:
                with contextlib.suppress(FileNotFoundError):  # deleted meanwhile: nothing to keep
                    fsync_file(self._path)
                self._unsynced = False

    def close(self) -> None:
        """Nothing is held open between appends; kept for the segment's close sequence."""

    def rename_to(self, path: Path) -> None:
        with self._lock:
            try:
                if self._path.exists():
                    os.replace(self._path, path)
            finally:
                self._path = as_path(path)

    def delete(self) -> bool:
        """Close and delete the file; ``False`` if there was none."""
        with self._lock:
            self.close()
            try:
                self._path.unlink()
            except FileNotFoundError:
                return False
            return True

    def sanity_check(self) -> None:
        """Every entry's ``last_offset`` must be at or above the segment's base offset."""
        for txn, pos in self._entries_with_positions():
            if txn.last_offset < self.base_offset:
                raise CorruptIndexError(
                    f"aborted transaction ends at {txn.last_offset}, "
                    f"below the segment base {self.base_offset}",
                    file=str(self._path),
                    position=pos,
                )
