"""Kafka's ``LazyIndex``: a segment's offset or time index, opened and mapped at first use.

A log of many segments touches the indexes of the active one and, now and then, of the few a
reader, retention or the cleaner looks into; Kafka therefore opens an index file only when it
is first needed, and renames or deletes an index never opened by its name alone. Closing one
never opened does nothing to its file (its last close already trimmed it).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

from kafkatier.storage.index.base import FixedEntryIndex

I = TypeVar("I", bound=FixedEntryIndex)  # noqa: E741 - Kafka's name for it


class LazyIndex(Generic[I]):
    """The index at ``path``, built by ``load(path)`` at the first :meth:`get`."""

    def __init__(self, path: Path, load: Callable[[Path], I]) -> None:
        self._path = path
        self._load = load
        self._index: I | None = None
        self._closed = False
        self._lock = threading.Lock()

    @property
    def path(self) -> Path:
        return self._path

    @property
    def loaded(self) -> I | None:
        """The index if it was opened, else None (nothing is opened)."""
        return self._index

    def get(self) -> I:
        """The index, opened now if it was not; after :meth:`close` it is opened only to be
        returned closed (a rename or delete through it still works)."""
        index = self._index
        if index is None:
            with self._lock:
                index = self._index
                if index is None:
                    index = self._index = self._load(self._path)
                    if self._closed:
                        index.close_handler()
        return index

    def rename_to(self, path: Path) -> None:
        with self._lock:
            if self._index is not None:
                self._index.rename_to(path)
            elif self._path.exists():
                os.replace(self._path, path)
            self._path = path

    def delete(self) -> bool:
        """Unmap (if open) and delete the file; False if it was missing."""
        with self._lock:
            self._closed = True
            if self._index is not None:
                return self._index.delete()
            try:
                self._path.unlink()
            except FileNotFoundError:
                return False
            return True

    def flush(self) -> None:
        if self._index is not None:
            self._index.flush()

    def close(self) -> None:
        """Kafka's close (trim, unmap) of an opened index; nothing for one never opened."""
        with self._lock:
            self._closed = True
            if self._index is not None:
                self._index.close()

    def close_handler(self) -> None:
        with self._lock:
            self._closed = True
            if self._index is not None:
                self._index.close_handler()
