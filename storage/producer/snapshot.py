"""Producer-state snapshot files (``.snapshot``): encoding, checked decoding, atomic writes.

Kafka's ``ProducerStateManager.writeSnapshot``/``readSnapshot`` persist one entry per producer so a
broker can restore idempotence and transaction state without rescanning the log (kafka-format.md
§7.1). This module only knows the file format; the meaning of the fields lives in
:mod:`kafkatier.storage.producer.state`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from kafkatier.storage.errors import CorruptSnapshotError
from kafkatier.storage.fsutil import as_path, atomic_write
from kafkatier.storage.record.crc import crc32c
from kafkatier.storage.wire import (
    SNAPSHOT_ENTRY,
    SNAPSHOT_HEADER,
    SNAPSHOT_VERSION,
    offset_from_file_name,
    segment_file_name,
)

SNAPSHOT_SUFFIX = ".snapshot"
DELETED_SUFFIX = ".deleted"  # LogFileUtils.DELETED_FILE_SUFFIX, appended after ".snapshot"
_CRC_START = 6  # the CRC covers everything after version and crc: the count and the entries


@dataclass(frozen=True)
class SnapshotEntry:
    """One producer's persisted state: a 46-byte ``wire.SNAPSHOT_ENTRY``, big-endian::

        offset size field
        0      8    producerId
        8      2    epoch
        10     4    lastSequence           -1 when the producer has no retained batch
        14     8    lastOffset             last data offset, -1 when none
        22     4    offsetDelta            lastOffset - firstOffset of the last batch
        26     8    timestamp              the producer's lastTimestamp
        34     4    coordinatorEpoch
        38     8    currentTxnFirstOffset  -1 when no transaction is open

    Kept neutral (plain numbers, -1 sentinels as on disk) so the file format does not depend on
    the in-memory producer-state classes.
    """

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int

    def pack(self) -> bytes:
        return SNAPSHOT_ENTRY.pack(
            self.producer_id,
            self.producer_epoch,
            self.last_sequence,
            self.last_offset,
            self.offset_delta,
            self.timestamp,
            self.coordinator_epoch,
            self.current_txn_first_offset,
        )


def encode_snapshot(entries: Iterable[SnapshotEntry]) -> bytes:
    """The whole file: ``wire.SNAPSHOT_HEADER`` (version 1, CRC-32C of [6, end), count) + entries.

    Kafka's ``ProducerSnapshot`` schema is a non-flexible array, hence the int32 count.
    """
    packed = [entry.pack() for entry in entries]
    out = bytearray(SNAPSHOT_HEADER.pack(SNAPSHOT_VERSION, 0, len(packed)))
    for chunk in packed:
        out += chunk
    SNAPSHOT_HEADER.pack_into(
        out, 0, SNAPSHOT_VERSION, crc32c(out[_CRC_START:]), len(packed)
    )
    return bytes(out)


def decode_snapshot(data: bytes, *, file: str | None = None) -> list[SnapshotEntry]:
    """Parse and verify a snapshot, rejecting what Kafka's ``readSnapshot`` rejects.

    Kafka ignores bytes after the last entry if the CRC covers them; a file Kafka writes never has
    any, so trailing bytes are reported here as corruption too (the caller then falls back to an
    older snapshot, exactly as for a CRC mismatch).
    """
    if len(data) < SNAPSHOT_HEADER.size:
        raise CorruptSnapshotError(
            f"snapshot of {len(data)} bytes is shorter than its {SNAPSHOT_HEADER.size}-byte header",
            file=file,
            position=0,
        )
    version, stored_crc, count = SNAPSHOT_HEADER.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(
            f"unknown snapshot version {version} (only {SNAPSHOT_VERSION} is valid)",
            file=file,
            position=0,
        )
    expected = SNAPSHOT_HEADER.size + count * SNAPSHOT_ENTRY.size
    if count < 0 or len(data) != expected:
        raise CorruptSnapshotError(
            f"snapshot is {len(data)} bytes but its header promises {count} entries "
            f"({expected} bytes)",
            file=file,
            position=_CRC_START,
        )
    computed_crc = crc32c(data[_CRC_START:])
    if computed_crc != stored_crc:
        raise CorruptSnapshotError(
            f"snapshot CRC mismatch: stored {stored_crc}, computed {computed_crc}",
            file=file,
            position=2,
        )
    return [
        SnapshotEntry(*fields)
        for fields in SNAPSHOT_ENTRY.iter_unpack(memoryview(data)[SNAPSHOT_HEADER.size :])
    ]


def read_snapshot(path: Path) -> list[SnapshotEntry]:
    """Read and verify one ``.snapshot`` file; CorruptSnapshotError names the file."""
    return decode_snapshot(as_path(path).read_bytes(), file=str(path))


def write_snapshot(path: Path, entries: Iterable[SnapshotEntry], sync: bool = True) -> None:
    """Write atomically (temp file, fsync, rename, fsync dir) via :func:`fsutil.atomic_write`.

    Kafka writes the final name in place, so a crash can leave a torn file its loader must catch
    by CRC; renaming a complete temp file means readers only ever see whole snapshots.
    ``sync=False`` (Kafka defers the fsync of roll snapshots) keeps the rename but skips fsyncs.
    """
    atomic_write(as_path(path), encode_snapshot(entries), sync=sync)


def snapshot_path(directory: Path, offset: int) -> Path:
    """``<dir>/00000000000000000042.snapshot`` for the state ending (exclusively) at 42."""
    return as_path(directory) / segment_file_name(offset, SNAPSHOT_SUFFIX)


class SnapshotFile:
    """A ``.snapshot`` file and the offset its name encodes (Kafka's ``SnapshotFile``).

    The offset is the exclusive end offset of the state in the file: the next offset to append.
    """

    def __init__(self, path: Path, offset: int | None = None) -> None:
        self.path = as_path(path)
        self.offset = offset_from_file_name(self.path.name) if offset is None else offset

    def __repr__(self) -> str:
        return f"SnapshotFile(offset={self.offset}, path={str(self.path)!r})"

    def delete_if_exists(self) -> bool:
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        return True

    def rename_to_deleted(self) -> Path | None:
        """Rename to ``<name>.snapshot.deleted`` for delayed removal; None if already gone."""
        target = self.path.with_name(self.path.name + DELETED_SUFFIX)
        try:
            os.replace(self.path, target)
        except FileNotFoundError:
            return None
        self.path = target
        return target


def list_snapshot_files(directory: Path) -> list[SnapshotFile]:
    """Every regular ``*.snapshot`` file in ``directory`` whose name parses, by offset (one
    listing, file types from it: this runs for every partition a log dir opens)."""
    directory = as_path(directory)
    try:
        entries = list(os.scandir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = []
    for entry in entries:
        if entry.name.endswith(SNAPSHOT_SUFFIX) and entry.is_file():
            try:
                offset = offset_from_file_name(entry.name)
            except ValueError:
                continue  # not a Kafka snapshot name (e.g. "notes.snapshot"); never ours to touch
            found.append(SnapshotFile(directory / entry.name, offset))
    return sorted(found, key=lambda snapshot: snapshot.offset)
