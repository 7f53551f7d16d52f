"""``kafkatier dump`` as a library: every Kafka file as a stream of plain dicts.

Modelled on Kafka's ``kafka-dump-log.sh`` (DumpLogSegments). Each item has a ``"type"`` and the
``"file"`` it comes from: ``file`` (a file begins), ``batch``, ``record``, ``indexEntry``,
``timeIndexEntry``, ``abortedTxn``, ``producerState``, ``checkpointEntry``, ``leaderEpoch``,
``partitionMetadata``, ``metaProperties``, ``cleanShutdown``, ``note`` and ``problem``. Values
are Python values (keys and values stay ``bytes``); :func:`to_json` gives the JSON form, which
for batches and records has exactly the fields of :data:`JSON_FIELDS`. Items are produced one
at a time from memory-mapped files, so memory use does not grow with the log. A torn or corrupt
batch yields a ``problem`` and ends that file; nothing is ever written.
"""

from __future__ import annotations

import base64
import mmap
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Final

from kafkatier.storage.checkpoints import OffsetCheckpointFile
from kafkatier.storage.errors import KafkaTierError
from kafkatier.storage.metadata_files import (
    CleanShutdownFile,
    MetaProperties,
    PartitionMetadataFile,
)
from kafkatier.storage.offset_index import OffsetIndex
from kafkatier.storage.producer_snapshot import read_snapshot
from kafkatier.storage.records import RecordBatch, iter_batches
from kafkatier.storage.segment import AnyBatch
from kafkatier.storage.time_index import TimeIndex
from kafkatier.storage.txn_index import AbortedTxn, TransactionIndex
from kafkatier.storage.verify_files import (
    Kind,
    is_log_dir,
    is_partition_dir,
    parse_file_name,
    partition_dirs,
)
from kafkatier.storage.verify_problem import Findings
from kafkatier.storage.verify_state import read_epoch_checkpoint
from kafkatier.storage.wire import SNAPSHOT_ENTRY, SNAPSHOT_HEADER, TimestampType

Item = dict[str, Any]
Progress = Callable[[int], None]

JSON_FIELDS: Final[dict[str, tuple[str, ...]]] = {
    "batch": (
        "type", "file", "position", "size", "baseOffset", "lastOffset", "count", "magic", "codec",
        "timestampType", "maxTimestamp", "producerId", "producerEpoch", "baseSequence",
        "isTransactional", "isControl", "crcValid",
    ),
    "record": ("type", "file", "offset", "timestamp", "key", "value", "headers"),
}  # fmt: skip
"""The JSON fields of batches and records; other items keep all their keys."""

_TIMESTAMP_NAMES: Final = {
    TimestampType.CREATE_TIME: "CreateTime",
    TimestampType.LOG_APPEND_TIME: "LogAppendTime",
}
_SEGMENT_ORDER: Final = (Kind.LOG, Kind.INDEX, Kind.TIME_INDEX, Kind.TXN_INDEX, Kind.SNAPSHOT)


class NotDumpableError(ValueError):
    """A path that is not a Kafka file or directory (a usage error)."""


def to_json(item: Item) -> Item:
    """The JSON object for ``item``: bytes as base64, batches and records limited to their
    documented fields."""
    keys = JSON_FIELDS.get(item["type"], tuple(item))
    return {key: _jsonable(item[key]) for key in keys}


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def dump_paths(
    paths: Iterable[Path], *, records: bool = False, progress: Progress | None = None
) -> Iterator[Item]:
    """Items for each path: a file, a partition dir (its files in offset order) or a log dir
    (root files, then each partition). Raises NotDumpableError/FileNotFoundError up front."""
    paths = [Path(p) for p in paths]
    for path in paths:
        if not path.exists():
            raise FileNotFoundError(f"no such file or directory: {path}")
        if path.is_file() and parse_file_name(path.name).kind is Kind.UNKNOWN:
            raise NotDumpableError(f"{path} is not a Kafka log, index, snapshot or checkpoint")
        if path.is_dir() and not (is_partition_dir(path) or is_log_dir(path)):
            raise NotDumpableError(f"{path} is neither a Kafka log dir nor a partition dir")
    for path in paths:
        for file in _files(path):
            yield from dump_file(file, records=records, progress=progress)


def _files(path: Path) -> Iterator[Path]:
    if path.is_file():
        yield path
    elif is_partition_dir(path):
        yield from _partition_files(path)
    else:
        root = [p for p in sorted(path.iterdir()) if p.is_file()]
        yield from (p for p in root if parse_file_name(p.name).kind is not Kind.UNKNOWN)
        for directory in partition_dirs(path):
            yield from _partition_files(directory)


def _partition_files(directory: Path) -> list[Path]:
    def order(path: Path) -> tuple[int, int, str]:
        name = parse_file_name(path.name)
        if name.offset is None:
            return (1, 0, path.name)
        return (0, name.offset, str(_SEGMENT_ORDER.index(name.kind)) + name.temp_suffix)

    known = [p for p in directory.iterdir() if p.is_file()]
    return sorted((p for p in known if parse_file_name(p.name).kind is not Kind.UNKNOWN), key=order)


def dump_file(
    path: Path, *, records: bool = False, progress: Progress | None = None
) -> Iterator[Item]:
    name = parse_file_name(path.name)
    file = str(path)
    yield {"type": "file", "file": file, "kind": name.kind.value, "size": path.stat().st_size}
    try:
        if name.kind is Kind.LOG:
            yield from _dump_log(path, records, progress)
        elif name.kind in (Kind.INDEX, Kind.TIME_INDEX):
            yield from _dump_index(path, name.kind, name.offset or 0)
        elif name.kind is Kind.TXN_INDEX:
            yield from _dump_txn_index(path, name.offset or 0)
        elif name.kind is Kind.SNAPSHOT:
            yield from _dump_snapshot(path)
        else:
            yield from _dump_small_file(path, name.kind)
    except KafkaTierError as exc:
        position = exc.context.get("position")
        yield _problem(file, position if isinstance(position, int) else None, exc.message)


def _problem(file: str, position: int | None, message: str) -> Item:
    return _item("problem", file, position=position, message=message)


# ------------------------------------------------------------------------------------ .log


def _dump_log(path: Path, records: bool, progress: Progress | None) -> Iterator[Item]:
    file = str(path)
    with open(path, "rb") as f:
        size = path.stat().st_size
        if size == 0:
            return
        view = memoryview(mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ))
    position = 0
    try:
        for batch in iter_batches(view, file=file):
            position = batch.position
            valid = batch.is_valid()
            yield batch_item(batch, valid)
            if not valid:
                yield _problem(
                    file,
                    position,
                    f"corrupt batch: stored CRC {batch.crc} does not "
                    f"match the computed {batch.compute_crc()}; rest of file skipped",
                )
                return
            if records:
                yield from record_items(batch)
            position += batch.size_in_bytes
            if progress is not None:
                progress(batch.size_in_bytes)
    except KafkaTierError as exc:
        yield _problem(file, position, f"{exc.message}; rest of file skipped")
        return
    if position < size:
        yield _problem(
            file,
            position,
            f"incomplete batch at the end: {size - position} bytes "
            "that do not hold a whole batch (a torn write)",
        )


def batch_item(batch: AnyBatch, valid: bool) -> Item:
    """A batch's header fields; v0/v1 messages report the v2-only fields as -1/false."""
    return {
        "type": "batch",
        "file": batch.file,
        "position": batch.position,
        "size": batch.size_in_bytes,
        "baseOffset": batch.base_offset if valid or batch.magic >= 2 else batch.last_offset,
        "lastOffset": batch.last_offset,
        "count": batch.records_count if valid or batch.magic >= 2 else None,
        "magic": batch.magic,
        "codec": batch.codec.kafka_name,
        "timestampType": _TIMESTAMP_NAMES[batch.timestamp_type],
        "maxTimestamp": batch.max_timestamp,
        "producerId": batch.producer_id,
        "producerEpoch": batch.producer_epoch,
        "baseSequence": batch.base_sequence,
        "lastSequence": batch.last_sequence,
        "partitionLeaderEpoch": batch.partition_leader_epoch,
        "isTransactional": batch.is_transactional,
        "isControl": batch.is_control,
        "deleteHorizonMs": batch.delete_horizon_ms,
        "crc": batch.crc,
        "crcValid": valid,
    }


def record_items(batch: AnyBatch) -> Iterator[Item]:
    """The records of a batch, with a control record's type and coordinator epoch."""
    control = (
        batch.control_record() if isinstance(batch, RecordBatch) and batch.is_control else None
    )
    for record in batch.records():
        item = {
            "type": "record",
            "file": batch.file,
            "offset": record.offset,
            "timestamp": record.timestamp,
            "key": record.key,
            "value": record.value,
            "headers": [[name, value] for name, value in record.headers],
            "sequence": record.sequence,
            "timestampType": _TIMESTAMP_NAMES[batch.timestamp_type],
        }
        if control is not None:
            item["controlType"], item["coordinatorEpoch"] = control[0].name, control[1]
        yield item


# ------------------------------------------------------------------------- indexes and state


def _item(kind: str, file: str, **fields: Any) -> Item:
    return {"type": kind, "file": file, **fields}


def _dump_index(path: Path, kind: Kind, base: int) -> Iterator[Item]:
    """Entries up to the first unwritten (all-zero) slot, as DumpLogSegments stops there."""
    file = str(path)
    index: OffsetIndex | TimeIndex = (
        OffsetIndex(path, base, writable=False)
        if kind is Kind.INDEX
        else TimeIndex(path, base, writable=False)
    )
    unwritten = (base, 0) if kind is Kind.INDEX else (0, base)
    try:
        for slot in range(index.entries):
            first, second = index.entry(slot)
            if (first, second) == unwritten:
                left = index.entries - slot
                yield _item("note", file, position=slot * index.ENTRY.size,
                            message=f"{left} unused (zero-filled) slots follow")  # fmt: skip
                return
            if kind is Kind.INDEX:
                yield _item("indexEntry", file, slot=slot, offset=first, position=second)
            else:
                yield _item("timeIndexEntry", file, slot=slot, timestamp=first, offset=second)
    finally:
        index.close_handler()


def _dump_txn_index(path: Path, base: int) -> Iterator[Item]:
    file = str(path)
    size = AbortedTxn.SIZE
    for i, txn in enumerate(TransactionIndex(path, base).all_entries()):
        yield _item("abortedTxn", file, position=i * size, producerId=txn.producer_id,
                    firstOffset=txn.first_offset, lastOffset=txn.last_offset,
                    lastStableOffset=txn.last_stable_offset)  # fmt: skip
    length = path.stat().st_size
    if length % size:
        yield _problem(file, length - length % size, f"{length % size} bytes of a partial entry")


def _dump_snapshot(path: Path) -> Iterator[Item]:
    file = str(path)
    for i, e in enumerate(read_snapshot(path)):
        yield _item("producerState", file, position=SNAPSHOT_HEADER.size + i * SNAPSHOT_ENTRY.size,
                    producerId=e.producer_id, producerEpoch=e.producer_epoch,
                    lastSequence=e.last_sequence, lastOffset=e.last_offset,
                    offsetDelta=e.offset_delta, timestamp=e.timestamp,
                    coordinatorEpoch=e.coordinator_epoch,
                    currentTxnFirstOffset=e.current_txn_first_offset)  # fmt: skip


def _dump_small_file(path: Path, kind: Kind) -> Iterator[Item]:
    file = str(path)
    if kind is Kind.OFFSET_CHECKPOINT:
        for (topic, partition), offset in OffsetCheckpointFile(path).read().items():
            yield _item("checkpointEntry", file, topic=topic, partition=partition, offset=offset)
    elif kind is Kind.LEADER_EPOCH:
        found = Findings()
        for epoch, start in read_epoch_checkpoint(path, found):
            yield _item("leaderEpoch", file, epoch=epoch, startOffset=start)
        for problem in found.problems:
            yield _problem(file, None, problem.message)
    elif kind is Kind.PARTITION_METADATA:
        yield _item("partitionMetadata", file, topicId=PartitionMetadataFile(path).read())
    elif kind is Kind.META_PROPERTIES:
        meta = MetaProperties.read(path)
        yield _item("metaProperties", file, version=meta.version, clusterId=meta.cluster_id,
                    nodeId=meta.node_id, directoryId=meta.directory_id)  # fmt: skip
    elif kind is Kind.CLEAN_SHUTDOWN:
        broker_epoch = CleanShutdownFile(path.parent).broker_epoch()
        yield _item("cleanShutdown", file, brokerEpoch=broker_epoch)
