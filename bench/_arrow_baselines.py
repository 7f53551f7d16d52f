"""Baselines for bench/arrow_codec.py: aiokafka's C record batch builder and reader fed from
and read into Arrow, and the codec libraries alone on the same record bytes."""

from __future__ import annotations

import gzip
from collections.abc import Callable
from typing import Any

import cramjam
import lz4.block
import numpy as np
import pyarrow as pa
import zstandard
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
from aiokafka.record.memory_records import MemoryRecords as AioRecords

from kafkatier.storage.arrow.schema import SPARK_KAFKA_SCHEMA
from kafkatier.storage.wire import DEFAULT_MAX_MESSAGE_BYTES, Codec

MAX_BATCH = DEFAULT_MAX_MESSAGE_BYTES
HEADERS_TYPE = SPARK_KAFKA_SCHEMA.field("headers").type


# --- aiokafka, fed from Arrow ---------------------------------------------------------------------


def to_python(table: pa.Table) -> tuple[list[Any], list[Any], list[int]]:
    """What feeding aiokafka costs first: Arrow columns -> Python bytes and ints."""
    ts = table.column("timestamp").cast(pa.int64()).to_pylist()
    return table.column("key").to_pylist(), table.column("value").to_pylist(), ts


def aiokafka_encode(keys: list[Any], values: list[Any], ts: list[int]) -> bytes:
    out: list[bytes | bytearray] = []
    builder = AioBuilder(2, 0, 0, -1, -1, -1, MAX_BATCH)
    first = 0
    for i in range(len(values)):
        if builder.append(i - first, ts[i], keys[i], values[i], []) is None:
            out.append(builder.build())
            builder = AioBuilder(2, 0, 0, -1, -1, -1, MAX_BATCH)
            first = i
            builder.append(0, ts[i], keys[i], values[i], [])
    out.append(builder.build())
    return b"".join(out)


def aiokafka_iterate(data: bytes) -> int:
    records = AioRecords(data)
    n = 0
    while (batch := records.next_batch()) is not None:
        for _ in batch:
            n += 1
    return n


def aiokafka_to_arrow(data: bytes, topic: str = "", partition: int = 0) -> pa.Table:
    """aiokafka's reader, collecting the same columns decode_arrow returns."""
    offsets, ts, ts_types, keys, values, headers = [], [], [], [], [], []
    records = AioRecords(data)
    while (batch := records.next_batch()) is not None:
        if batch.is_control_batch:
            continue
        for r in batch:
            offsets.append(r.offset)
            ts.append(r.timestamp)
            ts_types.append(r.timestamp_type)
            keys.append(r.key)
            values.append(r.value)
            headers.append([{"key": k, "value": v} for k, v in r.headers] or None)
    n = len(offsets)
    micros = np.asarray(ts, np.int64) * 1000
    return pa.Table.from_arrays(
        [
            pa.array(keys, pa.binary()),
            pa.array(values, pa.binary()),
            pa.repeat(pa.scalar(topic), n),
            pa.repeat(pa.scalar(partition, pa.int32()), n),
            pa.array(offsets, pa.int64()),
            pa.array(micros, SPARK_KAFKA_SCHEMA.field("timestamp").type),
            pa.array(ts_types, pa.int32()),
            pa.array(headers, HEADERS_TYPE),
        ],
        schema=SPARK_KAFKA_SCHEMA,
    )


def same_batches(ours: bytes | bytearray, theirs: bytes) -> bool:
    """Equal apart from baseOffset (aiokafka leaves 0 for the broker; we number consecutively)."""
    if len(ours) != len(theirs):
        return False
    a, b = np.frombuffer(ours, np.uint8).copy(), np.frombuffer(theirs, np.uint8).copy()
    pos = 0
    while pos < len(a):
        a[pos : pos + 8] = 0
        b[pos : pos + 8] = 0
        pos += 12 + int.from_bytes(bytes(a[pos + 8 : pos + 12]), "big", signed=True)
    return bool((a == b).all())


# --- bare codecs ----------------------------------------------------------------------------------

BARE: dict[Codec, tuple[Callable[[Any], bytes], Callable[[bytes], Any]]] = {
    Codec.GZIP: (lambda d: gzip.compress(d, 6, mtime=0), gzip.decompress),
    Codec.SNAPPY: (lambda d: bytes(cramjam.snappy.compress_raw(d)), cramjam.snappy.decompress_raw),
    Codec.LZ4: (
        lambda d: lz4.block.compress(d, store_size=False),
        lambda d: lz4.block.decompress(d, uncompressed_size=MAX_BATCH),
    ),
    Codec.ZSTD: (
        lambda d: zstandard.ZstdCompressor(level=3).compress(d),
        lambda d: zstandard.ZstdDecompressor().decompress(d),
    ),
}


def record_regions(enc: Any) -> list[memoryview]:
    """Each batch's record bytes: what a codec compresses in a v2 batch."""
    view = memoryview(enc.data)
    return [
        view[p + 61 : p + s]
        for p, s in zip(enc.positions.tolist(), enc.sizes.tolist(), strict=True)
    ]
