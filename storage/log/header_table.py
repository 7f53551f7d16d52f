"""The batch headers of a ``.log`` file as rows of int64s, not a Python object each.

A row is what a reader locating batches and a transaction tracker need of one batch
(``LogFile.table`` frames them, ``storage/native/headers.c`` where the library is built):

    position      int64  where the batch starts in the file
    size          int64  LOG_OVERHEAD + batchLength
    base_offset   int64
    last_offset   int64  baseOffset + lastOffsetDelta (a legacy message's own offset)
    magic         int64
    attributes    int64  0 for a legacy message: never transactional
    producer_id   int64  -1 for a legacy message

56 bytes a batch against 241 for a ``Header`` and its ``BatchPosition`` (tracemalloc, stop 72),
made in C without a Python object a batch (``storage/native/headers.c``); the transaction scan
and the search for an offset run over the columns in numpy rather than a Python loop a batch.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kafkatier.storage.log.batch_position import BatchPosition
from kafkatier.storage.wire import ATTR_TRANSACTIONAL

Rows = npt.NDArray[np.int64]
FIELDS = 7
POSITION, SIZE, BASE, LAST, MAGIC, ATTRIBUTES, PRODUCER = range(FIELDS)  # the columns
CHUNK = 4096
"""Rows turned into Python objects at a time: a reader of the end of a long table pays for the
rows it takes, not for all of them."""


@dataclass(frozen=True, slots=True)
class Header:
    """One batch found in a file, with what a transaction tracker needs of its header (a row
    as an object, for the few rows that are taken one by one)."""

    at: BatchPosition
    attributes: int  # 0 for legacy messages: never transactional
    producer_id: int


def empty() -> Rows:
    return np.empty((0, FIELDS), np.int64)


class HeaderTable:
    """A ``.log`` file's batch headers in file order (module docstring)."""

    __slots__ = ("rows",)

    def __init__(self, rows: Rows) -> None:
        self.rows = rows

    def __len__(self) -> int:
        return int(self.rows.shape[0])

    @property
    def last(self) -> BatchPosition | None:
        """The last batch (None: none)."""
        return BatchPosition(*self.rows[-1, :ATTRIBUTES].tolist()) if len(self) else None

    def start_of(self, offset: int) -> int:
        """The index of the first batch whose last offset is >= ``offset`` (len: none)."""
        return int(np.searchsorted(self.rows[:, LAST], offset, side="left"))

    def positions(self, start: int = 0) -> Iterator[BatchPosition]:
        """The batches from index ``start``, made as they are taken (:data:`CHUNK` at a time)."""
        for first in range(start, len(self), CHUNK):
            for p, size, base, last, magic, _a, _p in self.rows[first : first + CHUNK].tolist():
                yield BatchPosition(p, size, base, last, magic)

    def transactional(self, offset: int) -> list[Header]:
        """The transactional batches (data and markers) whose last offset is >= ``offset``, in
        file order: all a transaction tracker needs to see."""
        rows = self.rows
        transactional = rows[:, ATTRIBUTES] & ATTR_TRANSACTIONAL != 0
        if not transactional.any():  # most topics: one test, no more arrays
            return []
        found = transactional & (rows[:, LAST] >= offset)
        return [Header(BatchPosition(p, s, b, last, m), a, pid)
                for p, s, b, last, m, a, pid in rows[found].tolist()]  # fmt: skip


class HeaderList:
    """:class:`HeaderTable`'s answers over ``Header`` objects, for the few batches ``LogFile``
    frames in Python (a small tail, ``tail.SMALL``: numpy's calls cost more than the loop
    there)."""

    __slots__ = ("headers",)

    def __init__(self, headers: Iterable[Header]) -> None:
        self.headers = list(headers)

    @property
    def rows(self) -> Rows:
        found = [(h.at.position, h.at.size, h.at.base_offset, h.at.last_offset, h.at.magic,
                  h.attributes, h.producer_id) for h in self.headers]  # fmt: skip
        return np.array(found, np.int64).reshape(-1, FIELDS)

    def __len__(self) -> int:
        return len(self.headers)

    @property
    def last(self) -> BatchPosition | None:
        return self.headers[-1].at if self.headers else None

    def start_of(self, offset: int) -> int:
        return bisect.bisect_left(self.headers, offset, key=lambda h: h.at.last_offset)

    def positions(self, start: int = 0) -> Iterator[BatchPosition]:
        return (h.at for h in self.headers[start:])

    def transactional(self, offset: int) -> list[Header]:
        return [h for h in self.headers
                if h.attributes & ATTR_TRANSACTIONAL and h.at.last_offset >= offset]  # fmt: skip


Headers = HeaderTable | HeaderList
"""A file's batch headers, as rows or as objects (the same answers)."""

