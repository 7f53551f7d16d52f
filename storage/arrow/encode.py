"""Arrow -> record batches v2: planning, headers, CRCs and compression around the kernels.

See :func:`kafkatier.storage.arrow.codec.encode_arrow`; the per-record work is in
``encode_kernels`` (numba) or their C build (``kafkatier.storage.native`` picks), the loops here
run once per batch.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from kafkatier.storage import native
from kafkatier.storage.arrow.batch_header import BATCH_HEADER_DTYPE
from kafkatier.storage.arrow.buffers import output_buffer
from kafkatier.storage.arrow.columns import Columns, extract
from kafkatier.storage.errors import (
    ConfigError,
    InvalidRecordError,
    RecordTooLargeError,
    StorageError,
)
from kafkatier.storage.record.crc import crc32c
from kafkatier.storage.wire import (
    BATCH_HEADER_SIZE,
    CRC_OFFSET,
    CRC_START,
    INT32_MAX,
    LOG_OVERHEAD,
    PLE_OFFSET,
    Codec,
    attributes,
    increment_sequence,
)


@dataclass(frozen=True, eq=False)
class EncodedBatches:
    """Record batches v2 back to back in ``data``, exactly as a ``.log`` segment holds them.

    Batch ``i`` occupies ``data[positions[i] : positions[i] + sizes[i]]``; its offsets are
    ``base_offsets[i] .. base_offsets[i] + last_offset_deltas[i]`` with no gaps. The per-batch
    arrays carry what a segment needs without re-reading the bytes: the offset index maps
    ``last_offsets`` to ``positions``, the time index pairs ``max_timestamps`` with
    ``offsets_of_max_timestamp`` (Kafka's shallow offset: the batch's last offset), and producer
    state uses the producer fields and ``base_sequences``.
    """

    data: bytearray
    positions: NDArray[np.int64]
    sizes: NDArray[np.int64]
    base_offsets: NDArray[np.int64]
    last_offset_deltas: NDArray[np.int64]
    record_counts: NDArray[np.int64]
    max_timestamps: NDArray[np.int64]
    base_sequences: NDArray[np.int64]
    producer_id: int
    producer_epoch: int
    is_transactional: bool
    partition_leader_epoch: int
    codec: Codec

    def __len__(self) -> int:
        return len(self.positions)

    @property
    def last_offsets(self) -> NDArray[np.int64]:
        return self.base_offsets + self.last_offset_deltas

    @property
    def offsets_of_max_timestamp(self) -> NDArray[np.int64]:
        return self.last_offsets

    @property
    def record_count(self) -> int:
        return int(self.record_counts.sum())

    def rebase(self, base_offset: int, partition_leader_epoch: int) -> EncodedBatches:
        """Give the batches consecutive offsets from ``base_offset`` and the leader epoch.

        Both fields lie outside the CRC (§1.2), so this rewrites ``data`` in place, as a broker
        does on append: encoding can happen anywhere and only the partition's single writer
        assigns offsets. Returns the same bytes with updated arrays.
        """
        spans = self.last_offset_deltas + 1
        bases = np.int64(base_offset) + np.cumsum(spans) - spans
        buf = np.frombuffer(self.data, np.uint8)
        kernels = _kernels()
        kernels.scatter_rows(buf, self.positions, bases.astype(">i8").view(np.uint8).reshape(-1, 8))
        epochs = np.full(len(self), partition_leader_epoch, ">i4").view(np.uint8).reshape(-1, 4)
        kernels.scatter_rows(buf, self.positions + PLE_OFFSET, epochs)
        return dataclasses.replace(
            self, base_offsets=bases, partition_leader_epoch=partition_leader_epoch
        )


def _kernels() -> ModuleType:
    """The C kernels where they are built, else numba's (kafkatier.storage.native)."""
    return native.pick("kafkatier.storage.arrow.encode_kernels")


def _check_producer(
    producer_id: int, producer_epoch: int, base_sequence: int, transactional: bool
) -> None:
    """MemoryRecordsBuilder.validateProducerState's rules (kafka-format.md §1.6)."""
    if transactional and producer_id < 0:
        raise InvalidRecordError(
            "a transactional batch needs a producer id", producer_id=producer_id
        )
    if producer_id >= 0 and (producer_epoch < 0 or base_sequence < 0):
        raise InvalidRecordError(
            "a producer id needs a producer epoch and base sequence >= 0",
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
        )


def _plan(
    kernels: ModuleType, cols: Columns, limit: int, max_records: int
) -> tuple[NDArray[np.int64], ...]:
    payload = kernels.payload_sizes(cols.key, cols.value, cols.headers)
    starts, body, sizes, max_ts, too_large = kernels.plan_batches(
        payload, cols.timestamps, limit, max_records, BATCH_HEADER_SIZE
    )
    if too_large >= 0:
        need = BATCH_HEADER_SIZE + 3 + int(payload[too_large]) + 2
        raise RecordTooLargeError(
            f"record needs about {need} bytes, more than a batch may take ({limit}, set by the "
            "topic's max.message.bytes and segment.bytes); fix: raise them or shrink the record",
            row=too_large,
        )
    return starts, body, sizes, max_ts


def _write_headers(
    kernels: ModuleType, buf: NDArray[np.uint8], positions: NDArray[np.int64],
    fields: dict[str, Any],
) -> NDArray[Any]:  # fmt: skip
    rows = np.zeros(len(positions), BATCH_HEADER_DTYPE)
    for name, value in fields.items():
        rows[name] = value
    kernels.scatter_rows(buf, positions, rows.view(np.uint8).reshape(-1, BATCH_HEADER_SIZE))
    return rows


def _write_crcs(
    kernels: ModuleType, data: bytearray, positions: NDArray[np.int64], sizes: NDArray[np.int64]
) -> None:
    view = memoryview(data)
    crcs = np.fromiter(
        (
            crc32c(view[p + CRC_START : p + s])
            for p, s in zip(positions.tolist(), sizes.tolist(), strict=True)
        ),
        ">u4",
        len(positions),
    )
    kernels.scatter_rows(
        np.frombuffer(data, np.uint8), positions + CRC_OFFSET, crcs.view(np.uint8).reshape(-1, 4)
    )


def _compress(
    kernels: ModuleType,
    data: bytearray,
    positions: NDArray[np.int64],
    sizes: NDArray[np.int64],
    codec: Codec,
    level: int | None,
    max_batch_bytes: int,
) -> tuple[bytearray, NDArray[np.int64], NDArray[np.int64]]:
    """Replace each batch's records by one compressed stream (§1.7); fix batchLength."""
    from kafkatier.storage.record.compression import compress

    view = memoryview(data)
    parts = [
        compress(codec, view[p + BATCH_HEADER_SIZE : p + s], level=level)
        for p, s in zip(positions.tolist(), sizes.tolist(), strict=True)
    ]
    new_sizes = np.fromiter((len(c) for c in parts), np.int64, len(parts)) + BATCH_HEADER_SIZE
    too_big = np.flatnonzero(new_sizes > max_batch_bytes)
    if len(too_big):
        raise RecordTooLargeError(
            f"compressed batch of {int(new_sizes[too_big[0]])} bytes exceeds {max_batch_bytes}",
            batch=int(too_big[0]),
        )
    new_pos = np.cumsum(new_sizes) - new_sizes
    rows = kernels.gather_rows(_readonly(data), positions, BATCH_HEADER_SIZE)
    rows.view(BATCH_HEADER_DTYPE)["batch_length"][:, 0] = new_sizes - LOG_OVERHEAD
    out = output_buffer(int(new_sizes.sum()))
    kernels.scatter_rows(np.frombuffer(out, np.uint8), new_pos, rows)
    for p, part in zip(new_pos.tolist(), parts, strict=True):
        out[p + BATCH_HEADER_SIZE : p + BATCH_HEADER_SIZE + len(part)] = part
    return out, new_pos, new_sizes


def batch_byte_limit(codec: Codec, max_batch_bytes: int) -> int:
    """Header + uncompressed records one batch may take under ``max_batch_bytes``
    (``max.message.bytes``; batchLength is an int32), leaving room for a codec's framing. The
    sink's JVM encoder gets this figure in its plan rather than deriving it again."""
    limit = min(max_batch_bytes, INT32_MAX + LOG_OVERHEAD)
    return limit - _codec_slack(limit) if codec != Codec.NONE else limit


def _limits(codec: Codec, max_batch_bytes: int, max_batch_records: int | None) -> tuple[int, int]:
    """Uncompressed bytes and records a batch may take (batchLength and counts are int32)."""
    limit = batch_byte_limit(codec, max_batch_bytes)
    max_records = INT32_MAX if max_batch_records is None else max_batch_records
    if max_records < 1:
        raise ConfigError("max_batch_records must be >= 1", setting="max_batch_records")
    return limit, max_records


def _sequences(base_sequence: int, firsts: NDArray[np.int64]) -> NDArray[np.int64]:
    """Each batch's base sequence: the records before it counted on, wrapping as Kafka does."""
    if base_sequence < 0:
        return np.full(len(firsts), -1, np.int64)
    return np.asarray([increment_sequence(base_sequence, s) for s in firsts.tolist()], np.int64)


def _readonly(data: bytearray) -> NDArray[np.uint8]:
    """A read-only view, so gather_rows has the one numba specialisation the decoder uses."""
    return np.frombuffer(memoryview(data).toreadonly(), np.uint8)


def _codec_slack(limit: int) -> int:
    """Room left for a codec's framing on incompressible data (a few bytes per block)."""
    return 64 + limit // 512


def encode(
    data: pa.Table | pa.RecordBatch,
    *,
    base_offset: int,
    codec: Codec | str | int,
    level: int | None,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    transactional: bool,
    partition_leader_epoch: int,
    timestamp: int | None,
    max_batch_bytes: int,
    max_batch_records: int | None,
) -> EncodedBatches:
    """See :func:`kafkatier.storage.arrow.codec.encode_arrow`."""
    codec = Codec.parse(codec)
    _check_producer(producer_id, producer_epoch, base_sequence, transactional)
    cols = extract(data, int(time.time() * 1000) if timestamp is None else timestamp)
    kernels = _kernels()  # once: each pick reads the setting (about a microsecond)
    limits = _limits(codec, max_batch_bytes, max_batch_records)
    starts, body, sizes, max_ts = _plan(kernels, cols, *limits)
    firsts, counts = starts[:-1], np.diff(starts)
    sequences = _sequences(base_sequence, firsts)
    positions = np.cumsum(sizes) - sizes
    out = output_buffer(int(sizes.sum()))
    fields = {
        "base_offset": base_offset + firsts, "batch_length": sizes - LOG_OVERHEAD,
        "partition_leader_epoch": partition_leader_epoch, "magic": 2,
        "attributes": attributes(codec, transactional=transactional),
        "last_offset_delta": counts - 1, "base_timestamp": cols.timestamps[firsts],
        "max_timestamp": max_ts, "producer_id": producer_id, "producer_epoch": producer_epoch,
        "base_sequence": sequences, "records_count": counts,
    }  # fmt: skip
    buf = np.frombuffer(out, np.uint8)
    _write_headers(kernels, buf, positions, fields)
    args = (starts, body, cols.timestamps, cols.key, cols.value, cols.headers, sizes)
    if kernels.write_records(buf, positions, *args, BATCH_HEADER_SIZE):
        raise StorageError("internal error: encoded batch sizes differ from the plan")
    del buf  # release the export so ``out`` stays resizable
    if codec != Codec.NONE:
        out, positions, sizes = _compress(
            kernels, out, positions, sizes, codec, level, max_batch_bytes
        )
    _write_crcs(kernels, out, positions, sizes)
    return EncodedBatches(
        data=out, positions=positions, sizes=sizes, base_offsets=base_offset + firsts,
        last_offset_deltas=counts - 1, record_counts=counts, max_timestamps=max_ts,
        base_sequences=sequences, producer_id=producer_id, producer_epoch=producer_epoch,
        is_transactional=transactional, partition_leader_epoch=partition_leader_epoch,
        codec=codec,
    )  # fmt: skip
