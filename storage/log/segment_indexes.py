"""A segment's offset and time indexes, opened at their first use (Kafka's ``LazyIndex``).

A log dir of many partitions and segments touches the indexes of the active segments and of the
few a reader, retention or the cleaner looks into; the others stay closed, their files renamed
or deleted by name. Writable indexes count their maps in the segment's
:class:`~kafkatier.storage.file_budget.FileBudget`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kafkatier.storage.errors import StorageError
from kafkatier.storage.file_budget import FileBudget
from kafkatier.storage.index.lazy import LazyIndex
from kafkatier.storage.index.offset_index import OffsetIndex
from kafkatier.storage.index.time_index import TimeIndex

PathOf = Callable[[str], Path]  # a segment file's path from its extension, current suffix included


class SegmentIndexes:
    """The ``.index`` and ``.timeindex`` of one segment, each a :class:`LazyIndex`."""

    def __init__(
        self,
        path_of: PathOf,
        base_offset: int,
        max_index_size: int,
        *,
        writable: bool,
        read_indexes: bool,
        budget: FileBudget | None,
    ) -> None:
        """``read_indexes=False``: a read-only view whose indexes read as empty."""
        if writable and not read_indexes:
            raise ValueError(f"an empty view of {path_of('.index')} cannot be writable")
        self._path_of = path_of
        self._base_offset = base_offset
        self._max_index_size = max_index_size
        self._writable = writable
        self._empty = not read_indexes
        self._budget = budget
        self.offset = LazyIndex(path_of(".index"), self._load_offset)
        self.time = LazyIndex(path_of(".timeindex"), self._load_time)

    def _load_offset(self, path: Path) -> OffsetIndex:
        self._check_may_open(path)
        return OffsetIndex(path, self._base_offset, self._max_index_size, self._writable,
                           empty=self._empty, budget=self._budget)  # fmt: skip

    def _load_time(self, path: Path) -> TimeIndex:
        self._check_may_open(path)
        return TimeIndex(path, self._base_offset, self._max_index_size, self._writable,
                         empty=self._empty, budget=self._budget)  # fmt: skip

    def _check_may_open(self, path: Path) -> None:
        """A writable index creates its missing file, which must not resurrect the files of a
        segment another process removed (the sidecar's local retention)."""
        if self._writable and not path.exists() and not self._path_of(".log").exists():
            raise StorageError("segment removed by another process", file=str(path))

    def open_now(self) -> None:
        """Open both (a new segment's are created with it; a reader's are read once, now)."""
        self.offset.get()
        self.time.get()

    def flush(self) -> None:
        self.offset.flush()
        self.time.flush()

    def loaded(self) -> list[OffsetIndex | TimeIndex]:
        """The indexes opened so far (one never opened has nothing to write)."""
        return [i for i in (self.offset.loaded, self.time.loaded) if i is not None]

    @property
    def unwritten(self) -> bool:
        """Whether an entry appended is not yet in its file (``index/base.py``)."""
        return any(index.unwritten for index in self.loaded())

    def write_pending(self) -> None:
        """Every entry appended written into its file (before a syncfs meant to cover them)."""
        for index in self.loaded():
            index.write_pending()

    def close(self) -> None:
        """Close (trimmed, if writable) the opened ones; nothing for the others. The second is
        closed even when the first fails."""
        try:
            self.offset.close()
        finally:
            self.time.close()

    def close_handlers(self) -> None:
        """Unmap the opened ones without trimming, dropping entries not yet in their files."""
        self.offset.close_handler()
        self.time.close_handler()

    def rename(self) -> None:
        """Follow a new suffix: rename both files to what ``path_of`` now gives."""
        self.offset.rename_to(self._path_of(".index"))
        self.time.rename_to(self._path_of(".timeindex"))

    def delete(self) -> None:
        self.offset.delete()
        self.time.delete()
