"""Legacy magic 0/1 message sets (kafka-format.md §1.10): shallow view, CRC-32, wrapper offset
and timestamp rules, kafka-python-written sets in every legacy codec, and the v1 corpus."""

from __future__ import annotations

import gzip
import struct
import warnings
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from verify_fixtures import snappy_for_kafka_python

from kafkatier.storage.errors import CompressionError, CorruptRecordError, InvalidRecordError
from kafkatier.storage.record import lz4_frame
from kafkatier.storage.record.compression import compress
from kafkatier.storage.record.legacy import LegacyBatch
from kafkatier.storage.record.record import Record
from kafkatier.storage.record.records import iter_batches
from kafkatier.storage.wire import Codec, TimestampType

with warnings.catch_warnings():  # kafka-python's import-time DeprecationWarnings
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record import MemoryRecords
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

CORPUS = Path(__file__).resolve().parents[3].parent / "shared" / "kafka-corpus"
V1_FOLDER = CORPUS / "xpxwo100__bullShit"
FILE = "/logs/old-0/00000000000000000000.log"


@pytest.fixture(scope="module", autouse=True)
def kafka_python_snappy() -> Iterator[None]:
    """kafka-python needs python-snappy (not installed): the shared cramjam shim."""
    with snappy_for_kafka_python():
        yield


def _field(data: bytes | None) -> bytes:
    return struct.pack(">i", -1) if data is None else struct.pack(">i", len(data)) + data


def message(
    offset: int, magic: int, key: bytes | None, value: bytes | None, *, attrs: int = 0, ts: int = 0
) -> bytes:
    """One legacy entry written from §1.10's layout."""
    body = struct.pack(">bb", magic, attrs) + (struct.pack(">q", ts) if magic else b"")
    body += _field(key) + _field(value)
    return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + body


def wrapper(
    offset: int, magic: int, inner: bytes, *, ts: int = 0, log_append: bool = False
) -> bytes:
    attrs = Codec.GZIP | (0x08 if log_append else 0)
    return message(offset, magic, None, gzip.compress(inner, mtime=0), attrs=attrs, ts=ts)


def _kafka_python_set(magic: int, codec: Codec, count: int) -> bytes:
    """Offsets 100.. as a broker stores them: a compressed v1 set has relative inner offsets and
    the wrapper carries the last absolute one; v0 inner offsets are absolute."""
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i in range(count):
        key = None if i % 3 == 0 else f"k{i}".encode()
        value = None if i % 4 == 1 else f"value {i} ".encode() * (i + 1)
        offset = i if codec and magic == 1 else 100 + i
        builder.append(offset, 1_600_000_000_000 + i, key, value)
    raw = bytearray(builder.build())
    if codec:
        struct.pack_into(">q", raw, 0, 100 + count - 1)  # the broker's offset; not in the CRC
    return bytes(raw)


def _theirs(data: bytes) -> list[tuple[int, int, bytes | None, bytes | None]]:
    out, records = [], MemoryRecords(data)
    while records.has_next():
        for r in records.next_batch():
            out.append((r.offset, -1 if r.timestamp is None else r.timestamp, r.key, r.value))
    return out


@pytest.mark.parametrize(
    ("magic", "codec"),
    [
        (m, c)
        for m in (0, 1)
        for c in (Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4)
        if (m, c) != (0, Codec.LZ4)
    ],  # kafka-python needs xxhash for v0 lz4: see the test below
)
def test_kafka_python_written_sets(magic: int, codec: Codec) -> None:
    data = _kafka_python_set(magic, codec, 7)
    batches = list(iter_batches(data, file=FILE))
    assert all(isinstance(b, LegacyBatch) and b.is_valid() for b in batches)
    ours = [(r.offset, r.timestamp, r.key, r.value) for b in batches for r in b.records()]
    assert ours == _theirs(data)
    assert [o for o, *_ in ours] == list(range(100, 107))
    if codec:
        (batch,) = batches
        assert (batch.codec, batch.records_count) == (codec, 7)
        assert (batch.base_offset, batch.last_offset, batch.next_offset) == (100, 106, 107)


def test_v0_lz4_wrapper_with_the_old_broken_header_checksum() -> None:
    inner = b"".join(message(o, 0, b"k", b"lz4 v0 " * 20) for o in (3, 4))
    frame = bytearray(compress(Codec.LZ4, inner))
    broken = (lz4_frame.xxh32(bytes(frame[0:6])) >> 8) & 0xFF  # magic included: Kafka 0.8's bug
    assert broken != frame[6]
    frame[6] = broken
    batch = LegacyBatch(message(4, 0, None, bytes(frame), attrs=Codec.LZ4))
    assert [(r.offset, r.value) for r in batch.records()] == [(o, b"lz4 v0 " * 20) for o in (3, 4)]
    v1 = LegacyBatch(message(4, 1, None, bytes(frame), attrs=Codec.LZ4), file=FILE)
    with pytest.raises(CompressionError, match="descriptor"):  # v1 must have the right one
        list(v1.records())


def test_v1_wrapper_makes_relative_offsets_absolute() -> None:
    inner = b"".join(message(i, 1, None, b"v%d" % i, ts=100 + i) for i in range(3))
    batch = LegacyBatch(wrapper(1002, 1, inner, ts=102), file=FILE)
    assert (batch.base_offset, batch.last_offset, batch.next_offset) == (1000, 1002, 1003)
    assert [(r.offset, r.timestamp) for r in batch.records()] == [
        (1000, 100),
        (1001, 101),
        (1002, 102),
    ]
    assert (batch.max_timestamp, batch.timestamp_type) == (102, TimestampType.CREATE_TIME)


def test_v1_wrapper_offset_zero_keeps_inner_offsets() -> None:
    inner = b"".join(message(i, 1, None, b"x") for i in range(2))
    assert [r.offset for r in LegacyBatch(wrapper(0, 1, inner)).records()] == [0, 1]


def test_v1_wrapper_below_last_inner_offset_is_invalid() -> None:
    inner = b"".join(message(i, 1, None, b"x") for i in (0, 5))
    with pytest.raises(InvalidRecordError, match="wrapper offset") as info:
        list(LegacyBatch(b"\0" * 3 + wrapper(4, 1, inner), 3, file=FILE).records())
    assert (info.value.file, info.value.position) == (FILE, 3)


def test_v1_log_append_time_wrapper_stamps_inner_messages() -> None:
    inner = b"".join(message(i, 1, b"k", b"x", ts=5) for i in range(2))
    batch = LegacyBatch(wrapper(11, 1, inner, ts=999, log_append=True))
    assert batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert [(r.offset, r.timestamp) for r in batch.records()] == [(10, 999), (11, 999)]


def test_v0_inner_offsets_are_absolute_and_untimed() -> None:
    inner = b"".join(message(o, 0, b"k", b"x") for o in (40, 41, 42))
    batch = LegacyBatch(wrapper(42, 0, inner))
    assert [(r.offset, r.timestamp) for r in batch.records()] == [(40, -1), (41, -1), (42, -1)]
    assert (batch.base_offset, batch.max_timestamp, batch.magic) == (40, -1, 0)


def test_uncompressed_message_and_v2_only_fields() -> None:
    batch = LegacyBatch(message(9, 1, b"key", None, ts=77))
    assert list(batch.records()) == [Record(9, 77, b"key", None)]
    assert (batch.base_offset, batch.last_offset, batch.records_count) == (9, 9, 1)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (-1, -1, -1)
    assert (batch.partition_leader_epoch, batch.is_transactional, batch.is_control) == (
        -1,
        False,
        False,
    )
    assert batch.delete_horizon_ms is None and batch.codec == Codec.NONE


def test_crc_is_crc32_ieee_over_magic_to_end() -> None:
    raw = bytearray(message(1, 1, b"k", b"v", ts=3))
    batch = LegacyBatch(raw, file=FILE)
    assert batch.crc == batch.compute_crc() == zlib.crc32(bytes(raw[16:]))
    raw[-1] ^= 1
    assert not batch.is_valid()
    with pytest.raises(CorruptRecordError, match="stored crc") as info:
        batch.ensure_valid()
    assert (info.value.file, info.value.position) == (FILE, 0)


@pytest.mark.parametrize(
    ("raw", "error", "match"),
    [
        (struct.pack(">qiIbbq", 1, 14, 0, 1, 0, 0), CorruptRecordError, "size 14"),  # v1: < 22
        (wrapper(0, 1, b""), InvalidRecordError, "no inner"),
        (message(0, 1, None, None, attrs=Codec.GZIP), InvalidRecordError, "null value"),
    ],
)
def test_malformed_legacy_sets(raw: bytes, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match) as info:
        list(LegacyBatch(raw, file=FILE).records())
    assert info.value.file == FILE  # type: ignore[attr-defined]


def test_value_length_past_the_message_end_is_invalid() -> None:
    raw = bytearray(message(1, 0, None, b"abc"))
    struct.pack_into(">i", raw, len(raw) - 7, 50)  # value length 50, 3 bytes present
    with pytest.raises(InvalidRecordError, match="past") as info:
        list(LegacyBatch(bytes(raw), file=FILE).records())
    assert info.value.position == 0


@pytest.mark.skipif(not V1_FOLDER.is_dir(), reason=f"v1 corpus folder not found at {V1_FOLDER}")
def test_v1_corpus_reads_as_legacy_batches() -> None:
    seen = 0
    for log in sorted(V1_FOLDER.rglob("*.log")):
        data = log.read_bytes()
        batches = list(iter_batches(data, file=str(log)))
        assert all(isinstance(b, LegacyBatch) and b.magic == 1 and b.is_valid() for b in batches)
        ours = [(r.offset, r.timestamp, r.key, r.value) for b in batches for r in b.records()]
        assert ours == _theirs(data), log
        seen += len(batches)
    assert seen > 0
