"""Where a walk of the active segment's headers may start for an offset: its ``.index`` read as
a hint, as the JVM reader reads it (``sink/java/.../PartitionLog.java``).

The writer appends to the active segment's offset index while readers read (8-byte entries,
big-endian int32 relative last offset and int32 position of the batch it names; kafka-format.md
§4), a page of entries at a time and at each flush (``storage/index/base.py``: the entries of
the last few MiB of log may not be in the file yet). The file is preallocated, its unwritten
entries zero, and no entry names position 0 (Kafka indexes a batch only after
``index.interval.bytes`` of earlier ones), so the written entries are the prefix of those with a
position. An entry is only a hint: it is used once the
batch at its position is whole in the ``.log`` and ends at the offset it names, else the walk
starts at 0 as without an index (an entry written before its batch, an index trimmed or swapped
since). Without it a Spark task starting deep in a large active segment framed every header
before its range, at each trigger of a streaming query.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from kafkatier.storage import wire
from kafkatier.storage.errors import CorruptRecordError
from kafkatier.storage.log.batch_position import BatchPosition, header_at
from kafkatier.storage.log.tail import LogFile


def batches_from(log: LogFile, index: str, base: int, offset: int) -> Iterator[BatchPosition]:
    """The batches of the active segment ``log`` (``base``, its index at ``index``) from the
    first whose last offset is >= ``offset``, framed from where :func:`walk_start` says as
    they are taken (a fetch of a megabyte frames about that much, not the rest of the file);
    ``log`` stays open until the last is taken."""
    for table in log.tables(walk_start(log, index, base, offset)):
        yield from table.positions(table.start_of(offset))


def walk_start(log: LogFile, index: str, base: int, offset: int) -> int:
    """A batch boundary of ``log`` (segment ``base``, its index at ``index``) at or before the
    first batch whose last offset is >= ``offset``: where the index's last written entry at
    or below ``offset`` points, once checked, else 0."""
    try:
        fd = os.open(index, os.O_RDONLY)
        try:
            named, position = _last_at_most(fd, base, offset)
        finally:
            os.close(fd)
    except OSError:  # gone (a roll or retention since the listing), or not a file
        return 0
    if named < 0:
        return 0
    try:
        found = header_at(log.fd, position, log.size, log.log_path)
    except CorruptRecordError:
        return 0  # not a batch's start any more: the index is only a hint
    return position if found is not None and found.last_offset == named else 0


def _last_at_most(fd: int, base: int, offset: int) -> tuple[int, int]:
    """(offset named, position) of the last written entry naming at most ``offset``; (-1, 0)
    for none. A binary search over the written prefix, one 8-byte ``pread`` a probe."""
    entry = wire.OFFSET_INDEX_ENTRY
    low, high = 0, os.fstat(fd).st_size // entry.size - 1
    named, position = -1, 0
    while low <= high:
        mid = (low + high) // 2
        raw = os.pread(fd, entry.size, mid * entry.size)
        relative, at = entry.unpack(raw) if len(raw) == entry.size else (0, 0)
        if at > 0 and base + relative <= offset:
            named, position = base + relative, at
            low = mid + 1
        else:
            high = mid - 1
    return named, position
