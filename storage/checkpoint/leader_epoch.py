"""The leader-epoch cache of a partition and its ``leader-epoch-checkpoint`` (kafka-format.md §8.3).

The rules follow ``storage/.../epoch/LeaderEpochFileCache.java``; the file is a version-0
checkpoint (see checkpoints) whose entries are ``<epoch> <start offset>`` in ascending order.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Final, NamedTuple

from kafkatier.storage.checkpoint.checkpoint_file import (
    INT64_RANGE,
    CheckpointFile,
    parse_java_int,
    split_java_whitespace,
)
from kafkatier.storage.errors import CheckpointError, StorageError

LEADER_EPOCH_CHECKPOINT: Final = "leader-epoch-checkpoint"
LEADER_EPOCH_CHECKPOINT_VERSION: Final = 0
UNDEFINED_EPOCH: Final = -1  # OffsetsForLeaderEpochResponse.UNDEFINED_EPOCH
UNDEFINED_EPOCH_OFFSET: Final = -1  # OffsetsForLeaderEpochResponse.UNDEFINED_EPOCH_OFFSET


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


def _format_entry(entry: EpochEntry) -> str:
    return f"{entry.epoch} {entry.start_offset}"


def _parse_entry(line: str) -> EpochEntry | None:
    parts = split_java_whitespace(line)
    if len(parts) != 2:
        return None
    return EpochEntry(parse_java_int(parts[0]), parse_java_int(parts[1], INT64_RANGE))


class LeaderEpochFileCache:
    """Which leader epoch began at which offset, kept in ``leader-epoch-checkpoint``.

    On disk, a version-0 checkpoint, e.g. a fresh single-leader partition::

        0
        1
        0 0

    Entries are strictly increasing in both epoch and start offset; ``assign`` keeps them so by
    dropping conflicting later entries. Mutations stay in memory until :meth:`flush` (Kafka writes
    on assignment and in the background after truncation; callers here choose when).
    Loading replays the file through ``assign``, so a file with out-of-order entries loads as
    Kafka would load it.
    """

    def __init__(self, path: Path, *, read: bool = True) -> None:
        """``read``: load the file (False: start empty, for a file known not to exist yet)."""
        self.path = path
        self._file: CheckpointFile[EpochEntry] = CheckpointFile(
            path, LEADER_EPOCH_CHECKPOINT_VERSION, _format_entry, _parse_entry
        )
        self._entries: list[EpochEntry] = []
        for entry in self._file.read() if read else ():
            try:
                self._assign(entry)
            except StorageError as e:
                raise CheckpointError(e.message, file=str(path), **e.context) from None
        self._dirty = False

    @classmethod
    def of_new_partition(cls, path: Path) -> LeaderEpochFileCache:
        """A new partition's cache: epoch 0 from offset 0, as a broker writes it when it becomes
        the leader of a new partition (``storage/log/creation.py`` stages it so, and a log of
        a directory known new starts from it without reading it back)."""
        cache = cls(path, read=False)
        cache._assign(EpochEntry(0, 0))
        return cache

    @property
    def entries(self) -> list[tuple[int, int]]:
        """(epoch, start offset) pairs, oldest first."""
        return list(self._entries)

    @property
    def dirty(self) -> bool:
        """True when the cache differs from what was last read or flushed."""
        return self._dirty

    @property
    def latest_epoch(self) -> int | None:
        return self._entries[-1].epoch if self._entries else None

    @property
    def latest_entry(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    def epoch_entry(self, epoch: int) -> EpochEntry | None:
        return next((e for e in self._entries if e.epoch == epoch), None)

    def previous_epoch(self, epoch: int) -> int | None:
        """The largest cached epoch below ``epoch``."""
        lower = [e.epoch for e in self._entries if e.epoch < epoch]
        return lower[-1] if lower else None

    def next_epoch(self, epoch: int) -> int | None:
        """The smallest cached epoch above ``epoch``."""
        return next((e.epoch for e in self._entries if e.epoch > epoch), None)

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; True if the cache changed.

        Kafka's rule: a new entry is needed when there is none yet, when ``epoch`` differs from
        the latest epoch, or when it equals it with a lower start offset. Before appending, every
        trailing entry whose epoch is >= ``epoch`` or whose start is >= ``start_offset`` is
        removed, which keeps both columns strictly increasing.
        """
        changed = self._assign(EpochEntry(epoch, start_offset))
        self._dirty |= changed
        return changed

    def assign_all(self, entries: Iterable[tuple[int, int]]) -> bool:
        changed = False
        for epoch, start_offset in entries:
            changed |= self.assign(epoch, start_offset)
        return changed

    def _assign(self, entry: EpochEntry) -> bool:
        if entry.epoch < 0 or entry.start_offset < 0:
            raise StorageError(
                "invalid partition leader epoch entry",
                epoch=entry.epoch, start_offset=entry.start_offset,
            )
        latest = self.latest_entry
        if latest is not None and entry.epoch == latest.epoch and (
            entry.start_offset >= latest.start_offset
        ):
            return False
        while self._entries and (
            self._entries[-1].epoch >= entry.epoch
            or self._entries[-1].start_offset >= entry.start_offset
        ):
            self._entries.pop()
        self._entries.append(entry)
        return True

    def truncate_from_end(self, end_offset: int) -> bool:
        """Drop every entry starting at or after ``end_offset`` (the log was truncated there)."""
        kept = _truncated_from_end(self._entries, end_offset)
        return self._replace(kept)

    def truncate_from_start(self, start_offset: int) -> bool:
        """Drop entries wholly below ``start_offset``; the one covering it moves to start there.

        Exclusive, as Kafka's: ``truncate_from_start(6)`` keeps an entry at offset 6.
        """
        kept = _truncated_from_start(self._entries, start_offset)
        return self._replace(kept)

    def clear(self) -> None:
        self._dirty |= bool(self._entries)
        self._entries = []

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch of the entry with the largest start offset <= ``offset``."""
        found: int | None = None
        for entry in self._entries:
            if entry.start_offset > offset:
                break
            found = entry.epoch
        return found

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka's ``endOffsetFor``: (largest epoch <= requested, where that epoch ended).

        The latest epoch ends at the log end; unknown or undefined epochs give (-1, -1); an epoch
        below every cached one answers with the first cached start offset.
        """
        if requested_epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if self.latest_epoch == requested_epoch:
            return requested_epoch, log_end_offset
        higher = next((e for e in self._entries if e.epoch > requested_epoch), None)
        if higher is None:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        floor = [e for e in self._entries if e.epoch <= requested_epoch]
        return (floor[-1].epoch if floor else requested_epoch), higher.start_offset

    def entries_in_range(self, start_offset: int, end_offset: int) -> list[tuple[int, int]]:
        """The entries as they would be after truncating to [start_offset, end_offset)."""
        kept = self._entries
        if start_offset >= 0:
            kept = _truncated_from_start(kept, start_offset)
        return list(_truncated_from_end(kept, end_offset))

    def encode(self) -> bytes:
        """The checkpoint's bytes for the entries now (what :meth:`flush` would write)."""
        return self._file.encode(self._entries)

    def flush(self, *, sync: bool = True) -> None:
        """Write the checkpoint (atomically) if it changed or does not exist yet."""
        if self._dirty or not self.path.exists():
            self._file.write(self._entries, sync=sync)
            self._dirty = False

    def _replace(self, kept: list[EpochEntry]) -> bool:
        changed = kept != self._entries
        self._entries = kept
        self._dirty |= changed
        return changed

    def __repr__(self) -> str:
        return f"LeaderEpochFileCache({str(self.path)!r}, entries={self._entries})"


def _truncated_from_end(entries: list[EpochEntry], end_offset: int) -> list[EpochEntry]:
    if end_offset < 0 or not entries or entries[-1].start_offset < end_offset:
        return list(entries)
    return [e for e in entries if e.start_offset < end_offset]


def _truncated_from_start(entries: list[EpochEntry], start_offset: int) -> list[EpochEntry]:
    below = [e for e in entries if e.start_offset <= start_offset]
    if not below:
        return list(entries)
    return [EpochEntry(below[-1].epoch, start_offset), *entries[len(below):]]
