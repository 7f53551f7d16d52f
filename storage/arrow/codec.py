"""The Arrow fast path: Kafka record batches v2 from and to Arrow tables (kafka-format.md §1, §2).

No Python code runs per record: numba kernels (``encode_kernels``, ``decode_kernels``; the
encoder's have a C build, ``kafkatier.storage.native``) walk numpy views of the Arrow buffers;
Python loops only over batches (CRC-32C, compression).
Around them: ``columns`` (input validation), ``encode`` (batching, headers, CRCs,
compression), ``decode`` (framing, selection, decompression) and ``table``
(kernel outputs -> Arrow). The slow, general reader/writer (legacy formats included) is
``kafkatier.storage.record.records``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from kafkatier.storage.arrow.encode import EncodedBatches, encode
from kafkatier.storage.wire import DEFAULT_MAX_MESSAGE_BYTES, Codec

__all__ = ["decode_arrow", "encode_arrow"]


def encode_arrow(
    data: pa.Table | pa.RecordBatch,
    *,
    base_offset: int = 0,
    codec: Codec | str | int = Codec.NONE,
    level: int | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    partition_leader_epoch: int = -1,
    timestamp: int | None = None,
    max_batch_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    max_batch_records: int | None = None,
) -> EncodedBatches:
    """Encode the rows of ``data`` as consecutive record batches v2 (CreateTime).

    Columns: ``value`` (bytes or string; null = tombstone), optional ``key`` (null = no key),
    ``headers`` (list<struct<key string, value binary>>; null list = no headers) and
    ``timestamp`` (Arrow timestamp or int64 ms; null or absent = ``timestamp``, else the wall
    clock). Other columns are ignored, so a table in SPARK_KAFKA_SCHEMA encodes as is.
    A batch, uncompressed, never exceeds ``max_batch_bytes`` (compressed: also after
    compression) nor ``max_batch_records``; a record too large alone raises RecordTooLargeError.
    With ``base_sequence`` >= 0, each batch's base sequence counts the records before it.
    A column of the wrong type raises ArrowSchemaError (a TypeError too) naming the column and
    the accepted types; a timestamp below -1 or a null header key raises InvalidRecordError
    naming the row.
    """
    return encode(
        data,
        base_offset=base_offset,
        codec=codec,
        level=level,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        transactional=transactional,
        partition_leader_epoch=partition_leader_epoch,
        timestamp=timestamp,
        max_batch_bytes=max_batch_bytes,
        max_batch_records=max_batch_records,
    )


def decode_arrow(
    buf: bytes | bytearray | memoryview,
    *,
    topic: str = "",
    partition: int = 0,
    file: str | None = None,
    start_offset: int = 0,
    end_offset: int | None = None,
    batch_filter: Callable[[Any], bool] | None = None,
    verify_crc: bool = True,
    base_position: int = 0,
) -> pa.Table:
    """Decode the v2 batches back to back in ``buf`` into a table in SPARK_KAFKA_SCHEMA.

    Stops quietly at a partial batch at the end (a segment being written). Skips control
    batches, batches for which ``batch_filter(BatchHeader)`` is false (read_committed drops
    aborted transactions this way; the filter sees every batch in range in offset order,
    control batches included, with ``control_record()``) and records outside
    ``[start_offset, end_offset)``.
    Compressed, LogAppendTime and compacted (offset gaps) batches are handled. Bad CRCs raise
    CorruptRecordError and malformed records InvalidRecordError, naming ``file`` and the
    position (``base_position`` + the batch's place in ``buf``); legacy magic 0/1 batches raise
    InvalidRecordError (kafkatier.storage.record.records reads them).
    """
    from kafkatier.storage.arrow.decode import decode  # numba's kernels: not for a writer

    return decode(
        buf,
        topic=topic,
        partition=partition,
        file=file,
        start_offset=start_offset,
        end_offset=end_offset,
        batch_filter=batch_filter,
        verify_crc=verify_crc,
        base_position=base_position,
    )
