"""The cleaner's per-record decisions for v2 data batches in numba
(``storage.cleaner.kernels.records``,
``storage.cleaner.kernels.batches``): one scan and one kernel call per batch.

Same rules as the record-at-a-time path in ``filter`` (which stays for control batches
and for bytes the scan rejects, where it raises the precise error): a record past the map's
latest offset is kept; a keyless one dropped; a keyed one kept when it is the latest for its key
and is not a tombstone whose batch's delete horizon has passed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kafkatier.storage.cleaner.kernels.batches import map_batch, select_batch
from kafkatier.storage.cleaner.kernels.offset_map import OffsetMap
from kafkatier.storage.cleaner.kernels.records import (
    TS_DELTA,
    rebuild_records,
    scan_records,
)
from kafkatier.storage.errors import KafkaTierError
from kafkatier.storage.record.batch import RecordBatch, located
from kafkatier.storage.record.builder import _assemble
from kafkatier.storage.record.compression import compress, decompress
from kafkatier.storage.wire import BATCH_HEADER_SIZE, Codec, TimestampType, attributes

ENABLED = True
"""Whole chunks of plain batches in one numba call (``chunk``); tests turn it off to
compare with the per-batch calls here and with the record-at-a-time path."""


@dataclass(frozen=True, slots=True)
class ScannedBatch:
    """A batch's record bytes (decompressed) and where each record's fields sit."""

    batch: RecordBatch
    payload: npt.NDArray[np.uint8]
    rows: npt.NDArray[np.int64]


def scan(batch: RecordBatch) -> ScannedBatch | None:
    """None when the record bytes do not parse (the slow reader reports why)."""
    payload: bytes | memoryview = batch.buffer[BATCH_HEADER_SIZE:]
    codec = batch.codec
    if codec != Codec.NONE:
        try:
            payload = decompress(codec, payload)
        except KafkaTierError as exc:  # the codec's error knows no batch: name it
            raise located(exc, batch.file, batch.position) from exc
    array = np.frombuffer(payload, dtype=np.uint8)
    rows, ok = scan_records(array, batch.records_count)
    return ScannedBatch(batch, array, rows) if ok else None


def map_keys(scanned: ScannedBatch, offset_map: OffsetMap, start: int) -> bool:
    """Put the keyed records at or after ``start``; True when the map filled up first (its
    latest offset is then the last record put)."""
    complete, offset_map.size, last_put = map_batch(
        offset_map.table, scanned.payload, scanned.rows, scanned.batch.base_offset, start,
        offset_map.size, offset_map.max_desired_size, offset_map.digest, offset_map.superseded,
        offset_map.superseded_start,
    )  # fmt: skip
    if not complete:
        offset_map.update_latest_offset(max(offset_map.latest_offset, last_put))
    return not complete


def select(
    scanned: ScannedBatch, offset_map: OffsetMap, now_ms: int
) -> tuple[npt.NDArray[np.int64], int, int]:
    """(indexes of the records kept, tombstones dropped because their horizon passed,
    tombstones kept)."""
    horizon = scanned.batch.delete_horizon_ms
    retain_deletes = horizon is None or now_ms < horizon
    kept, expired, tombstones = select_batch(
        offset_map.table, scanned.payload, scanned.rows, scanned.batch.base_offset,
        offset_map.latest_offset, retain_deletes, offset_map.digest, offset_map.superseded,
        offset_map.superseded_start,
    )  # fmt: skip
    return kept, int(expired), int(tombstones)


def rebuild(scanned: ScannedBatch, kept: npt.NDArray[np.int64], horizon: int | None) -> bytes:
    """The batch with only ``kept`` records, as Kafka's builder writes it: original base offset,
    lastOffsetDelta, producer fields, flags and codec; baseTimestamp = the horizon if any, else
    the first kept record's timestamp; maxTimestamp recomputed (LogAppendTime: preserved)."""
    batch = scanned.batch
    log_append = batch.timestamp_type is TimestampType.LOG_APPEND_TIME
    if log_append:
        stamps = np.full(len(kept), batch.max_timestamp, dtype=np.int64)
    else:
        stamps = batch.base_timestamp + scanned.rows[kept, TS_DELTA]
    has_horizon = horizon is not None and horizon >= 0
    base_ts = int(horizon) if has_horizon and horizon is not None else int(stamps[0])
    body = rebuild_records(scanned.payload, scanned.rows, kept, stamps - base_ts)
    max_ts = batch.max_timestamp if log_append else max(int(stamps.max()), -1)
    codec = batch.codec
    payload = body.tobytes() if codec == Codec.NONE else compress(codec, body.tobytes(), None)
    attrs = attributes(codec, batch.timestamp_type, batch.is_transactional, batch.is_control,
                       has_horizon)  # fmt: skip
    return _assemble(payload, batch.base_offset, batch.partition_leader_epoch, attrs,
                     batch.last_offset_delta, base_ts, max_ts, batch.producer_id,
                     batch.producer_epoch, batch.base_sequence, len(kept))  # fmt: skip
