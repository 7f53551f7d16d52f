"""Compaction of legacy (magic 0/1) message sets: Kafka's record rules, the legacy tombstone rule
(kept while the segment's last-modified time is after the last clean segment's minus
``delete.retention.ms``, kafka-format.md §11.3) and rebuilt wrappers, written by kafka-python's
legacy builder and read back by kafka-python's reader, independently of kafkatier's."""

from __future__ import annotations

import os
import struct
import warnings
import zlib
from pathlib import Path

import pytest
from cleaner_fixtures import compact_config, verify_compacted

from kafkatier.storage.cleaner.compact import compact_log
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.wire import Codec

with warnings.catch_warnings():  # kafka-python's import-time DeprecationWarnings
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record import MemoryRecords
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

T0 = 1_600_000_000_000
RETENTION = 3_600_000
Pair = tuple[bytes | None, bytes | None]
Row = tuple[int, bytes | None, bytes | None, int]


def legacy_set(magic: int, codec: Codec, first: int, pairs: list[Pair], *, ts: int = T0) -> bytes:
    """Offsets ``first``.. as a broker stores them: one message per record, or one wrapper
    whose inner offsets are relative (v1) or absolute (v0), wrapper offset = the last one."""
    out = b""
    for start in range(0, len(pairs), 1 if codec == Codec.NONE else len(pairs)):
        group = pairs[start : start + (1 if codec == Codec.NONE else len(pairs))]
        builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
        for i, (key, value) in enumerate(group):
            offset = first + start + i
            relative = codec != Codec.NONE and magic == 1
            builder.append(i if relative else offset, ts + offset, key, value)
        raw = bytearray(builder.build())
        struct.pack_into(">q", raw, 0, first + start + len(group) - 1)  # not in the CRC
        out += bytes(raw)
    return out


def rows_of(partition: Path) -> list[Row]:
    rows: list[Row] = []
    for path in sorted(partition.glob("*.log")):
        records = MemoryRecords(path.read_bytes())
        while (batch := records.next_batch()) is not None:
            rows.extend((r.offset, r.key, r.value, r.timestamp or -1) for r in batch)
    return rows


def write_partition(path: Path, segments: list[tuple[int, bytes, int]]) -> Path:
    """(base offset, bytes, mtime ms) per segment, as files a broker left."""
    partition = path / "old-0"
    partition.mkdir(parents=True)
    for base, data, _ in segments:
        (partition / f"{base:020d}.log").write_bytes(data)
    return partition


def set_mtimes(partition: Path, segments: list[tuple[int, bytes, int]]) -> None:
    for base, _, mtime in segments:
        os.utime(partition / f"{base:020d}.log", (mtime / 1000, mtime / 1000))


def expected(
    segments: list[tuple[int, list[Row], int]], first_dirty: int, end: int
) -> tuple[list[Row], int]:
    """Kafka's rules written out: the dirty section's keys map to their latest offset; a record
    below ``end`` survives if keyed, not below its key's entry, and not a tombstone in a segment
    at or before the legacy delete horizon. Returns (rows, tombstones dropped)."""
    latest = {r[1]: r[0] for _, rows, _ in segments for r in rows if first_dirty <= r[0] < end}
    clean = [mtime for base, _, mtime in segments if base < first_dirty]
    horizon = clean[-1] - RETENTION if clean else 0
    out, dropped = [], 0
    for _, rows, mtime in segments:
        for row in rows:
            if row[1] is None or row[0] < latest.get(row[1], -1):
                continue
            if row[2] is None and mtime <= horizon:
                dropped += 1
                continue
            out.append(row)
    return out, dropped


CASES = [(0, Codec.NONE), (1, Codec.NONE), (0, Codec.GZIP), (1, Codec.GZIP), (1, Codec.LZ4)]


@pytest.mark.parametrize(("magic", "codec"), CASES, ids=lambda c: str(c))
def test_legacy_records_and_tombstones_follow_kafkas_rules(
    tmp_path: Path, magic: int, codec: Codec
) -> None:
    """Three segments, the last dirty: the old clean segment is before the legacy delete
    horizon (its tombstone goes), the newer clean one and the dirty one after it (theirs stay);
    superseded and keyless records go; wrappers losing records are rebuilt."""
    contents: list[tuple[int, list[Pair], int]] = [
        (0, [(b"k0", b"a"), (b"k1", None), (b"k2", b"b"), (None, b"x"), (b"k5", b"c")], T0),
        (5, [(b"k0", None), (b"k3", b"d"), (b"k2", b"e"), (b"k5", None)], T0 + 10 * RETENTION),
        (9, [(b"k3", b"f"), (b"k4", None), (b"k2", b"g")], T0 + 20 * RETENTION),
    ]  # fmt: skip
    segments = [(b, legacy_set(magic, codec, b, pairs), m) for b, pairs, m in contents]
    partition = write_partition(tmp_path, segments)
    original = rows_of(partition)
    config = compact_config(delete_retention_ms=RETENTION)
    with LogDirectory(tmp_path, config_for=lambda _t: config, clock=lambda: T0) as logs:
        (log,) = list(logs)
        log.roll()
        set_mtimes(partition, segments)
        result = compact_log(log, now_ms=T0 + 30 * RETENTION, first_dirty_offset=9)
        assert result.cleaned and result.end_offset == 12
    verify_compacted(tmp_path)
    by_segment = [(b, [r for r in original if b <= r[0] < b + len(p)], m) for b, p, m in contents]
    rows, dropped = expected(by_segment, first_dirty=9, end=12)
    assert rows_of(partition) == rows
    assert (result.tombstones_dropped, result.tombstones_kept) == (dropped, 3) == (1, 3)
    assert result.records_removed == len(original) - len(rows)


@pytest.mark.parametrize(("magic", "codec"), CASES, ids=lambda c: str(c))
def test_first_cleaning_keeps_every_legacy_tombstone(
    tmp_path: Path, magic: int, codec: Codec
) -> None:
    """No clean segment yet: the horizon is 0, so tombstones stay however old the segment."""
    pairs: list[Pair] = [(b"a", b"1"), (b"b", None), (b"a", None), (b"c", b"2"), (b"c", b"3")]
    segments = [(0, legacy_set(magic, codec, 0, pairs), T0)]
    partition = write_partition(tmp_path, segments)
    original = rows_of(partition)
    config = compact_config(delete_retention_ms=RETENTION)
    with LogDirectory(tmp_path, config_for=lambda _t: config, clock=lambda: T0) as logs:
        (log,) = list(logs)
        log.roll()
        set_mtimes(partition, segments)
        result = compact_log(log, now_ms=T0 + 100 * RETENTION, first_dirty_offset=None)
    verify_compacted(tmp_path)
    assert rows_of(partition) == [original[1], original[2], original[4]]
    assert (result.tombstones_kept, result.tombstones_dropped) == (2, 0)


def test_log_append_time_wrapper_keeps_its_append_time(tmp_path: Path) -> None:
    """A v1 LogAppendTime wrapper rebuilt: inner messages and wrapper carry the append time."""
    builder = LegacyRecordBatchBuilder(magic=1, compression_type=Codec.GZIP, batch_size=1 << 20)
    for i, key in enumerate([b"a", b"b", b"a", b"c"]):
        builder.append(i, T0 + i, key, b"v%d" % i)
    raw = bytearray(builder.build())
    struct.pack_into(">q", raw, 0, 3)
    raw[17] |= 0x08  # LogAppendTime: attributes are covered by the CRC, so recompute it
    struct.pack_into(">q", raw, 18, T0 + 99)
    struct.pack_into(">I", raw, 12, zlib.crc32(bytes(raw[16:])))
    partition = write_partition(tmp_path, [(0, bytes(raw), T0)])
    config = compact_config()
    with LogDirectory(tmp_path, config_for=lambda _t: config, clock=lambda: T0) as logs:
        (log,) = list(logs)
        log.roll()
        compact_log(log, now_ms=T0, first_dirty_offset=None)
    verify_compacted(tmp_path)
    data = (partition / f"{0:020d}.log").read_bytes()
    assert data[17] & 0x08 and struct.unpack_from(">q", data, 18)[0] == T0 + 99
    assert rows_of(partition) == [(1, b"b", b"v1", T0 + 99), (2, b"a", b"v2", T0 + 99),
                                  (3, b"c", b"v3", T0 + 99)]  # fmt: skip


def test_a_legacy_record_supersedes_a_v2_record_before_it(tmp_path: Path) -> None:
    """A v2 batch followed by a legacy set (a format downgrade): the legacy record's put, made
    outside the map kernels, marks the v2 record it replaces, so the rewrite's kernel, which
    takes an unmarked record in the map's range as its key's latest without a look-up, drops
    it (kept if that put did not mark)."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 20)  # fmt: skip
    for i, key in enumerate([b"a", b"b"]):
        builder.append(i, timestamp=T0 + i, key=key, value=b"v%d" % i, headers=[])
    v2 = bytes(builder.build())
    segments = [(0, v2 + legacy_set(1, Codec.NONE, 2, [(b"a", b"v2")]), T0)]
    partition = write_partition(tmp_path, segments)
    config = compact_config()
    with LogDirectory(tmp_path, config_for=lambda _t: config, clock=lambda: T0) as logs:
        (log,) = list(logs)
        log.roll()
        result = compact_log(log, now_ms=T0, first_dirty_offset=None)
    verify_compacted(tmp_path)
    assert [(r[0], r[1], r[2]) for r in rows_of(partition)] == [(1, b"b", b"v1"),
                                                                (2, b"a", b"v2")]  # fmt: skip
    assert result.records_removed == 1
