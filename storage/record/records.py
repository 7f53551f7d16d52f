"""Reading record batches from a log buffer, and rewriting their offset and epoch in place
(kafka-format.md §1).

A batch comes back as the v2 view, :class:`~kafkatier.storage.record.batch.RecordBatch`, or for
legacy magic 0/1 message sets as :class:`~kafkatier.storage.record.legacy.LegacyBatch`; batches
are written by :mod:`kafkatier.storage.record.builder`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator

from kafkatier.storage.errors import CorruptRecordError, KafkaTierError
from kafkatier.storage.record.batch import Buffer, RecordBatch
from kafkatier.storage.record.legacy import LegacyBatch
from kafkatier.storage.wire import (
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MIN_LEGACY_RECORD_SIZE,
    OFFSET_AND_LENGTH,
    PLE_OFFSET,
)

_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")


def read_batch(
    buf: Buffer, position: int = 0, *, file: str | None = None
) -> RecordBatch | LegacyBatch | None:
    """The batch at ``position``, as ``FileLogInputStream.nextBatch`` reads it: None when no
    complete batch remains (a partial tail), CorruptRecordError for an impossible size or magic."""
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    remaining = len(view) - position
    if remaining <= HEADER_SIZE_UP_TO_MAGIC:
        return None
    _, length = OFFSET_AND_LENGTH.unpack_from(view, position)
    if length < MIN_LEGACY_RECORD_SIZE:
        raise CorruptRecordError(
            f"record size {length} is smaller than the minimum record overhead "
            f"({MIN_LEGACY_RECORD_SIZE})",
            file=file,
            position=position,
        )
    if LOG_OVERHEAD + length > remaining:
        return None
    magic = view[position + MAGIC_OFFSET]
    if magic == 2:
        return RecordBatch(view, position, file=file)
    if magic < 2:
        return LegacyBatch(view, position, file=file)
    signed = magic - 256 if magic > 127 else magic
    raise CorruptRecordError(f"invalid magic byte {signed}", file=file, position=position)


def iter_batches(
    buf: Buffer, position: int = 0, end: int | None = None, *, file: str | None = None
) -> Iterator[RecordBatch | LegacyBatch]:
    """Batches from ``position`` up to ``end`` (default: the buffer end); stops silently at a
    partial tail."""
    view = memoryview(buf).cast("B")
    if end is not None:
        view = view[:end]
    while True:
        batch = read_batch(view, position, file=file)
        if batch is None:
            return
        yield batch
        position += batch.size_in_bytes


def read_batch_at(
    buf: Buffer, position: int, start: int, *, file: str | None = None
) -> RecordBatch | LegacyBatch | None:
    """:func:`read_batch` of bytes read at ``start`` of ``file`` (a reader that goes a chunk at a
    time): the batch's position, and an error's, is its position in the file, so the batch's own
    errors name it there."""
    try:
        batch = read_batch(buf, position, file=file)
    except KafkaTierError as exc:
        raise exc.moved(start) from exc
    if batch is not None:
        batch.position += start
    return batch


def iter_batches_read_at(
    buf: Buffer, start: int, *, file: str | None = None
) -> Iterator[RecordBatch | LegacyBatch]:
    """:func:`iter_batches` of bytes read at ``start`` of ``file`` (:func:`read_batch_at`)."""
    position = 0
    while (batch := read_batch_at(buf, position, start, file=file)) is not None:
        yield batch
        position = batch.position - start + batch.size_in_bytes


def chunked_batches(
    read: Callable[[int, int], bytes], size: int, position: int, chunk: int, name: str,
    *, growing: bool = False,
) -> Iterator[RecordBatch | LegacyBatch]:  # fmt: skip
    """Whole batches of a file of ``size`` bytes from ``position`` on, ``read(position, n)`` a
    chunk of ``n`` bytes at a time (one larger batch gets a read of its exact length), so memory
    stays bounded whatever the segment size; each batch at its position in the file (``name``,
    as errors name it). The cleaner's reads of local segments and remote compaction's of
    objects: their segments are closed, so a partial tail is damage (:func:`partial_tail`, as
    Kafka's cleaner refuses "Log segment may be corrupt"); ``growing``: a segment a writer may
    be appending to, whose partial tail ends the batches."""
    while position < size:
        data = read(position, min(chunk, size - position))
        consumed = 0
        for batch in iter_batches_read_at(data, position, file=name):
            consumed = batch.position - position + batch.size_in_bytes
            yield batch
        if consumed == 0:
            whole = batch_size_at(data)
            if whole is None or whole <= len(data) or position + whole > size:
                if growing:
                    return
                raise partial_tail(name, position, size, whole)
            data = read(position, whole)
            for batch in iter_batches_read_at(data, position, file=name):
                consumed = batch.position - position + batch.size_in_bytes
                yield batch
            if consumed == 0:
                raise partial_tail(name, position, size, whole)
        position += consumed


def batch_size_at(data: Buffer, position: int = 0) -> int | None:
    """The whole size a batch at ``position`` claims (its length field and the 12 bytes before
    it); None when fewer than 12 bytes are there."""
    if len(memoryview(data)) - position < OFFSET_AND_LENGTH.size:
        return None
    _, length = OFFSET_AND_LENGTH.unpack_from(data, position)
    return int(OFFSET_AND_LENGTH.size + length)


def partial_tail(name: str, position: int, size: int, claimed: int | None) -> CorruptRecordError:
    """The error for a closed segment that ends inside a batch: its records there would be
    dropped unread (a cleaner that stopped there rewrote the segment without them)."""
    left = size - position
    what = (f"{left} bytes are too few for a batch header" if claimed is None
            else f"a batch of {claimed} bytes where {left} remain")  # fmt: skip
    return CorruptRecordError(f"log segment may be corrupt: {what}", file=name, position=position)


def set_base_offset(buf: bytearray | memoryview, position: int, base_offset: int) -> None:
    """Rewrite baseOffset in place (not covered by the CRC)."""
    _I64.pack_into(buf, position, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, position: int, epoch: int) -> None:
    """Rewrite partitionLeaderEpoch in place (not covered by the CRC)."""
    _I32.pack_into(buf, position + PLE_OFFSET, epoch)


__all__ = [
    "batch_size_at",
    "chunked_batches",
    "partial_tail",
    "iter_batches",
    "iter_batches_read_at",
    "read_batch_at",
    "read_batch",
    "set_base_offset",
    "set_partition_leader_epoch",
]
