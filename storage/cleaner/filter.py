"""Which records and batches one cleaning keeps (Kafka's ``MemoryRecords.filterTo`` with the
cleaner's ``RecordFilter``, kafka-format.md §11.3).

A record at or below the map's latest offset survives only if it has a key, is the latest for
that key, and is not a tombstone whose batch's delete horizon has passed. A batch whose records
all survive and that needs no horizon is copied byte for byte; otherwise it is rebuilt with its
original base offset, lastOffsetDelta, producer fields and flags, or kept as a 61-byte empty
batch where producer state or the round's last offset depend on it, or dropped.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field

from kafkatier.storage.cleaner import fast as cleaner_fast
from kafkatier.storage.cleaner.kernels.offset_map import OffsetMap
from kafkatier.storage.cleaner.legacy import build_legacy, select_legacy
from kafkatier.storage.cleaner.txn import CleanedTransactionMetadata
from kafkatier.storage.log.segment import AnyBatch
from kafkatier.storage.record.batch import RecordBatch
from kafkatier.storage.record.builder import _build, build_empty_batch, rebuild_batch
from kafkatier.storage.record.legacy import LegacyBatch
from kafkatier.storage.record.record import Record
from kafkatier.storage.wire import Codec, TimestampType

Output = bytes | memoryview | None


class BatchRetention(enum.Enum):
    DELETE = 0
    DELETE_EMPTY = 1
    RETAIN_EMPTY = 2


@dataclass
class FilterStats:
    """Counts for one cleaning: what was read, kept and removed."""

    records_read: int = 0
    records_retained: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    tombstones_kept: int = 0
    tombstones_dropped: int = 0
    index_seconds: float = 0.0
    """The map builds' time (``compact.CompactionResult.index_seconds``)."""


@dataclass
class FilterContext:
    """The facts of one cleaning round that every batch is judged against."""

    offset_map: OffsetMap
    now_ms: int
    delete_retention_ms: int
    txn: CleanedTransactionMetadata
    last_records: dict[int, tuple[int | None, int]]
    """pid -> (last data offset or None, epoch): Kafka's ``lastRecordsOfActiveProducers``."""
    upper_bound: int
    """The round's first uncleanable offset: a batch ending just before it is never dropped."""
    stats: FilterStats = field(default_factory=FilterStats)
    fast: bool = True
    """Vectorised record decisions (``fast``); False: record at a time (tests compare)."""
    retain_legacy_deletes: bool = True
    """Whether legacy (magic 0/1) tombstones survive in the segment being cleaned: its
    last-modified time is after the legacy delete horizon (``legacy``)."""


def _is_last_of_producer(batch: RecordBatch, ctx: FilterContext) -> bool:
    last = ctx.last_records.get(batch.producer_id)
    if last is None:
        return False
    last_data_offset, epoch = last
    if last_data_offset is not None:
        return batch.last_offset == last_data_offset
    return batch.is_control and batch.producer_epoch == epoch


def _retention(batch: RecordBatch, ctx: FilterContext) -> tuple[BatchRetention, bool, bool]:
    """(retention, discard all records, marker of a txn with nothing left) for one batch."""
    if batch.is_control:
        can_discard = ctx.txn.on_control_batch_read(batch)
        horizon = batch.delete_horizon_ms
        discard = can_discard and horizon is not None and horizon <= ctx.now_ms
        empty_txn_marker = can_discard
    else:
        discard = can_discard = ctx.txn.on_batch_read(batch)
        empty_txn_marker = False
    if (
        batch.has_producer_id and _is_last_of_producer(batch, ctx)
    ) or batch.next_offset == ctx.upper_bound:
        retention = BatchRetention.RETAIN_EMPTY
    elif discard:
        retention = BatchRetention.DELETE
    else:
        retention = BatchRetention.DELETE_EMPTY
    return retention, discard, empty_txn_marker


def _select(batch: RecordBatch, records: list[Record], ctx: FilterContext) -> list[Record]:
    """Kafka's ``shouldRetainRecord`` for every record, with one vectorised map lookup."""
    latest = ctx.offset_map.latest_offset
    keyed = [i for i, r in enumerate(records) if r.offset <= latest and r.key is not None]
    digests = ctx.offset_map.digests([records[i].key or b"" for i in keyed])
    found = ctx.offset_map.get_hashes(digests)
    found_at = dict(zip(keyed, found.tolist(), strict=True))
    horizon = batch.delete_horizon_ms
    retain_deletes = horizon is None or ctx.now_ms < horizon
    kept: list[Record] = []
    for i, record in enumerate(records):
        if record.offset > latest:
            kept.append(record)
        elif record.key is None:
            continue
        elif record.offset >= found_at[i]:
            if record.value is not None or retain_deletes:
                kept.append(record)
            else:
                ctx.stats.tombstones_dropped += 1
    return kept


def _rebuild(batch: RecordBatch, kept: list[Record], horizon: int | None) -> bytes:
    log_append = batch.timestamp_type is TimestampType.LOG_APPEND_TIME
    if batch.is_control:
        producer = (batch.producer_id, batch.producer_epoch, batch.base_sequence, True, True)
        return _build(kept, (batch.base_offset, batch.last_offset), (batch.codec, None),
                      batch.timestamp_type, batch.max_timestamp if log_append else None,
                      producer, batch.partition_leader_epoch, horizon)  # fmt: skip
    return rebuild_batch(batch, kept, codec=Codec(batch.codec), delete_horizon_ms=horizon)


Rebuild = Callable[[int | None], bytes]


def _decide(batch: RecordBatch, ctx: FilterContext, discard: bool) -> tuple[int, int, int, Rebuild]:
    """(records kept, records in the batch, tombstones kept, how to rebuild with a horizon)."""
    if discard:
        return 0, batch.records_count, 0, lambda _h: b""
    scanned = cleaner_fast.scan(batch) if ctx.fast and not batch.is_control else None
    if scanned is not None:
        kept_at, expired, tombstones = cleaner_fast.select(scanned, ctx.offset_map, ctx.now_ms)
        ctx.stats.tombstones_dropped += expired
        return (
            len(kept_at),
            batch.records_count,
            tombstones,
            (lambda horizon: cleaner_fast.rebuild(scanned, kept_at, horizon)),
        )
    records = list(batch.records())
    # control records never meet the map: Kafka's filter keeps them as they are
    kept = records if batch.is_control else _select(batch, records, ctx)
    tombstones = sum(1 for r in kept if r.value is None) if not batch.is_control else 0
    return len(kept), len(records), tombstones, lambda horizon: _rebuild(batch, kept, horizon)


def _filter_legacy(batch: LegacyBatch, ctx: FilterContext) -> Output:
    """A legacy set: the records Kafka keeps (``legacy``), the original bytes when all
    survive. Kafka cannot keep an emptied legacy set where it would keep an empty batch (the
    last batch of the round: ``filterTo`` throws, and that log is not cleaned); the original
    bytes are kept there instead."""
    ctx.txn.on_batch_read(batch)  # advances the aborted-transaction queue, as for any batch
    records = list(batch.records())
    kept, dropped = select_legacy(records, ctx.offset_map, ctx.retain_legacy_deletes)
    if not kept and batch.next_offset == ctx.upper_bound:
        kept = records
    ctx.stats.tombstones_dropped += dropped
    ctx.stats.tombstones_kept += sum(1 for r in kept if r.value is None)
    ctx.stats.records_retained += len(kept)
    out: Output = None
    if len(kept) == len(records):
        out = batch.buffer
    elif kept:
        out = build_legacy(batch, kept)
    if out is not None:
        ctx.stats.bytes_written += len(out)
    return out


def filter_batch(batch: AnyBatch, ctx: FilterContext) -> Output:
    """The bytes to write for ``batch`` (the original view, a rebuilt batch, an empty batch),
    or None to drop it."""
    stats = ctx.stats
    stats.bytes_read += batch.size_in_bytes
    stats.records_read += batch.records_count
    if isinstance(batch, LegacyBatch):
        return _filter_legacy(batch, ctx)
    retention, discard, empty_txn_marker = _retention(batch, ctx)
    if retention is BatchRetention.DELETE:
        return None
    kept, total, tombstones, rebuild = _decide(batch, ctx, discard)
    stats.tombstones_kept += tombstones
    stats.records_retained += kept
    out: Output = None
    if kept:
        needs_horizon = (tombstones > 0 or empty_txn_marker) and batch.delete_horizon_ms is None
        if kept == total and not needs_horizon:
            out = batch.buffer
        else:
            horizon = ctx.now_ms + ctx.delete_retention_ms if needs_horizon else None
            out = rebuild(horizon if needs_horizon else batch.delete_horizon_ms)
    elif retention is BatchRetention.RETAIN_EMPTY:
        out = build_empty_batch(batch)
    if out is not None:
        stats.bytes_written += len(out)
    return out
