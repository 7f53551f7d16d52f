"""Building the cleaner's offset map over the dirty section (kafka-format.md §11.2).

Segments in [start, end) are read from the segment at ``start`` on; batches of aborted
transactions are skipped (their data never wins), control batches only advance transaction
tracking, and every other keyed record at or after ``start`` maps its key to its offset. When the
map reaches its desired size the build stops part-way, possibly inside a batch: ``latest_offset``
(the last record put, as Kafka's map records every put) then tells the rewrite which records the
map covers, and the next pass starts after it.
"""

from __future__ import annotations

import numpy as np

from kafkatier.storage.cleaner import fast as cleaner_fast
from kafkatier.storage.cleaner.chunk import map_plain, walk_segment, with_compressed
from kafkatier.storage.cleaner.inflated_cache import InflatedCache
from kafkatier.storage.cleaner.kernels.offset_map import OffsetMap
from kafkatier.storage.cleaner.read_ahead import Chunks
from kafkatier.storage.cleaner.segment_store import SegmentInfo, SegmentStore
from kafkatier.storage.cleaner.txn import CleanedTransactionMetadata
from kafkatier.storage.log.segment import AnyBatch
from kafkatier.storage.record.batch import RecordBatch
from kafkatier.storage.record.legacy import LegacyBatch


def _map_batch_records(batch: AnyBatch, offset_map: OffsetMap, start: int) -> bool:
    """Put the batch's keyed records; True when the map filled up before all fitted, its latest
    offset then the last record put, as Kafka's (the next pass starts inside the batch)."""
    scanned = cleaner_fast.scan(batch) if isinstance(batch, RecordBatch) else None
    if scanned is not None:
        return cleaner_fast.map_keys(scanned, offset_map, start)
    keys: list[bytes] = []
    offsets: list[int] = []
    for record in batch.records():
        if record.key is not None and record.offset >= start:
            keys.append(record.key)
            offsets.append(record.offset)
    if not keys:
        return False
    put = offset_map.put_hashes(offset_map.digests(keys), np.array(offsets, dtype=np.int64))
    if put < len(keys) and put:
        offset_map.update_latest_offset(max(offset_map.latest_offset, offsets[put - 1]))
    return put < len(keys)


def _map_one(
    batch: AnyBatch, offset_map: OffsetMap, start: int, txn: CleanedTransactionMetadata
) -> bool:
    """One batch; True when the map filled up."""
    if isinstance(batch, LegacyBatch):
        if _map_batch_records(batch, offset_map, start):
            return True
    elif batch.is_control:
        txn.on_control_batch_read(batch)
    elif not txn.on_batch_read(batch) and _map_batch_records(batch, offset_map, start):
        return True
    if batch.last_offset >= start:
        offset_map.update_latest_offset(batch.last_offset)
    return False


def _map_segment(
    store: SegmentStore,
    info: SegmentInfo,
    offset_map: OffsetMap,
    start: int,
    txn: CleanedTransactionMetadata,
    cache: InflatedCache | None,
) -> bool:
    if cleaner_fast.ENABLED:
        plain = map_plain(offset_map, start)
        with Chunks(store, info, cache=cache, fill=True) as chunks:
            runs = with_compressed(plain, lambda run, _chunk: plain(run.data, 0),
                                   store.io_buffer_size, chunks)  # fmt: skip
            return walk_segment(chunks, start, runs,
                                lambda batch: _map_one(batch, offset_map, start, txn))  # fmt: skip
    return any(_map_one(b, offset_map, start, txn) for b in store.read_batches(info.base_offset,
                                                                               start))  # fmt: skip


def build_offset_map(
    store: SegmentStore, offset_map: OffsetMap, start: int, end: int,
    cache: InflatedCache | None = None,
) -> bool:  # fmt: skip
    """Fill ``offset_map`` from the dirty segments in [start, end); True if it filled up.
    ``cache``: where the read-ahead keeps the batches it inflates, for the rewrite."""
    offset_map.clear(max_keys=max(end - start, 0), start=start)  # no more keys than offsets
    txn = CleanedTransactionMetadata(store.aborted_txns(start, end))
    infos = store.segment_infos()
    bases = [i.base_offset for i in infos]
    for i, info in enumerate(infos):
        following = bases[i + 1] if i + 1 < len(bases) else None
        if info.base_offset >= end or (following is not None and following <= start):
            continue
        if _map_segment(store, info, offset_map, start, txn, cache):
            return True
        if following is not None:
            offset_map.update_latest_offset(max(offset_map.latest_offset, following - 1))
    return False
