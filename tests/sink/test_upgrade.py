"""A log dir a sink of the version before the write-ahead log left mid-batch (bookkeeping file
version 3): its open transaction is ended as that version's bookkeeping says, committed if its
commit was decided (Spark's replay of the batch is then skipped), else aborted (the replay
writes it), before the new version writes anything."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_sink import read_topic

from kafkatier.sink import KafkaLogSink
from kafkatier.sink.bookkeeping import VERSION, derive_producer_id, state_path
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.reader import IsolationLevel
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record

EPOCH = 3


def left_mid_batch(log_dir: Path, decided: bool) -> None:
    """Batch 5 of the old version: its data in both partitions, no marker, and its version 3
    bookkeeping (``inflight``, decided or not; batch 4 committed)."""
    producer = derive_producer_id("t")
    ends = []
    with LogDirectory(log_dir) as logs:
        logs.create_partitions("t", 2)
        for log in sorted(logs, key=lambda log: log.partition):
            records = [Record(i, 1_700_000_000_000, None, b"old-%d" % i) for i in range(3)]
            log.append(build_batch(records, producer_id=producer, producer_epoch=EPOCH,
                                   base_sequence=0, transactional=True))  # fmt: skip
            ends.append(log.log_end_offset)
    body = {
        "version": 3, "sink_id": "t", "producer_id": producer, "producer_epoch": EPOCH,
        "producer_generation": 0, "previous_producer_id": None, "query_id": None,
        "last_committed_batch": 4, "unflushed_commit": None,
        "inflight": {"batch_id": 5, "commit_decided": decided,
                     "partitions": [["t", 0], ["t", 1]], "ends": ends},
    }  # fmt: skip
    state_path(log_dir, "t").write_text(json.dumps(body))


@pytest.mark.parametrize("decided", [True, False])
def test_a_version_3_batch_is_ended_as_its_bookkeeping_says(
    spark: Any, tmp_path: Path, decided: bool
) -> None:
    log_dir = tmp_path / "logs"
    left_mid_batch(log_dir, decided)
    sink = KafkaLogSink(log_dir, topic="t", partitions=2)
    sink(spark.range(4).selectExpr("CAST(CONCAT('new-', id) AS BINARY) AS value"), 5)
    sink.close()
    values = sorted(read_topic(log_dir, "t")["value"].to_pylist())
    old, new = [b"old-%d" % i for i in range(3)] * 2, [b"new-%d" % i for i in range(4)]
    assert values == sorted(old if decided else new)  # decided: batch 5 is the old one
    everything = read_topic(log_dir, "t", IsolationLevel.READ_UNCOMMITTED)["value"].to_pylist()
    assert sorted(everything) == sorted(old + ([] if decided else new))
    body = json.loads(state_path(log_dir, "t").read_text())
    assert body["version"] == VERSION and body["last_committed_batch"] == 5
    assert body["inflight"] is None and body["unflushed_commit"] is None
