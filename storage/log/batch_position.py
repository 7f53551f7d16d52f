"""Locating batches in a segment's ``.log`` file from their headers alone (no CRC check).

Batches sit back to back with no padding (kafka-format.md §1, §9): each starts with
``baseOffset`` (int64) and ``batchLength`` (int32, the bytes after these 12), then, for v2, the
rest of the 61-byte header whose ``lastOffsetDelta`` gives the batch's last offset; a legacy
v0/v1 message's offset is its last. This is Kafka's ``FileRecords.searchForOffsetFromPosition``
walk, reading only as far as the magic byte and the offset delta (``LogSegment.scan_headers``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import NamedTuple

from kafkatier.storage import wire
from kafkatier.storage.errors import CorruptRecordError


class BatchInfo(NamedTuple):
    """What a segment needs to index one batch of an append: where it sits in the appended bytes
    (a tuple: one is built per batch appended)."""

    position: int
    size: int
    last_offset: int
    max_timestamp: int


@dataclass(frozen=True, slots=True)
class BatchPosition:
    """A batch located in a segment file, from its header alone (Kafka's LogOffsetPosition)."""

    position: int
    size: int
    base_offset: int
    last_offset: int
    magic: int


def header_at(fd: int, position: int, file_size: int, file: str) -> BatchPosition | None:
    """The batch whose header starts at ``position`` of the open file ``fd`` (``file_size``
    bytes long), or None when no complete batch remains there (a partial tail)."""
    head = os.pread(fd, wire.BATCH_HEADER_SIZE, position)
    if len(head) < wire.HEADER_SIZE_UP_TO_MAGIC:
        return None
    base, length = wire.OFFSET_AND_LENGTH.unpack_from(head, 0)
    magic = head[wire.MAGIC_OFFSET]
    size = wire.LOG_OVERHEAD + length
    if length < wire.MIN_LEGACY_RECORD_SIZE or magic > 2:
        raise CorruptRecordError(
            f"invalid batch header (length {length}, magic {magic})",
            file=file,
            position=position,
        )
    if position + size > file_size:
        return None
    if magic >= 2:
        if len(head) < wire.BATCH_HEADER_SIZE:
            return None
        last = base + int.from_bytes(head[23:27], "big", signed=True)
        return BatchPosition(position, size, base, last, magic)
    return BatchPosition(position, size, base, base, magic)
