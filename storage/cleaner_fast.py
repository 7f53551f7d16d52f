"""The cleaner's per-record decisions for v2 data batches, vectorised (``cleaner_kernels``).

Same rules as the record-at-a-time path in ``cleaner_filter`` (which stays for control batches
and for bytes the scan rejects, where it raises the precise error): a record past the map's
latest offset is kept; a keyless one dropped; a keyed one kept when it is the latest for its key
and is not a tombstone whose batch's delete horizon has passed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kafkatier.storage.cleaner_kernels import (
    KEY_LEN,
    KEY_POS,
    OFF_DELTA,
    TS_DELTA,
    VALUE_LEN,
    rebuild_records,
    scan_records,
)
from kafkatier.storage.compression import compress, decompress
from kafkatier.storage.offset_map import OffsetMap
from kafkatier.storage.record_builder import _assemble
from kafkatier.storage.records import RecordBatch
from kafkatier.storage.wire import BATCH_HEADER_SIZE, Codec, TimestampType, attributes


@dataclass(frozen=True, slots=True)
class ScannedBatch:
    """A batch's record bytes (decompressed) and where each record's fields sit."""

    batch: RecordBatch
    payload: npt.NDArray[np.uint8]
    rows: npt.NDArray[np.int64]

    @property
    def offsets(self) -> npt.NDArray[np.int64]:
        return self.batch.base_offset + self.rows[:, OFF_DELTA]

    def key_slices(
        self, mask: npt.NDArray[np.bool_]
    ) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        return self.payload, self.rows[mask, KEY_POS], self.rows[mask, KEY_LEN]


def scan(batch: RecordBatch) -> ScannedBatch | None:
    """None when the record bytes do not parse (the slow reader reports why)."""
    payload: bytes | memoryview = batch.buffer[BATCH_HEADER_SIZE:]
    codec = batch.codec
    if codec != Codec.NONE:
        payload = decompress(codec, payload)
    array = np.frombuffer(payload, dtype=np.uint8)
    rows, ok = scan_records(array, batch.records_count)
    return ScannedBatch(batch, array, rows) if ok else None


def map_keys(scanned: ScannedBatch, offset_map: OffsetMap, start: int) -> bool:
    """Put the keyed records at or after ``start``; True when the map filled up first."""
    offsets = scanned.offsets
    mask = (scanned.rows[:, KEY_LEN] >= 0) & (offsets >= start)
    count = int(mask.sum())
    if count == 0:
        return False
    return offset_map.put_keys(*scanned.key_slices(mask), offsets[mask]) < count


def select(
    scanned: ScannedBatch, offset_map: OffsetMap, now_ms: int
) -> tuple[npt.NDArray[np.int64], int]:
    """(indexes of the records kept, tombstones dropped because their horizon passed)."""
    rows, offsets = scanned.rows, scanned.offsets
    latest = offset_map.latest_offset
    keyed = rows[:, KEY_LEN] >= 0
    mapped = keyed & (offsets <= latest)
    found = np.full(len(rows), -1, dtype=np.int64)
    if mapped.any():
        found[mapped] = offset_map.get_keys(*scanned.key_slices(mapped))
    horizon = scanned.batch.delete_horizon_ms
    retain_deletes = horizon is None or now_ms < horizon
    has_value = rows[:, VALUE_LEN] >= 0
    newest = keyed & (offsets >= found)
    keep = (offsets > latest) | (newest & (has_value | retain_deletes))
    expired = 0 if retain_deletes else int((mapped & newest & ~has_value).sum())
    return np.flatnonzero(keep).astype(np.int64), expired


def tombstones(scanned: ScannedBatch, kept: npt.NDArray[np.int64]) -> int:
    return int((scanned.rows[kept, VALUE_LEN] < 0).sum())


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
