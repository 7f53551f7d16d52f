"""RecordBatch reading: header view, CRC, typed errors with file/position, batch iteration over
buffers, in-place rewrites, and every Kafka-written log of the corpus against kafka-python."""

from __future__ import annotations

import json
import struct
import warnings
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import crc32c
import pytest
from verify_fixtures import snappy_for_kafka_python

from kafkatier.storage.errors import CompressionError, CorruptRecordError, InvalidRecordError
from kafkatier.storage.record.batch import RecordBatch
from kafkatier.storage.record.builder import build_batch, build_control_batch
from kafkatier.storage.record.legacy import LegacyBatch
from kafkatier.storage.record.record import Record
from kafkatier.storage.record.records import (
    iter_batches,
    read_batch,
    set_base_offset,
    set_partition_leader_epoch,
)
from kafkatier.storage.wire import Codec, ControlType, TimestampType

with warnings.catch_warnings():  # kafka-python's import-time DeprecationWarnings
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record import MemoryRecords


VECTORS = Path(__file__).resolve().parents[2] / "data" / "vectors"
CORPUS = Path(__file__).resolve().parents[3].parent / "shared" / "kafka-corpus"
FILE = "/logs/t-0/00000000000000000000.log"
INT_MAX_MINUS_1 = 2**31 - 2
RECORDS = [
    Record(50, 1000, b"k1", b"v1", (("h", b"x"), ("n", None))),
    Record(51, 990, None, b"v2"),
    Record(52, 1010, b"k3", None),
]


def _fix_crc(raw: bytearray) -> bytearray:
    struct.pack_into(">I", raw, 17, crc32c.crc32c(bytes(raw[21:])))
    return raw


def _body_edit(raw: bytes, body: bytes, count: int | None = None) -> bytes:
    """``raw`` with a new record section (and count), batchLength and CRC fixed up."""
    out = bytearray(raw[:61]) + body
    struct.pack_into(">i", out, 8, len(out) - 12)
    if count is not None:
        struct.pack_into(">i", out, 57, count)
    return bytes(_fix_crc(out))


def test_crc32c_vectors() -> None:
    for case in json.loads((VECTORS / "crc32c.json").read_text())["cases"]:
        assert crc32c.crc32c(memoryview(case["input"].encode())) == case["crc"]


def test_header_fields_and_properties() -> None:
    raw = build_batch(
        RECORDS,
        codec=Codec.GZIP,
        producer_id=9,
        producer_epoch=3,
        base_sequence=INT_MAX_MINUS_1,
        partition_leader_epoch=4,
    )
    batch = RecordBatch(b"pad" + raw, 3, file=FILE)
    assert (batch.position, batch.file, batch.magic) == (3, FILE, 2)
    assert (batch.base_offset, batch.last_offset_delta, batch.last_offset) == (50, 2, 52)
    assert (batch.next_offset, batch.size_in_bytes, batch.records_count) == (53, len(raw), 3)
    assert (batch.base_timestamp, batch.max_timestamp) == (1000, 1010)
    assert (batch.codec, batch.timestamp_type) == (Codec.GZIP, TimestampType.CREATE_TIME)
    assert (batch.producer_id, batch.producer_epoch, batch.partition_leader_epoch) == (9, 3, 4)
    assert batch.has_producer_id and not batch.is_transactional and not batch.is_control
    assert batch.delete_horizon_ms is None
    assert bytes(batch.buffer) == raw
    assert batch.is_valid()


def test_sequences_wrap_per_section_13_5() -> None:
    case = json.loads((VECTORS / "sequences.json").read_text())["batch_wrap"]
    records = [Record(i, 0, None, b"x") for i in range(case["records"])]
    batch = RecordBatch(
        build_batch(records, producer_id=1, producer_epoch=0, base_sequence=case["base_sequence"])
    )
    assert batch.last_sequence == case["last_sequence"]
    assert [r.sequence for r in batch.records()] == case["record_sequences"]
    assert RecordBatch(build_batch(records)).last_sequence == -1


def test_view_does_not_copy_the_buffer() -> None:
    buf = bytearray(build_batch(RECORDS))
    batch = RecordBatch(buf)
    assert batch.buffer.obj is buf
    buf[-1] ^= 1
    assert not batch.is_valid()


def test_log_append_time_records_take_max_timestamp() -> None:
    raw = build_batch(RECORDS, timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=7)
    assert {r.timestamp for r in RecordBatch(raw).records()} == {7}


def test_bad_crc_names_file_position_and_both_crcs() -> None:
    raw = bytearray(build_batch(RECORDS))
    raw[-1] ^= 0xFF
    batch = RecordBatch(raw, file=FILE)
    assert not batch.is_valid()
    with pytest.raises(CorruptRecordError) as info:
        batch.ensure_valid()
    assert (info.value.file, info.value.position) == (FILE, 0)
    assert f"stored crc = {batch.crc}" in str(info.value)
    assert f"computed crc = {batch.compute_crc()}" in str(info.value)


def test_crc_excludes_base_offset_and_leader_epoch() -> None:
    buf = bytearray(b"\0" * 5 + build_batch(RECORDS))
    set_base_offset(buf, 5, 123_456)
    set_partition_leader_epoch(memoryview(buf), 5, 17)
    batch = RecordBatch(buf, 5)
    assert (batch.base_offset, batch.partition_leader_epoch) == (123_456, 17)
    assert batch.is_valid()
    assert [r.offset for r in batch.records()] == [123_456, 123_457, 123_458]


def _plain() -> bytes:
    raw: bytes = build_batch(RECORDS)
    return raw


def _malformed() -> list[tuple[str, bytes, type[Exception], str]]:
    raw = _plain()
    body = raw[61:]
    return [
        ("truncated record", _body_edit(raw, body[:-1]), InvalidRecordError, "record size"),
        ("wrong count", _body_edit(raw, body, count=4), InvalidRecordError, "declares 4"),
        ("fewer declared", _body_edit(raw, body, count=2), InvalidRecordError, "remain"),
        ("trailing bytes", _body_edit(raw, body + b"\0"), InvalidRecordError, "remain"),
        ("bad varint", _body_edit(raw, b"\xff" * 6 + body), InvalidRecordError, "varint"),
        ("negative count", _body_edit(raw, body, count=-1), InvalidRecordError, "count"),
    ]


@pytest.mark.parametrize("case", _malformed(), ids=lambda c: c[0])
def test_malformed_records_raise_typed_errors_with_location(case: tuple[Any, ...]) -> None:
    _, raw, error, message = case
    batch = RecordBatch(b"\0" * 9 + raw, 9, file=FILE)
    batch.ensure_valid()  # the CRC is right: the content is what is wrong
    with pytest.raises(error, match=message) as info:
        list(batch.records())
    assert (info.value.file, info.value.position) == (FILE, 9)


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_codec_ids(codec_id: int) -> None:
    raw = bytearray(_plain())
    raw[22] = (raw[22] & ~7) | codec_id
    batch = RecordBatch(_fix_crc(raw), file=FILE)
    for action in (lambda: batch.codec, lambda: list(batch.records())):
        with pytest.raises(CompressionError, match="codec") as info:
            action()
        assert (info.value.file, info.value.position) == (FILE, 0)


def test_corrupt_compressed_payload_is_a_compression_error_with_location() -> None:
    raw = build_batch(RECORDS, codec=Codec.ZSTD)
    broken = _body_edit(raw, raw[61:-4])  # a truncated frame
    with pytest.raises(CompressionError) as info:
        list(RecordBatch(broken, file=FILE).records())
    assert (info.value.file, info.value.codec) == (FILE, "zstd")


def test_high_attribute_byte_is_ignored() -> None:
    raw = bytearray(_plain())
    raw[21] = 0x7F  # Kafka casts attributes to a byte
    batch = RecordBatch(_fix_crc(raw))
    assert (batch.codec, batch.is_control) == (Codec.NONE, False)
    assert list(batch.records()) == RECORDS


def test_control_record_of_a_data_batch_is_an_error() -> None:
    with pytest.raises(InvalidRecordError, match="not a control batch"):
        RecordBatch(_plain()).control_record()


def test_control_record_of_non_marker_type_has_no_epoch() -> None:
    raw = bytearray(
        build_control_batch(ControlType.COMMIT, producer_id=1, producer_epoch=0, timestamp=0)
    )
    raw[69] = 2  # low byte of the key's type: LEADER_CHANGE
    assert RecordBatch(_fix_crc(raw)).control_record() == (ControlType.LEADER_CHANGE, -1)


# ------------------------------------------------------------------ read_batch / iter_batches


def test_iter_batches_walks_a_log_and_stops_at_a_partial_tail() -> None:
    first, second = _plain(), build_batch([Record(53, 1, b"a", b"b")], codec=Codec.LZ4)
    log = first + second + second[:30]
    batches = list(iter_batches(log, file=FILE))
    assert [b.position for b in batches] == [0, len(first)]
    assert [b.base_offset for b in batches] == [50, 53]
    assert all(b.file == FILE for b in batches)
    assert list(iter_batches(log, len(first))) != []
    assert [b.base_offset for b in iter_batches(log, 0, len(first) + len(second) - 1)] == [50]


@pytest.mark.parametrize("tail", [0, 1, 16, 17])
def test_read_batch_needs_more_than_the_header_up_to_magic(tail: int) -> None:
    assert read_batch(_plain()[:tail]) is None


def test_read_batch_partial_batch_is_none() -> None:
    raw = _plain()
    assert read_batch(raw[:-1]) is None
    assert read_batch(raw[:61]) is None


@pytest.mark.parametrize("length", [0, 13, -1])
def test_read_batch_too_small_size_is_corrupt(length: int) -> None:
    raw = bytearray(_plain())
    struct.pack_into(">i", raw, 8, length)
    with pytest.raises(CorruptRecordError, match="smaller than the minimum") as info:
        read_batch(b"\0" * 4 + raw, 4, file=FILE)
    assert (info.value.file, info.value.position) == (FILE, 4)


@pytest.mark.parametrize("magic", [3, 0x7F, 0xFF])
def test_read_batch_unknown_magic_is_corrupt(magic: int) -> None:
    raw = bytearray(_plain())
    raw[16] = magic
    with pytest.raises(CorruptRecordError, match="magic") as info:
        read_batch(raw, file=FILE)
    assert info.value.position == 0


def test_v2_batch_smaller_than_its_header_is_corrupt() -> None:
    raw = bytearray(_plain())
    struct.pack_into(">i", raw, 8, 30)
    with pytest.raises(CorruptRecordError, match="minimum 61"):
        read_batch(raw)


def test_read_batch_dispatches_legacy_magic() -> None:
    message = bytearray(struct.pack(">qiIbbii", 7, 15, 0, 0, 0, -1, 1) + b"x")
    struct.pack_into(">I", message, 12, zlib.crc32(bytes(message[16:])))
    batch = read_batch(bytes(message))
    assert isinstance(batch, LegacyBatch)
    assert batch.is_valid()
    assert list(batch.records()) == [Record(7, -1, None, b"x")]


# ------------------------------------------------------------------ corpus


@pytest.fixture(scope="module")
def kafka_python_snappy() -> Iterator[None]:
    """kafka-python needs python-snappy (not installed): the shared cramjam shim."""
    with snappy_for_kafka_python():
        yield


def _corpus_folders() -> list[str]:
    return sorted(p.name for p in CORPUS.iterdir() if p.is_dir()) if CORPUS.is_dir() else []


def _theirs(data: bytes) -> list[list[tuple[Any, ...]]]:
    out, records = [], MemoryRecords(data)
    while records.has_next():
        batch = records.next_batch()
        out.append([(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in batch])
    return out


def _ours(data: bytes, file: str) -> list[list[tuple[Any, ...]]]:
    out = []
    for batch in iter_batches(data, file=file):
        batch.ensure_valid()
        out.append([(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch.records()])
    return out


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"Kafka corpus not found at {CORPUS}")
@pytest.mark.parametrize("folder", _corpus_folders())
@pytest.mark.usefixtures("kafka_python_snappy")
def test_corpus_logs_match_kafka_python(folder: str) -> None:
    batches = 0
    for log in sorted((CORPUS / folder).rglob("*.log")):
        data = log.read_bytes()
        ours = _ours(data, str(log))
        assert ours == _theirs(data), log
        batches += len(ours)
    assert batches > 0
