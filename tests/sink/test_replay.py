"""Completing a decided batch from the sink's write-ahead log (``sink.append.replay``), without
Spark: a staging file of encoded batches (provisional sequences, as an executor writes them),
its write-ahead record, and a partition that holds none, part or all of the batch. Every record
must end up in the partition once, behind one COMMIT marker."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from kafkatier.sink.append import Checked, records_present, replay, to_wal, write_partition
from kafkatier.sink.pieces import PartitionSpans
from kafkatier.sink.stage import StagingFiles, assign_sequences
from kafkatier.sink.wal import Wal
from kafkatier.storage.arrow.codec import encode_arrow
from kafkatier.storage.arrow.log import read_arrow
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.log import Log
from kafkatier.storage.log.reader import IsolationLevel
from kafkatier.storage.log.validator import parse_incoming
from kafkatier.storage.producer.entry import AppendOrigin
from kafkatier.storage.wire import Codec

PRODUCER, EPOCH, FIRST, ROWS, NOW = 4242, 2, 10, 40, 1_700_000_000_000


def decided(tmp_path: Path) -> tuple[LogDirectory, Log, Wal]:
    """A partition holding batch 6 (sequences 0..9, committed) and the write-ahead record of
    batch 7: 40 records in 8 batches of 5, first sequence 10."""
    logs = LogDirectory(tmp_path / "logs")
    logs.create_partitions("t", 1)
    log = logs.get("t", 0)
    assert log is not None
    earlier = parse_incoming(encoded(10), AppendOrigin.CLIENT)
    assign_sequences(earlier, 0)
    log.append_committed(earlier, PRODUCER, EPOCH, timestamp=NOW)
    staging = tmp_path / "logs" / "kafkatier-sink.t.wal.7-abc.task-0-0.kbatches"
    data = encoded(ROWS)
    staging.write_bytes(data)
    group = PartitionSpans("t", 0, ROWS, [(str(staging), 0, len(data))])
    return logs, log, to_wal(7, PRODUCER, EPOCH, [Checked(group, FIRST, None)])


def encoded(rows: int) -> bytearray:
    table = pa.table({"value": [f"value-{i}".encode() for i in range(rows)]})
    out = encode_arrow(
        table, codec=Codec.LZ4, producer_id=PRODUCER, producer_epoch=EPOCH, base_sequence=0,
        transactional=True, timestamp=NOW, max_batch_records=5,
    )  # fmt: skip
    return bytearray(out.data)


def committed_values(log: Log) -> list[bytes]:
    return read_arrow(log, isolation=IsolationLevel.READ_COMMITTED)["value"].to_pylist()


def check_once(log: Log) -> None:
    every = [f"value-{i}".encode() for i in range(10)] + [
        f"value-{i}".encode() for i in range(ROWS)
    ]
    assert committed_values(log) == every
    assert read_arrow(log)["value"].to_pylist() == every  # nothing uncommitted either
    entry = log.producer_state.last_entry(PRODUCER)
    assert entry is not None and entry.current_txn_first_offset is None


@pytest.mark.parametrize("written", [0, 3, 8])
def test_a_decided_batch_is_completed_where_it_is_missing(tmp_path: Path, written: int) -> None:
    """``written`` of its 8 record batches reached the partition before the crash (their
    marker not: it goes with the last one)."""
    logs, log, wal = decided(tmp_path)
    with StagingFiles() as files:
        batches = parse_incoming(files.read(wal.spans_of(wal.partitions[0])), AppendOrigin.CLIENT)
    assign_sequences(batches, FIRST)
    if written:
        log.append_batches(batches[:written])
    assert records_present(log, wal, wal.partitions[0]) == 5 * written
    assert replay(wal, logs.get_or_create, EPOCH + 1, NOW + 1) == 1
    check_once(log)
    assert replay(wal, logs.get_or_create, EPOCH + 1, NOW + 1) == 0  # a second recovery: done
    check_once(log)
    logs.close()


def test_a_partition_whose_producer_entry_expired_is_read_to_find_the_batch(
    tmp_path: Path,
) -> None:
    """The partition holds the whole batch and its marker, but its producer state lost the
    producer (a snapshot loaded after ``producer.id.expiration.ms``): the partition's batches
    show the batch is there, and nothing is appended again."""
    logs, log, wal = decided(tmp_path)
    with StagingFiles() as files:
        pieces = [parse_incoming(files.read(wal.spans_of(wal.partitions[0])), AppendOrigin.CLIENT)]
    write_partition(log, pieces, FIRST, (PRODUCER, EPOCH, NOW))
    end = log.log_end_offset
    del log.producer_state.producers[PRODUCER]
    assert records_present(log, wal, wal.partitions[0]) == ROWS
    assert replay(wal, logs.get_or_create, EPOCH + 1, NOW + 1) == 0
    assert log.log_end_offset == end
    assert committed_values(log)[10:] == [f"value-{i}".encode() for i in range(ROWS)]
    logs.close()
