"""The batch headers of a ``.log`` file read through a window of the file, not one ``pread`` each.

A reader planning over a thousand small partitions walks the tail of each one's active segment
(``bounds.scan_bounds``: the log end offset, transactions still open). Batches sit back to
back (kafka-format.md §1, §9): ``baseOffset`` int64, ``batchLength`` int32, then for v2 the rest
of the 61-byte header (``attributes`` at 21, ``lastOffsetDelta`` at 23, ``producerId`` at 43);
a legacy v0/v1 message's offset is its last. Small batches are read ``WINDOW`` bytes at a time
(a small segment costs one read), a large one's header alone (a segment of large batches is
not read whole), and only through ``pread``: never a map (a writer recovering
from a crash truncates a torn tail, and a mapped page past the end of file is SIGBUS).
Framing follows ``batch_position.header_at``: a partial batch at the end is where the log ends
(it is being written), a header no batch can have is corruption.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import numpy as np

from kafkatier.storage import wire
from kafkatier.storage.errors import CorruptRecordError
from kafkatier.storage.log.batch_position import BatchPosition
from kafkatier.storage.log.header_table import (
    Header,
    HeaderList,
    Headers,
    HeaderTable,
    empty,
)
from kafkatier.storage.native import native

WINDOW = 1 << 20
LARGE_BATCH = WINDOW // 16
"""After a batch this large, the next read is of one header: batches are often alike."""
TAKEN = 64
"""Headers framed in Python at a time by :meth:`LogFile.tables` (a window's worth in C)."""
SMALL = 64 * 1024
"""Bytes left to frame up to which Python frames them (:meth:`LogFile.table`): a few batches
cost less as objects than numpy's calls over rows (the reader's planning at 1,024 partitions
of 25 KB, ``bench/scale_read.py --partitions 8,1024 --jvm``: 0.14 s, as before C framed tails;
0.20 s with every tail framed in C)."""


class LogFile:
    """A ``.log`` file opened read-only: its size at opening, its batch headers, and bytes read
    as from a ``LogSegment`` (``read_bytes``, ``log_path``) without opening its indexes."""

    def __init__(self, path: str) -> None:
        self.log_path = path
        self.fd = os.open(path, os.O_RDONLY)
        self.size = os.fstat(self.fd).st_size

    def close(self) -> None:
        os.close(self.fd)

    def __enter__(self) -> LogFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def read_bytes(self, position: int, size: int) -> bytes:
        return os.pread(self.fd, size, position)

    def headers(self, position: int = 0) -> Iterator[Header]:
        """Every whole batch from ``position`` to the size at opening (module docstring)."""
        window, begin, step = b"", position, WINDOW
        while position + wire.HEADER_SIZE_UP_TO_MAGIC <= self.size:
            if position + wire.BATCH_HEADER_SIZE > begin + len(window):
                window, begin = self.read_bytes(position, step), position
            found = self._header(window, position - begin, position)
            if found is None:
                return
            yield found
            position += found.at.size
            step = WINDOW if found.at.size <= LARGE_BATCH else wire.BATCH_HEADER_SIZE

    def table(self, position: int = 0) -> Headers:
        """:meth:`headers` as a table, framed by ``storage/native/headers.c`` where the library
        is built: 80,000 batches of 1.3 KB (100 MiB) in 27-35 ms against 0.47-0.54 s in Python
        (``python bench/tail_walk.py``), so a query tailing a long active segment or a fetch
        near its end no longer pays a Python walk of it."""
        if self._in_python(position):
            return HeaderList(self.headers(position))
        parts = [part.rows for part in self.tables(position)]
        return HeaderTable(np.concatenate(parts) if parts else empty())

    def tables(self, position: int = 0) -> Iterator[Headers]:
        """:meth:`table` a window at a time, each framed when it is asked for: a reader that
        wants the batches after ``position`` up to some size frames no more of the file."""
        if self._in_python(position):
            walked = self.headers(position)
            while chunk := list(itertools.islice(walked, TAKEN)):
                yield HeaderList(chunk)
            return
        from kafkatier.storage.native.headers import walk_headers  # numpy, cffi: bound now

        window, begin, step = b"", position, WINDOW
        while position + wire.HEADER_SIZE_UP_TO_MAGIC <= self.size:
            if position + wire.BATCH_HEADER_SIZE > begin + len(window):
                window, begin = self.read_bytes(position, step), position
            rows, end = walk_headers(window, position - begin, self.size - begin)
            if not len(rows):  # framed the Python way: read on, the log's end, or the fault
                found = self._header(window, position - begin, position)
                if found is None:
                    return
                rows = HeaderList([found]).rows
                end = position - begin + found.at.size
            else:
                rows[:, 0] += begin
            yield HeaderTable(rows)
            position = begin + end
            step = WINDOW if rows[-1, 1] <= LARGE_BATCH else wire.BATCH_HEADER_SIZE

    def _in_python(self, position: int) -> bool:
        """Whether the rest of the file from ``position`` is framed in Python: it is small
        (:data:`SMALL`), or the C library is not to be had."""
        return self.size - position <= SMALL or native() is None

    def _header(self, window: bytes, i: int, position: int) -> Header | None:
        if len(window) - i < wire.HEADER_SIZE_UP_TO_MAGIC:
            return None  # truncated since opening
        base, length = wire.OFFSET_AND_LENGTH.unpack_from(window, i)
        magic = window[i + wire.MAGIC_OFFSET]
        size = wire.LOG_OVERHEAD + length
        if length < wire.MIN_LEGACY_RECORD_SIZE or magic > 2:
            raise CorruptRecordError(
                f"invalid batch header (length {length}, magic {magic})",
                file=self.log_path,
                position=position,
            )
        if position + size > self.size:
            return None
        if magic < 2:
            return Header(BatchPosition(position, size, base, base, magic), 0, -1)
        if len(window) - i < wire.BATCH_HEADER_SIZE:
            return None
        fields = wire.BATCH_HEADER.unpack_from(window, i)
        last = base + fields[6]
        return Header(BatchPosition(position, size, base, last, magic), fields[5], fields[9])
