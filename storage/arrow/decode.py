"""Record batches v2 -> an Arrow table shaped like Spark's Kafka source (kafka-format.md §1, §2).

Per batch (a Python loop per batch, never per record): CRC check, control/filter/offset-range
selection and decompression. Per record: one numba pass (decode_kernels.parse_batches).
Batches are decoded in groups of at most ``GROUP_BYTES`` record bytes, so int32 Arrow offsets
always suffice and the preallocated outputs stay small. The stages (``scan``, ``select``,
``groups``, ``decode_group``) are shared with ``pieces.py``, which decodes many partitions' runs
of batches at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from kafkatier.storage.arrow import decode_kernels as D
from kafkatier.storage.arrow.batch_header import BATCH_HEADER_DTYPE
from kafkatier.storage.arrow.encode_kernels import gather_rows
from kafkatier.storage.arrow.schema import SPARK_KAFKA_SCHEMA
from kafkatier.storage.arrow.table import build_table, parse
from kafkatier.storage.errors import (
    CompressionError,
    CorruptRecordError,
    InvalidRecordError,
    KafkaTierError,
)
from kafkatier.storage.record.crc import crc32c
from kafkatier.storage.wire import (
    ATTR_CODEC_MASK,
    ATTR_CONTROL,
    ATTR_LOG_APPEND_TIME,
    ATTR_TRANSACTIONAL,
    BATCH_HEADER_SIZE,
    CRC_START,
    LOG_OVERHEAD,
    Codec,
    ControlType,
)

GROUP_BYTES: Final = 256 << 20
_MIN_RECORD_BYTES: Final = 7  # length, attributes, ts delta, offset delta, key, value, count
_MAX_CODEC: Final = max(Codec)
INT64_MAX: Final = 2**63 - 1


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The fields of one batch header that a reader filters on; ``position`` is where the batch
    starts (``base_position`` + its place in the decoded buffer). Control batches reach the
    filter too (read_committed must see ABORT markers go by) with their marker in ``control``."""

    position: int
    base_offset: int
    last_offset: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    is_transactional: bool
    is_control: bool
    records_count: int
    max_timestamp: int
    control: tuple[ControlType, int] | None = None

    def control_record(self) -> tuple[ControlType, int]:
        """(type, coordinatorEpoch) of a control batch, as ``records.RecordBatch`` gives it."""
        if self.control is None:
            raise InvalidRecordError("not a control batch", position=self.position)
        return self.control


@dataclass(frozen=True)
class Source:
    """The buffer being decoded and what error messages say about it."""

    view: memoryview
    array: NDArray[np.uint8]
    file: str | None
    base_position: int

    def where(self, position: int) -> dict[str, Any]:
        return {"file": self.file, "position": self.base_position + int(position)}


def scan(src: Source) -> tuple[NDArray[np.int64], NDArray[Any]]:
    """The batches framed in ``src``: their positions and headers."""
    positions = frame(src)
    return positions, headers_at(src.array, positions)


def headers_at(array: NDArray[np.uint8], positions: NDArray[np.int64]) -> NDArray[Any]:
    """The batch headers at ``positions`` of ``array`` as BATCH_HEADER_DTYPE records."""
    headers: NDArray[Any] = gather_rows(array, positions, BATCH_HEADER_SIZE)
    return headers.view(BATCH_HEADER_DTYPE).reshape(len(positions))


def frame(src: Source) -> NDArray[np.int64]:
    """Where each whole batch of ``src`` starts (a partial one at the end is left out)."""
    positions: NDArray[np.int64]
    positions, err, at = D.scan_batches(src.array)
    if err == D.SCAN_MAGIC:
        magic = int(src.array[at + 16])
        raise InvalidRecordError(
            f"record batch with magic {magic}: the Arrow reader handles magic 2 only; "
            "read legacy message sets (magic 0/1) with kafkatier.storage.record.records",
            magic=magic,
            **src.where(at),
        )
    if err:
        raise CorruptRecordError(
            "record batch size is smaller than a batch header", **src.where(at)
        )
    return positions


def _control(src: Source, position: int) -> tuple[ControlType, int]:
    """A control batch's marker, through the general reader (one per transaction: rare)."""
    from kafkatier.storage.record.batch import RecordBatch

    try:
        kind, epoch = RecordBatch(src.view, position, file=src.file).control_record()
        return ControlType(kind), int(epoch)
    except KafkaTierError as exc:
        raise type(exc)(exc.message, **src.where(position)) from exc


def _header(src: Source, hdr: NDArray[Any], position: int) -> BatchHeader:
    attrs = int(hdr["attributes"])
    control = _control(src, position) if attrs & ATTR_CONTROL else None
    return BatchHeader(
        position=src.base_position + position,
        base_offset=int(hdr["base_offset"]),
        last_offset=int(hdr["base_offset"]) + int(hdr["last_offset_delta"]),
        producer_id=int(hdr["producer_id"]),
        producer_epoch=int(hdr["producer_epoch"]),
        base_sequence=int(hdr["base_sequence"]),
        is_transactional=bool(attrs & ATTR_TRANSACTIONAL),
        is_control=bool(attrs & ATTR_CONTROL),
        records_count=int(hdr["records_count"]),
        max_timestamp=int(hdr["max_timestamp"]),
        control=control,
    )


def select(
    src: Source,
    positions: NDArray[np.int64],
    hdr: NDArray[Any],
    bounds: tuple[int, int] | tuple[NDArray[np.int64], NDArray[np.int64]],
    batch_filter: Callable[[Any], bool] | None,
    verify_crc: bool,
) -> NDArray[np.intp]:
    """Indices of the batches to decode: in range, CRC-checked, wanted, data (not control).

    The filter sees every batch in range in offset order, control batches included. ``bounds``
    is one offset range for all batches, or one per batch (two arrays)."""
    base = hdr["base_offset"].astype(np.int64)
    last = base + hdr["last_offset_delta"]
    idx = np.flatnonzero((last >= bounds[0]) & (base < bounds[1]))
    sizes = hdr["batch_length"].astype(np.int64) + LOG_OVERHEAD
    if verify_crc:
        for i in idx:
            p = int(positions[i])
            if crc32c(src.view[p + CRC_START : p + int(sizes[i])]) != int(hdr["crc"][i]):
                raise CorruptRecordError("record batch CRC-32C mismatch", **src.where(p))
    attrs = hdr["attributes"][idx]
    bad = np.flatnonzero((attrs & ATTR_CODEC_MASK) > _MAX_CODEC)
    if len(bad):
        raise CompressionError(
            f"unknown compression codec id {int(attrs[bad[0]]) & ATTR_CODEC_MASK}",
            **src.where(positions[idx[bad[0]]]),
        )
    data = (attrs & ATTR_CONTROL) == 0
    if batch_filter is not None:
        keep = [bool(batch_filter(_header(src, hdr[i], int(positions[i])))) for i in idx]
        data &= np.asarray(keep, dtype=bool)
    return np.asarray(idx[data], np.intp)


@dataclass(frozen=True)
class Group:
    """Some batches to parse: batch ``b``'s records are ``spans[b]`` of its chunk's payload.

    ``chunks`` pairs payloads with the batches they hold: the whole buffer for uncompressed
    batches (parsed in place), one decompressed payload per compressed batch (no joining).
    """

    chunks: list[tuple[NDArray[np.uint8], slice]]
    spans: NDArray[np.int64]
    meta: NDArray[np.int64]  # count, base offset, base ts, max ts, timestamp type
    positions: NDArray[np.int64]


def _records_bytes(src: Source, hdr: NDArray[Any], position: int) -> bytes | memoryview:
    end = position + int(hdr["batch_length"]) + LOG_OVERHEAD
    body = src.view[position + BATCH_HEADER_SIZE : end]
    codec = int(hdr["attributes"]) & ATTR_CODEC_MASK
    if codec == Codec.NONE:
        return body
    from kafkatier.storage.record.compression import decompress

    try:
        return bytes(decompress(Codec(codec), body))
    except CompressionError as exc:
        raise CompressionError(exc.message, **src.where(position)) from exc


def _meta(hdr: NDArray[Any]) -> NDArray[np.int64]:
    meta = np.empty((len(hdr), 5), np.int64)
    meta[:, 0] = hdr["records_count"]
    meta[:, 1] = hdr["base_offset"]
    meta[:, 2] = hdr["base_timestamp"]
    meta[:, 3] = hdr["max_timestamp"]
    meta[:, 4] = (hdr["attributes"] & ATTR_LOG_APPEND_TIME) != 0
    return meta


def _check_counts(src: Source, group: Group) -> None:
    room = (group.spans[:, 1] - group.spans[:, 0]) // _MIN_RECORD_BYTES
    bad = np.flatnonzero((group.meta[:, 0] < 0) | (group.meta[:, 0] > room))
    if len(bad):
        raise InvalidRecordError(
            f"invalid record count {int(group.meta[bad[0], 0])} for the batch's size",
            **src.where(group.positions[bad[0]]),
        )


def groups(
    src: Source, positions: NDArray[np.int64], hdr: NDArray[Any], idx: NDArray[np.intp]
) -> Iterator[Group]:
    """Yield the selected batches in groups of about GROUP_BYTES record bytes.

    Uncompressed batches are parsed in place; compressed ones are decompressed one by one.
    """
    if not (hdr["attributes"][idx] & ATTR_CODEC_MASK).any():
        sizes = hdr["batch_length"][idx].astype(np.int64) + LOG_OVERHEAD
        group_ids = (np.cumsum(sizes) - sizes) // GROUP_BYTES
        splits = np.split(idx, np.flatnonzero(np.diff(group_ids)) + 1) if len(idx) else []
        for sub in splits:
            pos = positions[sub]
            ends = pos + hdr["batch_length"][sub] + LOG_OVERHEAD
            spans = np.stack([pos + BATCH_HEADER_SIZE, ends], axis=1)
            yield Group([(src.array, slice(0, len(sub)))], spans, _meta(hdr[sub]), pos)
        return
    parts: list[NDArray[np.uint8]] = []
    chosen: list[int] = []
    total = 0
    for i in idx:
        parts.append(np.frombuffer(_records_bytes(src, hdr[i], int(positions[i])), np.uint8))
        chosen.append(int(i))
        total += len(parts[-1])
        if total >= GROUP_BYTES:
            yield _per_batch(parts, hdr[chosen], positions[chosen])
            parts, chosen, total = [], [], 0
    if parts:
        yield _per_batch(parts, hdr[chosen], positions[chosen])


def _per_batch(parts: list[NDArray[np.uint8]], hdr: NDArray[Any], pos: NDArray[np.int64]) -> Group:
    spans = np.zeros((len(parts), 2), np.int64)
    spans[:, 1] = [len(p) for p in parts]
    chunks = [(p, slice(b, b + 1)) for b, p in enumerate(parts)]
    return Group(chunks, spans, _meta(hdr), pos)


def decode_group(
    src: Source, group: Group, bounds: tuple[int, int], topic: str, partition: int
) -> pa.Table:
    _check_counts(src, group)
    (err, batch, record), outputs, cursors = parse(group.chunks, group.spans, group.meta, bounds)
    if err:
        raise InvalidRecordError(D.ERRORS[err], record=record, **src.where(group.positions[batch]))
    return build_table(outputs, cursors, topic, partition)


def decode(
    buf: bytes | bytearray | memoryview,
    *,
    topic: str,
    partition: int,
    file: str | None,
    start_offset: int,
    end_offset: int | None,
    batch_filter: Callable[[Any], bool] | None,
    verify_crc: bool,
    base_position: int,
) -> pa.Table:
    """See :func:`kafkatier.storage.arrow.codec.decode_arrow`."""
    view = memoryview(buf).cast("B").toreadonly()  # one numba specialisation for any input
    src = Source(view, np.frombuffer(view, np.uint8), file, base_position)
    positions, hdr = scan(src)
    bounds = (int(start_offset), INT64_MAX if end_offset is None else int(end_offset))
    idx = select(src, positions, hdr, bounds, batch_filter, verify_crc)
    found = groups(src, positions, hdr, idx)
    tables = [decode_group(src, g, bounds, topic, partition) for g in found]
    if not tables:
        return SPARK_KAFKA_SCHEMA.empty_table()
    return tables[0] if len(tables) == 1 else pa.concat_tables(tables)
