"""``kafkatier dump`` of a segment's indexes and of a partition's and log dir's state files.

Offset and time indexes (kafka-format.md §4, §5), ``.txnindex`` (§6), producer ``.snapshot``
files (§7), offset and leader-epoch checkpoints (§8), ``partition.metadata``,
``meta.properties`` and the clean-shutdown marker: each entry one item, read without writing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from kafkatier.storage.checkpoint.checkpoint_file import OffsetCheckpointFile
from kafkatier.storage.checkpoint.metadata import (
    CleanShutdownFile,
    MetaProperties,
    PartitionMetadataFile,
)
from kafkatier.storage.dump.items import Item, item, problem
from kafkatier.storage.index.offset_index import OffsetIndex
from kafkatier.storage.index.time_index import TimeIndex
from kafkatier.storage.index.txn_index import AbortedTxn, TransactionIndex
from kafkatier.storage.producer.snapshot import read_snapshot
from kafkatier.storage.verify.epochs import read_epoch_checkpoint
from kafkatier.storage.verify.files import Kind
from kafkatier.storage.verify.index import valid_slots
from kafkatier.storage.verify.problem import Findings
from kafkatier.storage.wire import SNAPSHOT_ENTRY, SNAPSHOT_HEADER


def dump_index(path: Path, kind: Kind, base: int) -> Iterator[Item]:
    """Entries up to the first unwritten (all-zero) slot, as DumpLogSegments stops there; a
    length that is no whole number of entries is a problem (as ``verify`` reports it)."""
    file = str(path)
    index: OffsetIndex | TimeIndex = (
        OffsetIndex(path, base, writable=False)
        if kind is Kind.INDEX
        else TimeIndex(path, base, writable=False)
    )
    try:
        yield from _index_entries(index, kind, base, file)
    finally:
        index.close_handler()
    length, size = path.stat().st_size, index.ENTRY.size
    if length % size:
        yield problem(file, length - length % size,
                      f"{length % size} bytes of a partial entry (length {length} is not a "
                      f"multiple of the {size}-byte entry)")  # fmt: skip


def _index_entries(
    index: OffsetIndex | TimeIndex, kind: Kind, base: int, file: str
) -> Iterator[Item]:  # fmt: skip
    written = valid_slots(index, active=index.entries > 1)  # a one-entry file is trimmed
    for slot in range(index.entries):
        first, second = index.entry(slot)
        if slot == written:
            left = index.entries - slot
            yield item("note", file, position=slot * index.ENTRY.size,
                       message=f"{left} unused (zero-filled) slots follow")  # fmt: skip
            return
        if kind is Kind.INDEX:
            yield item("indexEntry", file, slot=slot, offset=first, position=second)
        else:
            yield item("timeIndexEntry", file, slot=slot, timestamp=first, offset=second)


def dump_txn_index(path: Path, base: int) -> Iterator[Item]:
    file = str(path)
    size = AbortedTxn.SIZE
    for i, txn in enumerate(TransactionIndex(path, base).all_entries()):
        yield item("abortedTxn", file, position=i * size, producerId=txn.producer_id,
                   firstOffset=txn.first_offset, lastOffset=txn.last_offset,
                   lastStableOffset=txn.last_stable_offset)  # fmt: skip
    length = path.stat().st_size
    if length % size:
        yield problem(file, length - length % size, f"{length % size} bytes of a partial entry")


def dump_snapshot(path: Path) -> Iterator[Item]:
    file = str(path)
    for i, e in enumerate(read_snapshot(path)):
        yield item("producerState", file, position=SNAPSHOT_HEADER.size + i * SNAPSHOT_ENTRY.size,
                   producerId=e.producer_id, producerEpoch=e.producer_epoch,
                   lastSequence=e.last_sequence, lastOffset=e.last_offset,
                   offsetDelta=e.offset_delta, timestamp=e.timestamp,
                   coordinatorEpoch=e.coordinator_epoch,
                   currentTxnFirstOffset=e.current_txn_first_offset)  # fmt: skip


def dump_small_file(path: Path, kind: Kind) -> Iterator[Item]:
    file = str(path)
    if kind is Kind.OFFSET_CHECKPOINT:
        for (topic, partition), offset in OffsetCheckpointFile(path).read().items():
            yield item("checkpointEntry", file, topic=topic, partition=partition, offset=offset)
    elif kind is Kind.LEADER_EPOCH:
        found = Findings()
        for epoch, start in read_epoch_checkpoint(path, found):
            yield item("leaderEpoch", file, epoch=epoch, startOffset=start)
        for bad in found.problems:
            yield problem(file, None, bad.message)
    elif kind is Kind.PARTITION_METADATA:
        yield item("partitionMetadata", file, topicId=PartitionMetadataFile(path).read())
    elif kind is Kind.META_PROPERTIES:
        meta = MetaProperties.read(path)
        yield item("metaProperties", file, version=meta.version, clusterId=meta.cluster_id,
                   nodeId=meta.node_id, directoryId=meta.directory_id)  # fmt: skip
    elif kind is Kind.CLEAN_SHUTDOWN:
        broker_epoch = CleanShutdownFile(path.parent).broker_epoch()
        yield item("cleanShutdown", file, brokerEpoch=broker_epoch)
