"""The Arrow fast path against Kafka's vectors and independent readers/writers.

Independent implementations: kafka-python (pure Python) and aiokafka (C) record batch readers
and builders. kafka-python cannot decompress snappy here (no python-snappy), so snappy batches
are read with aiokafka instead.
"""

from __future__ import annotations

import itertools
import json
import mmap
import struct
from pathlib import Path
from typing import Any

import crc32c
import numpy as np
import pyarrow as pa
import pytest
from aiokafka.record.default_records import DefaultRecordBatch as AioBatch
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch as KpBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder
from verify_fixtures import snappy_for_kafka_python

from kafkatier.storage.arrow import decode as _arrow_decode
from kafkatier.storage.arrow import encode_kernels as K
from kafkatier.storage.arrow.buffers import output_buffer
from kafkatier.storage.arrow.codec import decode_arrow, encode_arrow
from kafkatier.storage.arrow.columns import ArrowSchemaError
from kafkatier.storage.arrow.decode import BatchHeader
from kafkatier.storage.arrow.encode import EncodedBatches
from kafkatier.storage.arrow.schema import SPARK_KAFKA_SCHEMA
from kafkatier.storage.errors import (
    CompressionError,
    CorruptRecordError,
    InvalidRecordError,
    RecordTooLargeError,
)
from kafkatier.storage.wire import ATTR_LOG_APPEND_TIME, BATCH_HEADER, Codec, ControlType

VECTORS = json.loads(
    (Path(__file__).resolve().parents[2] / "data" / "vectors" / "arrow_codec.json").read_text()
)
CORPUS = Path(__file__).resolve().parents[3].parent / "shared" / "kafka-corpus"
HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
Row = tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]


def make_table(records: list[dict[str, Any]], with_headers: bool = True) -> pa.Table:
    cols: dict[str, pa.Array] = {
        "key": pa.array([r.get("key") for r in records], pa.binary()),
        "value": pa.array([r.get("value") for r in records], pa.binary()),
        "timestamp": pa.array([r.get("timestamp") for r in records], pa.int64()),
    }
    if with_headers:
        hdrs = [
            None if r.get("headers") is None else [{"key": k, "value": v} for k, v in r["headers"]]
            for r in records
        ]
        cols["headers"] = pa.array(hdrs, HEADERS_TYPE)
    return pa.table(cols)


def iter_batches(data: bytes | bytearray) -> list[tuple[int, int]]:
    """(position, size) of each batch, from the length fields alone."""
    out, pos = [], 0
    while pos + 12 <= len(data):
        size = 12 + struct.unpack_from(">i", data, pos + 8)[0]
        out.append((pos, size))
        pos += size
    return out


def reference_read(data: bytes | bytearray, *, check_crc: bool = True) -> list[Row]:
    """Data records as kafka-python reads them (aiokafka for snappy); control batches skipped."""
    rows: list[Row] = []
    for pos, size in iter_batches(data):
        chunk = bytes(data[pos : pos + size])
        batch: Any = KpBatch(chunk)
        if batch.compression_type == Codec.SNAPPY:
            batch = AioBatch(chunk)
        if check_crc:
            assert batch.validate_crc(), f"bad CRC at {pos}"
        if batch.is_control_batch:
            continue
        for r in batch:
            rows.append((r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]))
    return rows


def arrow_rows(table: pa.Table) -> list[Row]:
    assert table.schema == SPARK_KAFKA_SCHEMA
    ts = table.column("timestamp").cast(pa.int64()).to_pylist()
    rows: list[Row] = []
    for i, r in enumerate(table.to_pylist()):
        headers = [(h["key"], h["value"]) for h in (r["headers"] or [])]
        assert r["headers"] is None or headers, "empty header lists are null, as in Spark"
        rows.append((r["offset"], ts[i] // 1000, r["key"], r["value"], headers))
    return rows


def input_rows(records: list[dict[str, Any]], base: int = 0) -> list[Row]:
    return [
        (base + i, r["timestamp"], r.get("key"), r.get("value"), list(r.get("headers") or []))
        for i, r in enumerate(records)
    ]


# --- official vectors -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "hexed"), VECTORS["varint"]["varint"] + VECTORS["varint"]["varlong"]
)
def test_varint_vectors(value: int, hexed: str) -> None:
    buf = np.zeros(16, np.uint8)
    end = K.put_varint(buf, 0, value)
    assert bytes(buf[:end]).hex() == hexed
    assert K.varint_size(value) == len(hexed) // 2
    max_bytes = 5 if -(2**31) <= value < 2**31 else 10
    assert K.get_varint(buf, 0, end, max_bytes) == (value, end)


def test_invalid_varints_are_rejected() -> None:
    for key, max_bytes in (("invalid_varint", 5), ("invalid_varlong", 10)):
        raw = np.frombuffer(bytes.fromhex(VECTORS["varint"][key]), np.uint8)
        assert K.get_varint(raw, 0, len(raw), max_bytes)[1] == -1


def test_encode_reproduces_kafka_checksum_batch() -> None:
    vec = VECTORS["batch_checksum"]
    records = [
        {**r, "key": r["key"].encode(), "value": r["value"].encode()} for r in vec["records"]
    ]
    enc = encode_arrow(make_table(records, with_headers=False))
    assert bytes(enc.data).hex() == vec["none"]["hex"]
    assert BATCH_HEADER.unpack_from(enc.data)[4] == vec["none"]["crc"]


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_decode_kafka_checksum_batches(codec: str) -> None:
    vec = VECTORS["batch_checksum"]
    table = decode_arrow(bytes.fromhex(vec[codec]["hex"]), topic="t", partition=3)
    expected = [
        (i, r["timestamp"], r["key"].encode(), r["value"].encode(), [])
        for i, r in enumerate(vec["records"])
    ]
    assert arrow_rows(table) == expected
    assert table.column("topic").to_pylist() == ["t", "t"]
    assert table.column("partition").to_pylist() == [3, 3]


def test_encode_lz4_checksum_batch_matches_kafka() -> None:
    vec = VECTORS["batch_checksum"]
    records = [
        {**r, "key": r["key"].encode(), "value": r["value"].encode()} for r in vec["records"]
    ]
    enc = encode_arrow(make_table(records, with_headers=False), codec=Codec.LZ4)
    assert bytes(enc.data).hex() == vec["lz4"]["hex"]


def test_record_sizes_match_kafka() -> None:
    vec = VECTORS["record_sizes"]
    records = [
        {
            "timestamp": r["timestamp"],
            "key": None if r["key"] is None else r["key"].encode(),
            "value": b"v" * r["value_length"]
            if "value_length" in r
            else (None if r["value"] is None else r["value"].encode()),
            "headers": [(k, None if v is None else v.encode()) for k, v in r["headers"]],
        }
        for r in vec["records"]
    ]
    enc = encode_arrow(make_table(records), max_batch_bytes=1 << 20)
    assert len(enc) == 1
    data = np.frombuffer(enc.data, np.uint8)
    pos, sizes = 61, []
    for _ in records:
        length, body = K.get_varint(data, pos, len(data), 5)
        sizes.append(body - pos + length)
        pos = body + length
    assert pos == len(data)
    assert sizes == [r["size"] for r in vec["records"]]
    assert reference_read(enc.data) == input_rows(records)


def test_sequences_wrap_like_kafka() -> None:
    vec = VECTORS["sequences"]
    table = make_table([{"value": b"x", "timestamp": 5}] * vec["records"])
    one = encode_arrow(table, producer_id=7, producer_epoch=0, base_sequence=vec["base_sequence"])
    assert KpBatch(bytes(one.data)).base_sequence == vec["base_sequence"]
    split = encode_arrow(
        table,
        producer_id=7,
        producer_epoch=0,
        base_sequence=vec["base_sequence"],
        max_batch_records=1,
    )
    seqs = [
        KpBatch(bytes(split.data[p : p + s])).base_sequence for p, s in iter_batches(split.data)
    ]
    assert seqs == vec["record_sequences"] == split.base_sequences.tolist()


def test_control_batches_are_skipped() -> None:
    marker = bytes.fromhex(VECTORS["end_txn_marker"]["hex"])
    data = encode_arrow(make_table([{"value": b"a", "timestamp": 1}]), base_offset=0).data
    table = decode_arrow(bytes(data) + marker)
    assert table.column("value").to_pylist() == [b"a"]
    assert decode_arrow(marker).num_rows == 0


# --- writing: read back by kafka-python / aiokafka ---------------------------------------------


def sample_records(n: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(n)
    out = []
    for i in range(n):
        headers = [
            (
                f"h{j}",
                None if (i + j) % 4 == 0 else bytes(rng.integers(0, 256, j + 1, dtype=np.uint8)),
            )
            for j in range(i % 3)
        ]
        out.append(
            {
                "key": None if i % 5 == 0 else f"key-{i}".encode(),
                "value": None
                if i % 7 == 3
                else bytes(rng.integers(0, 256, i % 50, dtype=np.uint8)),
                "timestamp": 1_700_000_000_000 + int(rng.integers(-5000, 5000)),
                "headers": headers or (None if i % 2 else []),
            }
        )
    return out


def test_headers_decode_through_outputs_mapped_apart() -> None:
    """Enough record bytes that the header outputs come from mappings of their own
    (``decode_kernels.untouched``): the headers written there read as kafka-python reads them."""
    from kafkatier.storage.arrow import decode_kernels

    records = sample_records(20_000)
    enc = encode_arrow(make_table(records), codec=Codec.LZ4)
    outputs = decode_kernels.empty_outputs(len(records), len(enc.data))
    header_lengths = outputs[3][1]
    assert header_lengths.nbytes >= decode_kernels._OWN_MAPPING_BYTES
    assert isinstance(header_lengths.base.obj, mmap.mmap)
    assert arrow_rows(decode_arrow(bytes(enc.data))) == reference_read(enc.data)
    assert sum(len(r["headers"] or []) for r in records) > 10_000


@pytest.mark.parametrize("codec", list(Codec))
def test_reference_readers_read_encoded_batches(codec: Codec) -> None:
    records = sample_records(300)
    enc = encode_arrow(
        make_table(records),
        codec=codec,
        base_offset=40,
        producer_id=9,
        producer_epoch=2,
        base_sequence=100,
        transactional=True,
        partition_leader_epoch=5,
        max_batch_bytes=4000,
    )
    assert len(enc) > 3
    assert reference_read(enc.data) == input_rows(records, base=40)
    for i, (pos, size) in enumerate(iter_batches(enc.data)):
        batch = KpBatch(bytes(enc.data[pos : pos + size]))
        assert (batch.compression_type, batch.is_transactional) == (codec, True)
        assert (batch.producer_id, batch.producer_epoch) == (9, 2)
        assert batch.base_sequence == 100 + int(enc.base_offsets[i]) - 40
        assert (pos, size, batch.base_offset) == (
            enc.positions[i],
            enc.sizes[i],
            enc.base_offsets[i],
        )
        assert (
            batch.max_timestamp
            == enc.max_timestamps[i]
            == max(
                records[j]["timestamp"]
                for j in range(batch.base_offset - 40, batch.next_offset - 40)
            )
        )
        assert struct.unpack_from(">i", enc.data, pos + 12)[0] == 5
    assert enc.last_offsets[-1] == 40 + len(records) - 1
    assert enc.record_count == len(records)


def test_compression_level_reaches_the_codec() -> None:
    records = [
        {"value": b"abcdefgh" * 40 + bytes([i % 7]) * 30, "timestamp": 1} for i in range(200)
    ]
    fast, small = (encode_arrow(make_table(records), codec=Codec.GZIP, level=lv) for lv in (1, 9))
    assert len(small.data) < len(fast.data)
    assert reference_read(fast.data) == reference_read(small.data) == input_rows(records)


def test_null_timestamps_use_the_given_default() -> None:
    table = pa.table({"value": [b"a", b"b"], "timestamp": pa.array([None, 7], pa.int64())})
    enc = encode_arrow(table, timestamp=123)
    assert [r[1] for r in reference_read(enc.data)] == [123, 7]
    no_column = encode_arrow(pa.table({"value": [b"a"]}), timestamp=55)
    assert [r[1] for r in reference_read(no_column.data)] == [55]


@pytest.mark.parametrize(
    ("unit", "raw", "millis"),
    [
        ("s", [1_700_000_000, 1_700_000_001], [1_700_000_000_000, 1_700_000_001_000]),
        ("ms", [1_700_000_000_123], [1_700_000_000_123]),
        ("us", [1_700_000_000_123_999], [1_700_000_000_123]),
        ("ns", [1_700_000_000_123_999_999], [1_700_000_000_123]),
    ],
)
def test_timestamp_units(unit: str, raw: list[int], millis: list[int]) -> None:
    table = pa.table({"value": [b"v"] * len(raw), "timestamp": pa.array(raw, pa.timestamp(unit))})
    assert [r[1] for r in reference_read(encode_arrow(table).data)] == millis


def test_strings_slices_and_chunks_encode_like_plain_binary() -> None:
    records = sample_records(50)
    plain = make_table(records)
    expected = bytes(encode_arrow(plain.slice(10, 30), timestamp=1).data)
    as_strings = plain.set_column(
        1,
        "value",
        pa.array(
            [None if r["value"] is None else r["value"].hex() for r in records], pa.large_string()
        ),
    )
    chunked = pa.concat_tables([plain.slice(10, 5), plain.slice(15, 25)])
    assert bytes(encode_arrow(chunked, timestamp=1).data) == expected
    assert bytes(encode_arrow(plain.to_batches()[0].slice(10, 30), timestamp=1).data) == expected
    values = [r[3] for r in reference_read(encode_arrow(as_strings.slice(10, 30)).data)]
    assert values == [
        None if r["value"] is None else r["value"].hex().encode() for r in records[10:40]
    ]


def test_extra_columns_are_ignored_so_decoded_tables_reencode() -> None:
    records = sample_records(40)
    first = encode_arrow(make_table(records), base_offset=3)
    again = encode_arrow(decode_arrow(bytes(first.data)), base_offset=3)
    assert bytes(again.data) == bytes(first.data)


# --- batch splitting --------------------------------------------------------------------------


@pytest.mark.parametrize("codec", [Codec.NONE, Codec.GZIP])
def test_batches_are_as_full_as_the_limit_allows(codec: Codec) -> None:
    records = sample_records(200)
    table = make_table(records)
    limit = 1500
    enc = encode_arrow(table, max_batch_bytes=limit, codec=codec)
    plain = encode_arrow(table, max_batch_bytes=limit) if codec else enc
    assert (enc.sizes <= limit).all()
    starts = [*plain.base_offsets.tolist(), len(records)]
    for s, e in itertools.pairwise(starts[:-1]):  # every batch but the last, and the next row
        grown = encode_arrow(table.slice(s, e - s + 1), max_batch_bytes=1 << 20)
        assert grown.sizes[0] > limit, "the next record would have fitted"
    assert reference_read(enc.data) == input_rows(records)


def test_max_batch_records() -> None:
    enc = encode_arrow(make_table(sample_records(10)), max_batch_records=4)
    assert enc.record_counts.tolist() == [4, 4, 2]
    assert enc.last_offset_deltas.tolist() == [3, 3, 1]


def test_record_too_large_names_the_row() -> None:
    records = [{"value": b"x" * 10, "timestamp": 1}, {"value": b"x" * 5000, "timestamp": 1}]
    with pytest.raises(RecordTooLargeError) as info:
        encode_arrow(make_table(records), max_batch_bytes=1000)
    assert info.value.row == 1


# --- rebase ------------------------------------------------------------------------------------


def test_rebase_assigns_offsets_and_epoch_without_touching_crc() -> None:
    records = sample_records(30)
    enc = encode_arrow(make_table(records), max_batch_records=7, codec=Codec.ZSTD)
    before = bytes(enc.data)
    moved = enc.rebase(1000, 12)
    assert reference_read(moved.data) == input_rows(records, base=1000)
    assert moved.base_offsets.tolist() == [1000, 1007, 1014, 1021, 1028]
    assert moved.last_offsets[-1] == 1029 and moved.partition_leader_epoch == 12
    for pos, size in iter_batches(moved.data):
        assert struct.unpack_from(">i", moved.data, pos + 12)[0] == 12
        assert moved.data[pos + 16 : pos + size] == before[pos + 16 : pos + size]
    assert isinstance(moved, EncodedBatches)


# --- reading what kafka-python and aiokafka write ----------------------------------------------


def build_with(
    builder_cls: Any,
    records: list[dict[str, Any]],
    codec: Codec,
    offsets: list[int] | None = None,
    pid: int = -1,
) -> bytes:
    out, i = b"", 0
    offsets = offsets or list(range(len(records)))
    while i < len(records):
        builder = builder_cls(2, codec, 0, pid, 0 if pid >= 0 else -1, 0 if pid >= 0 else -1, 2000)
        start = i
        while i < len(records):
            r = records[i]
            meta = builder.append(
                offsets[i] - offsets[start],
                r["timestamp"],
                r["key"],
                r["value"],
                list(r["headers"] or []),
            )
            if meta is None:
                break
            i += 1
        batch = bytearray(builder.build())
        struct.pack_into(">q", batch, 0, offsets[start])
        out += bytes(batch)
    return out


@pytest.mark.parametrize("builder", [KpBuilder, AioBuilder], ids=["kafka-python", "aiokafka"])
@pytest.mark.parametrize("codec", list(Codec))
def test_decode_what_client_builders_write(builder: Any, codec: Codec) -> None:
    with snappy_for_kafka_python():  # kafka-python's snappy needs python-snappy: cramjam shim
        data = build_with(builder, sample_records(150), codec)
    assert arrow_rows(decode_arrow(data)) == reference_read(data)


def test_decode_compacted_batch_with_offset_gaps() -> None:
    records = sample_records(6)
    data = build_with(KpBuilder, records, Codec.NONE, offsets=[10, 12, 13, 17, 20, 21])
    rows = arrow_rows(decode_arrow(data))
    assert [r[0] for r in rows] == [10, 12, 13, 17, 20, 21]
    assert rows == reference_read(data)


def test_log_append_time_uses_max_timestamp() -> None:
    enc = encode_arrow(make_table(sample_records(5)))
    data = bytearray(enc.data)
    attrs = struct.unpack_from(">h", data, 21)[0] | ATTR_LOG_APPEND_TIME
    struct.pack_into(">hiqq", data, 21, attrs, 4, 1_600_000_000_000, 1_690_000_000_000)
    struct.pack_into(">I", data, 17, crc32c.crc32c(data[21:]))
    table = decode_arrow(bytes(data))
    assert table.column("timestampType").to_pylist() == [1] * 5
    assert arrow_rows(table) == reference_read(data)
    assert {r[1] for r in arrow_rows(table)} == {1_690_000_000_000}


def test_offset_range_and_batch_filter() -> None:
    txn = encode_arrow(
        make_table(sample_records(10)),
        producer_id=4,
        producer_epoch=0,
        base_sequence=0,
        transactional=True,
        max_batch_records=4,
    )
    plain = encode_arrow(make_table(sample_records(5)), base_offset=10)
    data = bytes(txn.data) + bytes(plain.data)
    offsets = decode_arrow(data, start_offset=3, end_offset=12).column("offset").to_pylist()
    assert offsets == list(range(3, 12))
    seen: list[BatchHeader] = []

    def committed(header: BatchHeader) -> bool:
        seen.append(header)
        return not header.is_transactional

    table = decode_arrow(data, batch_filter=committed, base_position=1000)
    assert table.column("offset").to_pylist() == list(range(10, 15))
    assert [h.position for h in seen] == [1000 + p for p in txn.positions.tolist()] + [
        1000 + len(txn.data)
    ]
    assert [(h.base_offset, h.last_offset, h.producer_id) for h in seen] == [
        (0, 3, 4),
        (4, 7, 4),
        (8, 9, 4),
        (10, 14, -1),
    ]


def marker(kind: ControlType, offset: int, producer_id: int) -> bytes:
    """The §13.7 end-transaction marker, moved to ``offset`` and ``producer_id``."""
    data = bytearray.fromhex(VECTORS["end_txn_marker"]["hex"])
    struct.pack_into(">q", data, 0, offset)
    struct.pack_into(">q", data, 43, producer_id)
    struct.pack_into(">h", data, 68, kind)  # the control key's type
    struct.pack_into(">I", data, 17, crc32c.crc32c(data[21:]))
    return bytes(data)


def test_filter_sees_transaction_markers_like_a_read_committed_consumer() -> None:
    txn = {"producer_id": 4, "producer_epoch": 0, "base_sequence": 0, "transactional": True}
    aborted = encode_arrow(make_table(sample_records(3)), base_offset=0, **txn)
    committed = encode_arrow(make_table(sample_records(2)), base_offset=4, **txn)
    plain = encode_arrow(make_table(sample_records(2)), base_offset=7)
    data = b"".join(
        [
            bytes(aborted.data),
            marker(ControlType.ABORT, 3, 4),
            bytes(committed.data),
            marker(ControlType.COMMIT, 6, 4),
            bytes(plain.data),
        ]
    )
    aborted_pids, markers = {4}, []  # as if the transaction index listed pid 4 from offset 0

    def read_committed(header: BatchHeader) -> bool:
        if header.is_control:
            kind, epoch = header.control_record()
            markers.append((header.base_offset, kind, epoch))
            if kind == ControlType.ABORT:
                aborted_pids.discard(header.producer_id)
            return False
        return not (header.is_transactional and header.producer_id in aborted_pids)

    table = decode_arrow(data, batch_filter=read_committed)
    assert table.column("offset").to_pylist() == [4, 5, 7, 8]
    assert markers == [(3, ControlType.ABORT, 0), (6, ControlType.COMMIT, 0)]
    assert decode_arrow(data).column("offset").to_pylist() == [0, 1, 2, 4, 5, 7, 8]
    with pytest.raises(InvalidRecordError, match="not a control batch"):
        BatchHeader(0, 0, 0, -1, -1, -1, False, False, 1, 0).control_record()


def test_partial_tail_is_ignored_and_empty_input() -> None:
    data = bytes(encode_arrow(make_table(sample_records(20)), max_batch_records=5).data)
    assert decode_arrow(data[:-7]).num_rows == 15
    assert decode_arrow(data[:10]).num_rows == 0
    empty = decode_arrow(b"")
    assert empty.schema == SPARK_KAFKA_SCHEMA and empty.num_rows == 0
    none = encode_arrow(make_table([]))
    assert (len(none), len(none.data)) == (0, 0)


def test_empty_batches_from_the_cleaner_decode_to_nothing() -> None:
    """kafka-format.md §1.8: 61 bytes, recordsCount 0, baseTimestamp -1."""
    enc = encode_arrow(make_table(sample_records(3)), base_offset=5)
    empty = bytearray(enc.data[:61])
    struct.pack_into(">i", empty, 8, 49)
    struct.pack_into(">q", empty, 27, -1)
    struct.pack_into(">i", empty, 57, 0)
    struct.pack_into(">I", empty, 17, crc32c.crc32c(empty[21:]))
    after = encode_arrow(make_table(sample_records(2)), base_offset=8)
    table = decode_arrow(bytes(empty) + bytes(after.data))
    assert table.column("offset").to_pylist() == [8, 9]


def test_any_buffer_type_and_groups_of_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    records = sample_records(120)
    for codec in (Codec.NONE, Codec.LZ4):
        enc = encode_arrow(make_table(records), codec=codec, max_batch_records=7)
        expected = arrow_rows(decode_arrow(bytes(enc.data)))
        assert expected == input_rows(records)
        assert arrow_rows(decode_arrow(enc.data)) == expected  # bytearray
        assert arrow_rows(decode_arrow(memoryview(enc.data))) == expected
        monkeypatch.setattr(_arrow_decode, "GROUP_BYTES", 500)
        chunked = decode_arrow(bytes(enc.data))
        monkeypatch.undo()
        assert chunked.column("offset").num_chunks > 3
        assert arrow_rows(chunked) == expected


def test_output_buffer_is_a_writable_bytearray() -> None:
    for size in (0, 10, 9 << 20):
        buf = output_buffer(size)
        assert isinstance(buf, bytearray) and len(buf) == size
        buf[-1:] = b"x" if size else b""
        assert buf[-1:] == (b"x" if size else b"")


def test_invalid_utf8_header_keys_decode_with_replacement() -> None:
    records = [{"value": b"v", "timestamp": 1, "headers": [("ab", b"x")]}]
    data = bytearray(encode_arrow(make_table(records)).data)
    at = bytes(data).index(b"ab")
    data[at : at + 2] = b"\xff\xfe"
    struct.pack_into(">I", data, 17, crc32c.crc32c(data[21:]))
    headers = decode_arrow(bytes(data)).column("headers").to_pylist()
    assert headers == [[{"key": "\ufffd\ufffd", "value": b"x"}]]


# --- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("columns", "culprit"),
    [
        ({"key": pa.array([b"k"])}, "value"),
        ({"value": pa.array([1], pa.int32())}, "value"),
        ({"value": pa.array([b"v"]), "key": pa.array([1.5])}, "key"),
        ({"value": pa.array([b"v"]), "timestamp": pa.array(["x"])}, "timestamp"),
        ({"value": pa.array([b"v"]), "headers": pa.array([[1]])}, "headers"),
        (
            {"value": pa.array([b"v"]), "headers": pa.array([[{"key": 1, "value": b"x"}]])},
            "headers",
        ),
    ],
)
def test_bad_schema_names_the_column(columns: dict[str, pa.Array], culprit: str) -> None:
    with pytest.raises(ArrowSchemaError, match=culprit) as info:
        encode_arrow(pa.table(columns))
    assert "accepted" in str(info.value)
    assert isinstance(info.value, TypeError)


def test_bad_values_are_rejected() -> None:
    with pytest.raises(InvalidRecordError, match="timestamp") as info:
        encode_arrow(pa.table({"value": [b"a", b"b"], "timestamp": pa.array([1, -5])}))
    assert info.value.row == 1
    null_key = pa.array(
        [[{"key": "a", "value": b"x"}], [{"key": None, "value": b"y"}]], HEADERS_TYPE
    )
    with pytest.raises(InvalidRecordError, match="header key") as info:
        encode_arrow(pa.table({"value": [b"a", b"b"], "headers": null_key}))
    assert info.value.row == 1
    with pytest.raises(InvalidRecordError, match="producer id"):
        encode_arrow(pa.table({"value": [b"a"]}), transactional=True)


def test_corruption_is_reported_with_file_and_position() -> None:
    enc = encode_arrow(make_table(sample_records(20)), max_batch_records=5)
    data = bytearray(enc.data)
    third = int(enc.positions[2])
    data[third + 70] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC") as info:
        decode_arrow(bytes(data), file="x.log", base_position=100)
    assert (info.value.file, info.value.position) == ("x.log", 100 + third)


def test_malformed_records_raise_invalid_record() -> None:
    enc = encode_arrow(make_table([{"value": b"abc", "timestamp": 1}] * 3))
    for patch, message in ((b"\x7f", "record length"), (b"\x00", "record length")):
        data = bytearray(enc.data)
        data[61:62] = patch  # the first record's length varint
        with pytest.raises(InvalidRecordError, match=message) as info:
            decode_arrow(bytes(data), verify_crc=False, file="f")
        assert info.value.position == 0
    trailing = bytearray(enc.data)
    struct.pack_into(">i", trailing, 57, 2)  # records count 2, but 3 records follow
    with pytest.raises(InvalidRecordError, match="declared batch size"):
        decode_arrow(bytes(trailing), verify_crc=False)
    too_many = bytearray(enc.data)
    struct.pack_into(">i", too_many, 57, 10_000)
    with pytest.raises(InvalidRecordError, match="record count"):
        decode_arrow(bytes(too_many), verify_crc=False)


def test_framing_errors() -> None:
    data = bytearray(encode_arrow(make_table([{"value": b"abc", "timestamp": 1}])).data)
    small = bytearray(data)
    struct.pack_into(">i", small, 8, 13)
    with pytest.raises(CorruptRecordError, match="smaller"):
        decode_arrow(bytes(small))
    legacy = bytearray(data)
    legacy[16] = 1
    with pytest.raises(InvalidRecordError, match="magic 1"):
        decode_arrow(bytes(legacy))
    bad_codec = bytearray(data)
    bad_codec[22] |= 0x07
    with pytest.raises(CompressionError, match="codec"):
        decode_arrow(bytes(bad_codec), verify_crc=False)


# --- properties --------------------------------------------------------------------------------

HEADER = st.tuples(st.text(max_size=4), st.none() | st.binary(max_size=6))
RECORD = st.fixed_dictionaries(
    {
        "key": st.none() | st.binary(max_size=12),
        "value": st.none() | st.binary(max_size=40),
        "timestamp": st.integers(0, 2**42),
        "headers": st.none() | st.lists(HEADER, max_size=3),
    }
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=st.lists(RECORD, max_size=25),
    codec=st.sampled_from(list(Codec)),
    limit=st.integers(150, 3000),
    base=st.integers(0, 2**40),
)
def test_encode_decode_identity(
    records: list[dict[str, Any]], codec: Codec, limit: int, base: int
) -> None:
    try:
        enc = encode_arrow(
            make_table(records), codec=codec, max_batch_bytes=limit, base_offset=base
        )
    except RecordTooLargeError:
        return
    expected = input_rows(records, base=base)
    assert arrow_rows(decode_arrow(bytes(enc.data))) == expected
    assert reference_read(enc.data) == expected
    assert (enc.sizes <= limit).all() and enc.record_count == len(records)


@settings(max_examples=40, deadline=None)
@given(records=st.lists(RECORD, min_size=1, max_size=15), data=st.data())
def test_offset_window(records: list[dict[str, Any]], data: st.DataObject) -> None:
    enc = encode_arrow(make_table(records), max_batch_records=4)
    lo = data.draw(st.integers(0, len(records)))
    hi = data.draw(st.integers(lo, len(records) + 2))
    got = decode_arrow(bytes(enc.data), start_offset=lo, end_offset=hi)
    assert arrow_rows(got) == input_rows(records)[lo:hi]


# --- a real Kafka corpus -----------------------------------------------------------------------


def corpus_logs() -> list[Path]:
    if not CORPUS.is_dir():
        return []
    return sorted(p for p in CORPUS.rglob("*.log") if p.stat().st_size >= 17)


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"Kafka corpus not found at {CORPUS}")
def test_corpus_segments_decode_like_kafka_python() -> None:
    decoded = legacy = 0
    for path in corpus_logs():
        data = path.read_bytes()
        if data[16] != 2:
            legacy += 1
            with pytest.raises(InvalidRecordError, match="magic"):
                decode_arrow(data, file=str(path))
            continue
        table = decode_arrow(data, file=str(path), topic=path.parent.name)
        assert arrow_rows(table) == reference_read(data), path
        decoded += 1
    assert decoded > 200 and legacy > 0
