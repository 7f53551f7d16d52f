"""Arrow in and out of a partition log: the bulk paths the CLI and the Spark sink/reader use.

Appends encode a table with the fast encoder (``codec.encode_arrow``) into batches no larger
than the topic's ``max.message.bytes`` and hand the bytes to :meth:`Log.append`, which assigns
offsets. Reads decode whole regions of segments with ``decode_arrow`` into Spark's Kafka source
schema, chunk by chunk so memory stays bounded, dropping aborted transactions in
``read_committed``. Segments holding legacy (magic 0/1) message sets take the per-record path.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from kafkatier.storage.arrow.codec import decode_arrow, encode_arrow
from kafkatier.storage.arrow.record_rules import RecordRules
from kafkatier.storage.arrow.schema import SPARK_KAFKA_SCHEMA
from kafkatier.storage.log.append import LogAppendInfo
from kafkatier.storage.log.log import Log
from kafkatier.storage.log.reader import (
    IsolationLevel,
    batch_filter,
    segment_starts,
    visible_range,
)
from kafkatier.storage.log.segment import LogSegment
from kafkatier.storage.record.record import Record
from kafkatier.storage.wire import Codec

CHUNK_BYTES = 64 * 1024 * 1024


def append_arrow(
    log: Log,
    data: pa.Table | pa.RecordBatch,
    *,
    codec: Codec | str | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    timestamp: int | None = None,
) -> LogAppendInfo:
    """Append the rows of ``data`` (columns ``value``, optional ``key``, ``headers``,
    ``timestamp``). ``codec`` defaults to the topic's ``compression.type`` (none for
    ``producer``)."""
    encoded = encode_for(log, data, codec=codec, producer_id=producer_id,
                         producer_epoch=producer_epoch, base_sequence=base_sequence,
                         transactional=transactional, timestamp=timestamp)  # fmt: skip
    return log.append(encoded, owned=True)


def encode_for(
    log: Log, data: pa.Table | pa.RecordBatch, *, codec: Codec | str | None = None, **fields: Any
) -> bytearray:
    """:func:`append_arrow`'s batches, encoded for ``log`` (its codec, level and
    ``max.message.bytes``; ``fields``: ``encode_arrow``'s producer and timestamp keywords) but
    not appended: for a writer that encodes the next rows while another thread appends these
    (``log.append(encoded, owned=True)``). Reads only the log's config; its record rules
    (``record_rules``: keys in a compacted topic, the timestamp window) are checked first."""
    RecordRules.of(log.config, int(time.time() * 1000)).check(data, log.topic)
    chosen = Codec.parse(codec) if codec is not None else (log.config.codec or Codec.NONE)
    encoded = encode_arrow(
        data,
        codec=chosen,
        level=log.config.compression_level(chosen),
        max_batch_bytes=log.config.max_batch_bytes,
        **fields,
    )
    batches: bytearray = encoded.data  # typed: mypy sees the numba module's class as Any
    return batches


def iter_arrow(
    log: Log,
    start_offset: int | None = None,
    end_offset: int | None = None,
    isolation: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
    *,
    chunk_bytes: int = CHUNK_BYTES,
) -> Iterator[pa.Table]:
    """Tables of the visible data records in [start, end), about ``chunk_bytes`` of log each."""
    start, stop = visible_range(log, start_offset, end_offset, isolation)
    keep = batch_filter(log, start, stop, isolation)
    for segment, found in segment_starts(log, start, stop):
        if found.magic < 2:
            yield _legacy_table(log, segment, found.position, start, stop, keep)
            continue
        for position, size in _chunks(segment, found.position, stop, chunk_bytes):
            yield decode_arrow(
                segment.read_bytes(position, size),
                topic=log.topic,
                partition=log.partition,
                file=str(segment.log_path),
                start_offset=start,
                end_offset=stop,
                batch_filter=keep,
                base_position=position,
            )


def read_arrow(
    log: Log,
    start_offset: int | None = None,
    end_offset: int | None = None,
    isolation: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
) -> pa.Table:
    """All visible data records in [start, end) as one table in Spark's Kafka source schema."""
    tables = list(iter_arrow(log, start_offset, end_offset, isolation))
    if not tables:
        return SPARK_KAFKA_SCHEMA.empty_table()
    return pa.concat_tables(tables)


def _chunks(
    segment: LogSegment, position: int, stop: int, chunk_bytes: int
) -> Iterator[tuple[int, int]]:
    """Byte ranges of whole batches from ``position``, ending before offset ``stop``."""
    begin = end = position
    for header in segment.scan_headers(position):
        if header.base_offset >= stop:
            break
        if end > begin and end + header.size - begin > chunk_bytes:
            yield begin, end - begin
            begin = end
        end = header.position + header.size
    if end > begin:
        yield begin, end - begin


def _legacy_table(
    log: Log, segment: LogSegment, position: int, start: int, stop: int, keep: Any
) -> pa.Table:
    rows: list[dict[str, Any]] = []
    for batch in segment.batches(position):
        if batch.base_offset >= stop:
            break
        if not keep(batch):
            continue
        rows.extend(
            _row(log, r, int(batch.timestamp_type))
            for r in batch.records()
            if start <= r.offset < stop
        )
    return pa.Table.from_pylist(rows, schema=SPARK_KAFKA_SCHEMA)


def _row(log: Log, record: Record, timestamp_type: int) -> dict[str, Any]:
    return {
        "key": record.key,
        "value": record.value,
        "topic": log.topic,
        "partition": log.partition,
        "offset": record.offset,
        "timestamp": record.timestamp if record.timestamp >= 0 else None,
        "timestampType": timestamp_type,
        "headers": [{"key": k, "value": v} for k, v in record.headers],
    }
