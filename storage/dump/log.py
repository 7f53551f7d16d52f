"""``kafkatier dump`` of a ``.log`` segment: its batches and, optionally, their records.

As Kafka's DumpLogSegments, batches are read one at a time from a memory-mapped file and
checked (CRC-32C for v2, kafka-format.md §1): a batch whose CRC fails is shown (``crcValid``
false) with a ``problem`` item and the dump goes on with the next; a torn batch or one whose
header does not parse ends the file with a ``problem`` item. v0/v1 messages report the v2-only
fields as -1/false.
"""

from __future__ import annotations

import mmap
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from kafkatier.storage.dump.items import Item, Progress, problem
from kafkatier.storage.errors import KafkaTierError
from kafkatier.storage.log.segment import AnyBatch
from kafkatier.storage.record.batch import RecordBatch
from kafkatier.storage.record.records import iter_batches
from kafkatier.storage.wire import TimestampType

_TIMESTAMP_NAMES: Final = {
    TimestampType.CREATE_TIME: "CreateTime",
    TimestampType.LOG_APPEND_TIME: "LogAppendTime",
}


def dump_log(path: Path, records: bool, progress: Progress | None) -> Iterator[Item]:
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
            if not valid:  # its framing holds: the next batches are shown, as Kafka's tool does
                yield problem(
                    file,
                    position,
                    f"corrupt batch: stored CRC {batch.crc} does not "
                    f"match the computed {batch.compute_crc()}; its records not shown",
                )
            elif records:
                yield from record_items(batch)
            position += batch.size_in_bytes
            if progress is not None:
                progress(batch.size_in_bytes)
    except KafkaTierError as exc:
        yield problem(file, position, f"{exc.message}; rest of file skipped")
        return
    if position < size:
        yield problem(
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
