"""build_batch / build_control_batch / build_empty_batch: §13.3 and §13.7 byte-exact, Kafka's
builder rules, and everything written read back by kafka-python and aiokafka."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from verify_fixtures import snappy_for_kafka_python

from kafkatier.storage.errors import CompressionError, InvalidRecordError
from kafkatier.storage.record.batch import RecordBatch
from kafkatier.storage.record.builder import build_batch, build_control_batch, build_empty_batch
from kafkatier.storage.record.record import Record
from kafkatier.storage.wire import (
    INT32_MAX,
    Codec,
    ControlType,
    TimestampType,
    increment_sequence,
)

with warnings.catch_warnings():  # kafka-python's import-time DeprecationWarnings
    warnings.simplefilter("ignore", DeprecationWarning)
    from aiokafka.codec import has_zstd as aiokafka_has_zstd
    from aiokafka.record.default_records import DefaultRecordBatch as AioBatch
    from kafka.record.default_records import DefaultRecordBatch as KafkaPythonBatch


VECTORS = Path(__file__).resolve().parents[2] / "data" / "vectors"
BATCHES = json.loads((VECTORS / "record_batches.json").read_text())
MARKERS = json.loads((VECTORS / "end_txn_marker.json").read_text())


@pytest.fixture(scope="module", autouse=True)
def kafka_python_snappy() -> Iterator[None]:
    """kafka-python needs python-snappy (not installed): the shared cramjam shim."""
    with snappy_for_kafka_python():
        yield


def _as_tuples(records: Any) -> list[tuple[Any, ...]]:
    return [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in records]


def _check_with_other_readers(raw: bytes, expected: list[Record]) -> None:
    """kafka-python and aiokafka agree on CRC validity and every record."""
    want = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in expected]
    theirs = KafkaPythonBatch(raw)
    assert theirs.validate_crc()
    assert _as_tuples(theirs) == want
    if (RecordBatch(raw).codec == Codec.ZSTD) and not aiokafka_has_zstd():
        pytest.skip("aiokafka has no zstd support here (cramjam missing)")
    aio = AioBatch(raw)
    assert aio.validate_crc()
    assert _as_tuples(aio) == want


def _text(value: str | None) -> bytes | None:
    return None if value is None else value.encode()


# ------------------------------------------------------------------ official vectors


@pytest.mark.parametrize("case", BATCHES["cases"], ids=lambda c: c["codec"])
def test_memory_records_checksum_vectors(case: dict[str, Any]) -> None:
    records = [
        Record(r["offset"], r["timestamp"], _text(r["key"]), _text(r["value"]))
        for r in BATCHES["records"]
    ]
    raw = build_batch(records, codec=Codec.parse(case["codec"]))
    assert raw.hex() == case["hex"]
    batch = RecordBatch(raw)
    assert batch.crc == batch.compute_crc() == case["crc"]
    assert list(batch.records()) == records
    _check_with_other_readers(raw, records)


@pytest.mark.parametrize("case", MARKERS["cases"], ids=lambda c: c["control_type"])
def test_end_txn_marker_vector(case: dict[str, Any]) -> None:
    raw = build_control_batch(
        ControlType[case["control_type"]],
        producer_id=case["producer_id"],
        producer_epoch=case["producer_epoch"],
        coordinator_epoch=case["coordinator_epoch"],
        timestamp=case["timestamp"],
        base_offset=case["base_offset"],
        partition_leader_epoch=case["partition_leader_epoch"],
    )
    assert len(raw) == case["size"]
    assert raw.hex() == case["hex"]
    batch = RecordBatch(raw)
    assert batch.is_control and batch.is_transactional and batch.base_sequence == -1
    assert batch.control_record() == (ControlType[case["control_type"]], 0)


# ------------------------------------------------------------------ properties

HEADERS = st.lists(
    st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=8)), max_size=3
).map(tuple)


@st.composite
def record_lists(draw: st.DrawFn) -> list[Record]:
    offset = draw(st.integers(0, 2**40))
    records = []
    for _ in range(draw(st.integers(1, 12))):
        ts = draw(st.just(-1) | st.integers(0, 2**42))  # any order: deltas may be negative
        key = draw(st.none() | st.binary(max_size=40))
        value = draw(st.none() | st.binary(max_size=200))
        records.append(Record(offset, ts, key, value, draw(HEADERS)))
        offset += draw(st.integers(1, 3))  # gaps, as after compaction
    return records


@st.composite
def producers(draw: st.DrawFn) -> dict[str, Any]:
    if draw(st.booleans()):
        return {}
    return {
        "producer_id": draw(st.integers(0, 2**62)),
        "producer_epoch": draw(st.integers(0, 2**15 - 1)),
        "base_sequence": draw(st.integers(0, INT32_MAX)),
        "transactional": draw(st.booleans()),
    }


def _expected(records: list[Record], raw: bytes, **kw: Any) -> list[Record]:
    batch = RecordBatch(raw)
    log_append = kw.get("timestamp_type") == TimestampType.LOG_APPEND_TIME
    seq = kw.get("base_sequence", -1)
    return [
        Record(
            r.offset,
            batch.max_timestamp if log_append else r.timestamp,
            r.key,
            r.value,
            r.headers,
            increment_sequence(seq, r.offset - records[0].offset) if seq >= 0 else -1,
        )
        for r in records
    ]


@settings(max_examples=60, deadline=None)
@given(
    records=record_lists(),
    codec=st.sampled_from(list(Codec)),
    producer=producers(),
    log_append=st.booleans(),
    ple=st.integers(-1, INT32_MAX),
)
def test_round_trip_and_other_readers(
    records: list[Record], codec: Codec, producer: dict[str, Any], log_append: bool, ple: int
) -> None:
    kw: dict[str, Any] = dict(producer, codec=codec, partition_leader_epoch=ple)
    if log_append:
        kw.update(timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=1_700_000_000_000)
    raw = build_batch(records, **kw)
    batch = RecordBatch(raw)
    batch.ensure_valid()
    assert (batch.codec, batch.partition_leader_epoch, batch.records_count) == (
        codec,
        ple,
        len(records),
    )
    assert batch.base_timestamp == records[0].timestamp
    if not log_append:
        assert batch.max_timestamp == max(r.timestamp for r in records)
    assert batch.is_transactional == producer.get("transactional", False)
    expected = _expected(records, raw, **kw)
    assert list(batch.records()) == expected
    _check_with_other_readers(raw, expected)


@settings(max_examples=30, deadline=None)
@given(
    control=st.sampled_from([ControlType.ABORT, ControlType.COMMIT]),
    pid=st.integers(0, 2**62),
    epoch=st.integers(0, 2**15 - 1),
    coordinator_epoch=st.integers(-(2**31), INT32_MAX),
    ts=st.integers(0, 2**42),
    base=st.integers(0, 2**40),
)
def test_control_batches_round_trip(
    control: ControlType, pid: int, epoch: int, coordinator_epoch: int, ts: int, base: int
) -> None:
    raw = build_control_batch(
        control,
        producer_id=pid,
        producer_epoch=epoch,
        coordinator_epoch=coordinator_epoch,
        timestamp=ts,
        base_offset=base,
    )
    assert len(raw) == 78
    batch = RecordBatch(raw)
    assert batch.control_record() == (control, coordinator_epoch)
    assert (batch.producer_id, batch.producer_epoch, batch.max_timestamp) == (pid, epoch, ts)
    theirs = KafkaPythonBatch(raw)
    assert theirs.validate_crc() and theirs.is_control_batch
    (record,) = list(theirs)
    assert (record.offset, record.type) == (base, int(control))
    assert AioBatch(raw).validate_crc()


# ------------------------------------------------------------------ builder rules


def test_cleaner_batch_keeps_original_offsets_with_gaps() -> None:
    records = [Record(12, 5, b"a", b"1"), Record(15, 6, b"b", None)]
    raw = build_batch(records, base_offset=10, last_offset=19)
    batch = RecordBatch(raw)
    assert (batch.base_offset, batch.last_offset, batch.records_count) == (10, 19, 2)
    assert [r.offset for r in batch.records()] == [12, 15]
    _check_with_other_readers(raw, records)


def test_delete_horizon_becomes_base_timestamp() -> None:
    records = [Record(0, 1000, b"k", None), Record(1, 900, b"j", b"v")]
    raw = build_batch(records, delete_horizon_ms=5000)
    batch = RecordBatch(raw)
    assert batch.attributes & 0x40
    assert batch.base_timestamp == batch.delete_horizon_ms == 5000
    assert [r.timestamp for r in batch.records()] == [1000, 900]
    assert RecordBatch(build_batch(records, delete_horizon_ms=-1)).delete_horizon_ms is None
    _check_with_other_readers(raw, records)


def test_log_append_time_sets_max_timestamp_and_attribute() -> None:
    records = [Record(0, 10, b"a", b"b"), Record(1, 20, None, b"c")]
    raw = build_batch(records, timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=99)
    batch = RecordBatch(raw)
    assert batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert (batch.base_timestamp, batch.max_timestamp) == (10, 99)
    assert [r.timestamp for r in batch.records()] == [99, 99]


def test_levels_are_passed_to_the_codec() -> None:
    records = [Record(i, i, b"k", b"value " * 50) for i in range(20)]
    for codec, level in [(Codec.GZIP, 9), (Codec.LZ4, 12), (Codec.ZSTD, 19)]:
        raw = build_batch(records, codec=codec, level=level)
        assert list(RecordBatch(raw).records()) == records


@pytest.mark.parametrize(
    ("records", "kwargs", "message"),
    [
        ([], {}, "at least one"),
        ([Record(0, -2, None, None)], {}, "negative timestamp"),
        ([Record(0, 0, None, None)], {"transactional": True}, "producer id"),
        ([Record(0, 0, None, None)], {"producer_id": 5, "base_sequence": 0}, "epoch"),
        ([Record(0, 0, None, None)], {"producer_id": 5, "producer_epoch": 0}, "sequence"),
        ([Record(1, 0, None, None), Record(1, 0, None, None)], {}, "increase"),
        ([Record(0, 0, None, None)], {"base_offset": 1, "last_offset": 5}, "increase"),
        ([Record(5, 0, None, None)], {"last_offset": 4}, "offset"),
        ([Record(0, 0, None, None)], {"last_offset": 2**31}, "last offset delta"),
        ([Record(0, 0, None, None)], {"producer_epoch": 2**15}, "epoch"),
        ([Record(0, 0, None, None)], {"timestamp_type": TimestampType.LOG_APPEND_TIME}, "Log"),
    ],
)
def test_builder_rejects_what_memory_records_builder_rejects(
    records: list[Record], kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidRecordError, match=message):
        build_batch(records, **kwargs)


def test_unknown_codec_is_a_compression_error() -> None:
    with pytest.raises(CompressionError):
        build_batch([Record(0, 0, None, None)], codec=cast(Codec, 5))


def test_control_batch_needs_a_producer_and_a_marker_type() -> None:
    with pytest.raises(InvalidRecordError, match="producer id"):
        build_control_batch(ControlType.COMMIT, producer_id=-1, producer_epoch=0, timestamp=0)
    with pytest.raises(InvalidRecordError, match="ABORT and COMMIT"):
        build_control_batch(ControlType.LEADER_CHANGE, producer_id=1, producer_epoch=0, timestamp=0)


@pytest.mark.parametrize("codec", list(Codec))
def test_empty_batch_keeps_producer_state(codec: Codec) -> None:
    records = [Record(100, 7, b"a", b"b"), Record(104, 9, b"c", b"d")]
    original = RecordBatch(
        build_batch(
            records,
            codec=codec,
            producer_id=3,
            producer_epoch=2,
            base_sequence=40,
            transactional=True,
            partition_leader_epoch=6,
            delete_horizon_ms=1,
        )
    )
    raw = build_empty_batch(original)
    empty = RecordBatch(raw)
    assert len(raw) == 61 and empty.batch_length == 49
    empty.ensure_valid()
    same = (
        "base_offset",
        "last_offset_delta",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "partition_leader_epoch",
        "max_timestamp",
        "is_transactional",
        "is_control",
        "timestamp_type",
    )
    assert [getattr(empty, f) for f in same] == [getattr(original, f) for f in same]
    assert (empty.base_timestamp, empty.records_count, empty.codec) == (-1, 0, Codec.NONE)
    assert empty.delete_horizon_ms is None
    assert list(empty.records()) == []
    assert KafkaPythonBatch(raw).validate_crc()


def test_empty_control_batch_reads_as_unknown() -> None:
    marker = RecordBatch(
        build_control_batch(ControlType.ABORT, producer_id=1, producer_epoch=0, timestamp=5)
    )
    assert RecordBatch(build_empty_batch(marker)).control_record() == (ControlType.UNKNOWN, -1)
