"""Compaction of legacy (magic 0/1) message sets (kafka-format.md §1.10, §11.3).

Kafka's cleaner judges legacy records by the rules it uses for v2 records, except tombstones: a
legacy message cannot carry a delete horizon, so whether its null-value messages survive depends
on the segment being cleaned (``LogCleaner.cleanSegments``): they are kept while the segment's
last-modified time is after the *legacy delete horizon*, the last-modified time of the last clean
segment (the last one below the first dirty offset) minus ``delete.retention.ms``; with no clean
segment the horizon is 0 and they are all kept.

A legacy batch whose records all survive is copied byte for byte; otherwise the survivors are
written again as ``MemoryRecordsBuilder`` writes a legacy set (``buildRetainedRecordsInto``):
same magic, codec and timestamp type, base offset = the first survivor's offset. Each message is
``offset int64, size int32, crc uint32 (CRC-32 IEEE of magic..end), magic int8, attributes int8,
[timestamp int64 (v1)], key (int32 length, -1 null), value (int32 length, -1 null)``. A
compressed set becomes one wrapper message: null key, the compressed inner set as its value,
offset = the last survivor's offset, timestamp = the inner maximum (LogAppendTime: the append
time), inner offsets relative to the base in v1 and absolute in v0; inner messages carry the
timestamp-type bit and, under LogAppendTime, the append time.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from typing import Final

from kafkatier.storage.cleaner.kernels.offset_map import OffsetMap
from kafkatier.storage.cleaner.segment_store import SegmentInfo
from kafkatier.storage.record.compression import compress
from kafkatier.storage.record.legacy import LegacyBatch
from kafkatier.storage.record.record import Record
from kafkatier.storage.wire import ATTR_LOG_APPEND_TIME, NO_TIMESTAMP, Codec, TimestampType

_ENTRY: Final = struct.Struct(">qiI")  # offset, size, crc
_LENGTH: Final = struct.Struct(">i")
_TIMESTAMP: Final = struct.Struct(">q")


def legacy_delete_horizon(
    infos: Sequence[SegmentInfo], first_dirty: int, delete_retention_ms: int
) -> int:
    """Kafka's ``legacyDeleteHorizonMs`` for one cleaning (``doClean``)."""
    clean = [info for info in infos if info.base_offset < first_dirty]
    return clean[-1].last_modified_ms - delete_retention_ms if clean else 0


def _field(data: bytes | None) -> bytes:
    return _LENGTH.pack(-1) if data is None else _LENGTH.pack(len(data)) + data


def _message(
    offset: int, magic: int, attributes: int, timestamp: int, key: bytes | None,
    value: bytes | None,
) -> bytes:  # fmt: skip
    """One legacy entry (``LegacyRecord.write`` behind the offset and size)."""
    stamp = _TIMESTAMP.pack(timestamp) if magic == 1 else b""
    body = bytes((magic, attributes)) + stamp + _field(key) + _field(value)
    return _ENTRY.pack(offset, 4 + len(body), zlib.crc32(body)) + body


def build_legacy(batch: LegacyBatch, records: Sequence[Record]) -> bytes:
    """``records`` (the survivors, in offset order) as a legacy set like ``batch``."""
    magic, codec = batch.magic, batch.codec
    append_time = batch.timestamp_type is TimestampType.LOG_APPEND_TIME
    type_bit = ATTR_LOG_APPEND_TIME if append_time else 0
    stamps = [batch.max_timestamp if append_time else r.timestamp for r in records]
    if magic == 0:
        stamps = [NO_TIMESTAMP] * len(records)
    if codec == Codec.NONE:
        return b"".join(
            _message(r.offset, magic, type_bit, ts, r.key, r.value)
            for r, ts in zip(records, stamps, strict=True)
        )
    base = records[0].offset if magic == 1 else 0
    inner = b"".join(
        _message(r.offset - base, magic, type_bit, ts, r.key, r.value)
        for r, ts in zip(records, stamps, strict=True)
    )
    wrapper_ts = batch.max_timestamp if append_time else max(stamps)
    return _message(records[-1].offset, magic, int(codec) | type_bit, wrapper_ts, None,
                    compress(codec, inner))  # fmt: skip


def select_legacy(
    records: Sequence[Record], offset_map: OffsetMap, retain_deletes: bool
) -> tuple[list[Record], int]:
    """(survivors, tombstones dropped): Kafka's ``shouldRetainRecord`` for legacy records."""
    latest = offset_map.latest_offset
    keyed = [r for r in records if r.offset <= latest and r.key is not None]
    found = dict(
        zip((id(r) for r in keyed),
            offset_map.get_hashes(offset_map.digests([r.key or b"" for r in keyed])).tolist(),
            strict=True)
    )  # fmt: skip
    kept: list[Record] = []
    dropped = 0
    for record in records:
        if record.offset > latest:
            kept.append(record)
        elif record.key is None or record.offset < found[id(record)]:
            continue
        elif record.value is not None or retain_deletes:
            kept.append(record)
        else:
            dropped += 1
    return kept, dropped
