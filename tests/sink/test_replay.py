"""Completing a decided batch from the sink's write-ahead log (``sink.append.replay``), or
several whose flush was deferred (``replay_all``), without Spark: a staging file of encoded
batches (provisional sequences, as an executor writes them), its write-ahead record, and a
partition that holds none, part or all of the batch. Every record must end up in the partition
once, behind its batch's COMMIT marker."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from kafkatier.sink.append import (
    Checked,
    records_present,
    replay,
    replay_all,
    to_wal,
    write_partition,
)
from kafkatier.sink.pieces import PartitionSpans
from kafkatier.sink.stage import StagingFiles, assign_sequences
from kafkatier.sink.wal import Wal
from kafkatier.storage.arrow.codec import encode_arrow
from kafkatier.storage.arrow.log import read_arrow
from kafkatier.storage.errors import CheckpointError
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.log import Log
from kafkatier.storage.log.reader import IsolationLevel
from kafkatier.storage.log.validator import parse_incoming
from kafkatier.storage.producer.entry import AppendOrigin
from kafkatier.storage.record.batch import RecordBatch
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


LATER_ROWS = 15  # batch 8's: 3 record batches of 5, from sequence FIRST + ROWS


def two_decided(tmp_path: Path) -> tuple[LogDirectory, Log, list[Wal]]:
    """:func:`decided`, and batch 8 decided after batch 7 with its flush deferred with batch
    7's: the write-ahead records of both."""
    logs, log, wal = decided(tmp_path)
    staging = tmp_path / "logs" / "kafkatier-sink.t.wal.8-def.task-0-0.kbatches"
    data = encoded(LATER_ROWS)
    staging.write_bytes(data)
    group = PartitionSpans("t", 0, LATER_ROWS, [(str(staging), 0, len(data))])
    return logs, log, [wal, to_wal(8, PRODUCER, EPOCH, [Checked(group, FIRST + ROWS, None)])]


def batches_of(wal: Wal, first: int) -> list[RecordBatch]:
    with StagingFiles() as files:
        batches = parse_incoming(files.read(wal.spans_of(wal.partitions[0])), AppendOrigin.CLIENT)
    assign_sequences(batches, first)
    return batches


def control_epochs(log: Log) -> list[int]:
    return [batch.producer_epoch for segment in log.segments for batch in segment.batches()
            if batch.is_control]  # fmt: skip


@pytest.mark.parametrize(
    ("of_7", "marker_7", "of_8"),
    [(0, False, 0), (3, False, 0), (8, False, 0), (8, True, 0), (8, True, 2), (8, True, 3)],
)
def test_deferred_batches_are_completed_oldest_first(
    tmp_path: Path, of_7: int, marker_7: bool, of_8: int
) -> None:
    """Batches 7 and 8 both wait for their flush when the power goes: the partition kept
    ``of_7`` of batch 7's record batches (and its marker, or not), then ``of_8`` of batch 8's.
    Recovery completes both, each record once behind its own batch's marker: batch 7's at its
    own epoch (batch 8's batches carry it too, and follow), batch 8's at the fencing epoch."""
    logs, log, wals = two_decided(tmp_path)
    batches_7, batches_8 = batches_of(wals[0], FIRST), batches_of(wals[1], FIRST + ROWS)
    if marker_7:
        write_partition(log, [batches_7], FIRST, (PRODUCER, EPOCH, NOW))
    elif of_7:
        log.append_batches(batches_7[:of_7])
    if of_8:
        log.append_batches(batches_8[:of_8])
    assert replay_all(wals, logs.get_or_create, lambda wal: EPOCH + 1, NOW + 1) == 1 + (
        not marker_7
    )
    every = [f"value-{i}".encode() for rows in (10, ROWS, LATER_ROWS) for i in range(rows)]
    assert committed_values(log) == every
    assert read_arrow(log)["value"].to_pylist() == every  # nothing uncommitted either
    assert control_epochs(log) == [EPOCH, EPOCH, EPOCH + 1]  # batch 6's, 7's, 8's markers
    assert replay_all(wals, logs.get_or_create, lambda wal: EPOCH + 1, NOW + 1) == 0
    logs.close()


def test_a_partition_past_every_deferred_batch_is_refused(tmp_path: Path) -> None:
    """Batch 8's records count for batch 7 only as far as batch 8 goes: a producer sequence
    past both is a bookkeeping file that does not describe the partition."""
    logs, log, wals = two_decided(tmp_path)
    write_partition(log, [batches_of(wals[0], FIRST)], FIRST, (PRODUCER, EPOCH, NOW))
    write_partition(log, [batches_of(wals[1], FIRST + ROWS)], FIRST + ROWS, (PRODUCER, EPOCH, NOW))
    assert records_present(log, wals[0], wals[0].partitions[0], LATER_ROWS) == ROWS + LATER_ROWS
    with pytest.raises(CheckpointError, match="past the sink's decided batch 7"):
        records_present(log, wals[0], wals[0].partitions[0], LATER_ROWS - 1)
    with pytest.raises(CheckpointError, match="past the sink's decided batch 7"):
        replay(wals[0], logs.get_or_create, EPOCH + 1, NOW + 1)  # batch 8 not counted
    logs.close()


def placed_now(logs: LogDirectory):  # type: ignore[no-untyped-def]
    """What the sink records of a partition at the decision: its log end offset, its topic id."""
    return lambda topic, partition: (logs.get_or_create(topic, partition).log_end_offset,
                                     logs.topic_id(topic) or "")  # fmt: skip


def decided_placed(tmp_path: Path) -> tuple[LogDirectory, Wal]:
    """:func:`decided`, its record keeping where the batch began and the topic's id, and the
    batch then written whole, as a run that ended without its close leaves it (the record
    pending: its staging file stays until a flush)."""
    logs, log, bare = decided(tmp_path)
    group = PartitionSpans("t", 0, ROWS, [(bare.files[0], 0, Path(bare.files[0]).stat().st_size)])
    wal = to_wal(7, PRODUCER, EPOCH, [Checked(group, FIRST, None)], placed_now(logs))
    assert wal.starts == [log.log_end_offset] and wal.topic_ids == [logs.topic_id("t")]
    assert Wal.from_dict(wal.to_dict()) == wal
    assert replay(wal, logs.get_or_create, EPOCH, NOW + 1, topic_id=logs.topic_id) == 1
    check_once(log)
    return logs, wal


def test_a_batch_retention_removed_since_is_not_written_again(tmp_path: Path) -> None:
    """Retention (here DeleteRecords) removed the decided batch's records after it was
    written, and the reloaded producer state forgot its producer: a replay read that as a
    lost write and appended the records again past the log start (a consumer read them
    twice). Kafka never writes what lies below the log start again."""
    from kafkatier.storage.cleaner.retention import delete_records

    logs, wal = decided_placed(tmp_path)
    log = logs.get("t", 0)
    assert log is not None
    end = log.log_end_offset
    log.roll()
    delete_records(log, end)
    logs.close()
    logs = LogDirectory(tmp_path / "logs")
    log = logs.get("t", 0)
    assert log is not None and log.log_start_offset == end
    assert records_present(log, wal, wal.partitions[0]) < ROWS  # looks lost
    assert replay(wal, logs.get_or_create, EPOCH + 1, NOW + 2, topic_id=logs.topic_id) == 0
    assert log.log_end_offset == end
    logs.close()


@pytest.mark.parametrize("again", [True, False])
def test_a_batch_of_a_topic_deleted_since_never_reaches_it(tmp_path: Path, again: bool) -> None:
    """The topic deleted (its directory removed) after the batch was written, and created
    again (another topic id) or not: the replay wrote the old topic's rows into the new topic,
    or made the deleted topic anew to hold them."""
    import shutil

    logs, wal = decided_placed(tmp_path)
    logs.close()
    shutil.rmtree(tmp_path / "logs" / "t-0")
    logs = LogDirectory(tmp_path / "logs")
    if again:
        logs.create_partitions("t", 1)
    assert replay(wal, logs.get_or_create, EPOCH + 1, NOW + 2, topic_id=logs.topic_id) == 0
    log = logs.get("t", 0)
    assert (log is not None) == again
    assert log is None or log.log_end_offset == 0
    logs.close()
