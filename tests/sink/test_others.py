"""A sink's decided batch its driver left half-appended (an open transaction holding every
``read_committed`` reader of the partition back, other writers' records included) is completed
by the next writer of the log dir, from the sink's write-ahead record, as the sink itself
would (``sink.others``). Without Spark: the batch of ``test_replay.decided``, three of its
eight record batches in the partition, the sink's bookkeeping file beside it."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any

import pytest
from test_replay import EPOCH, PRODUCER, check_once, committed_values, decided

from kafkatier.cli.main import main
from kafkatier.sink import KafkaLogSink
from kafkatier.sink.append import records_present
from kafkatier.sink.bookkeeping import SinkState, lock_path, save_state
from kafkatier.sink.others import complete_other_sinks
from kafkatier.sink.stage import StagingFiles, assign_sequences
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.validator import parse_incoming
from kafkatier.storage.producer.entry import AppendOrigin

FIRST = 10


def half_appended(tmp_path: Path) -> Path:
    """Sink "t" decided batch 7 and died after three of its record batches: the partition's
    transaction is open, and its bookkeeping file and staging file remain."""
    logs, log, wal = decided(tmp_path)
    with StagingFiles() as files:
        batches = parse_incoming(files.read(wal.spans_of(wal.partitions[0])), AppendOrigin.CLIENT)
    assign_sequences(batches, FIRST)
    log.append_batches(batches[:3])
    entry = log.producer_state.last_entry(PRODUCER)
    assert entry is not None and entry.current_txn_first_offset is not None  # open
    save_state(logs.path, SinkState(sink_id="t", producer_id=PRODUCER, producer_epoch=EPOCH,
                                    last_committed_batch=6, wal=wal))  # fmt: skip
    logs.close()
    return tmp_path / "logs"


def test_another_writer_completes_the_batch_as_its_sink_would(tmp_path: Path) -> None:
    path = half_appended(tmp_path)
    with LogDirectory(path) as logs:
        assert complete_other_sinks(logs, "another", 1) == 1
        log = logs.get("t", 0)
        assert log is not None
        check_once(log)  # its 40 records once, committed, at the sink's producer id and epoch
        entry = log.producer_state.last_entry(PRODUCER)
        assert entry is not None and entry.producer_epoch == EPOCH
        assert complete_other_sinks(logs, "another", 2) == 0  # done: nothing more
    with LogDirectory(path) as logs:  # the sink's own start finds it complete
        log = logs.get("t", 0)
        assert log is not None
        wal = SinkState.from_json((path / "kafkatier-sink.t.json").read_bytes(), path).wal
        assert wal is not None and records_present(log, wal, wal.partitions[0]) == 40


def test_a_sink_is_not_completed_by_itself_nor_while_an_instance_holds_its_lock(
    tmp_path: Path,
) -> None:
    path = half_appended(tmp_path)
    fd = os.open(lock_path(path, "t"), os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # an instance of sink "t", waiting for its turn
        with LogDirectory(path) as logs:
            assert complete_other_sinks(logs, "another", 1) == 0
    finally:
        os.close(fd)
    with LogDirectory(path) as logs:
        assert complete_other_sinks(logs, "t", 1) == 0  # its own recovery's work, not this
        log = logs.get("t", 0)
        assert log is not None and len(committed_values(log)) == 10  # still held back


@pytest.mark.parametrize("command", ["produce", "clean"])
def test_kafkatier_produce_and_clean_complete_it(
    tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = half_appended(tmp_path)
    records = tmp_path / "more.jsonl"
    records.write_text("".join(json.dumps({"value": f"p{i}"}) + "\n" for i in range(5)))
    args = ["produce", str(path), "--topic", "t", "--input", str(records)]
    if command == "clean":
        args = ["clean", str(path), "--config", "retention.ms=-1"]
    assert main(args) == 0, capsys.readouterr().err
    with LogDirectory(path) as logs:
        log = logs.get("t", 0)
        assert log is not None
        values = committed_values(log)
    expected = [f"value-{i}".encode() for i in range(10)] + [
        f"value-{i}".encode() for i in range(40)]
    if command == "produce":
        expected += [f"p{i}".encode() for i in range(5)]  # visible: behind a closed transaction
    assert values == expected


def test_another_sinks_next_batch_completes_it(spark: Any, tmp_path: Path) -> None:
    """The tester's case: sink "b" writing to the partition after sink "t" died in its
    append; b's rows were held back behind t's open transaction until t started again."""
    path = half_appended(tmp_path)
    sink = KafkaLogSink(path, topic="t", sink_id="b")
    sink(spark.range(0, 25, 1, 1).selectExpr("CAST(id AS STRING) AS value"), 0)
    sink.close()
    with LogDirectory(path) as logs:
        log = logs.get("t", 0)
        assert log is not None
        values = committed_values(log)
    assert values == [f"value-{i}".encode() for i in range(10)] + [
        f"value-{i}".encode() for i in range(40)] + [str(i).encode() for i in range(25)]
