"""``sink.source.offsets``: the offset options resolved against a partition's bounds as Spark's
Kafka source resolves them against a broker's, where the two once differed (no Spark here: the
driver's part, as the data source's planner calls it)."""

from __future__ import annotations

import logging
from pathlib import Path

import pyarrow as pa
import pytest

from kafkatier.sink.source.offsets import ending_offsets, starting_offsets
from kafkatier.sink.source.options import parse_options
from kafkatier.sink.source.plan import survey, topic_partitions
from kafkatier.storage.arrow.log import append_arrow
from kafkatier.storage.errors import OffsetOutOfRangeError
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record

TP = ("t", 0)


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    """Offsets 0 and 1 (timestamps 1000, 2000), then 2 (5000) in a transaction still open:
    the last stable offset is 2, the high watermark 3."""
    with LogDirectory(tmp_path) as logs:
        log = logs.get_or_create(*TP)
        log.append(build_batch([Record(0, 1000, b"a", b"1"), Record(1, 2000, b"b", b"2")]))
        stamps = pa.array([5000], pa.int64())
        table = pa.table({"key": [b"c"], "value": [b"3"], "timestamp": stamps})
        append_arrow(log, table, producer_id=7, producer_epoch=0, base_sequence=0,
                     transactional=True)  # fmt: skip
    return tmp_path


def offsets(path: Path, **options: str) -> tuple[dict[tuple[str, int], int], ...]:
    opts = parse_options({"path": str(path), "subscribe": "t", **options}, streaming=False)
    bounds = survey(opts, topic_partitions(opts))
    return starting_offsets(opts, bounds), ending_offsets(opts, bounds)


def test_a_timestamp_matched_only_past_the_last_stable_offset_is_no_match(log_dir: Path) -> None:
    """Kafka's ListOffsets keeps only offsets below the last fetchable one (the LSO for
    read_committed) and Spark fails a start that matches none: it started at the latest
    offset, silently, as for a match that would be visible."""
    with pytest.raises(OffsetOutOfRangeError, match="startingTimestamp: no record of t-0"):
        offsets(log_dir, startingTimestamp="5000")
    latest = offsets(log_dir, startingTimestamp="5000", startingOffsetsByTimestampStrategy="latest")
    assert latest[0] == {TP: 2}
    assert offsets(log_dir, startingTimestamp="5000", isolationLevel="read_uncommitted")[0] == {
        TP: 2}  # fmt: skip
    assert offsets(log_dir, startingTimestamp="1500")[0] == {TP: 1}
    assert offsets(log_dir, endingTimestamp="5000")[1] == {TP: 2}  # no match at the end: latest


def test_an_end_past_the_latest_offset_is_data_loss(
    log_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Spark's consumer finds nothing past the end: under failOnDataLoss (the default) an
    error, else a warning and the range ends at the latest offset (it failed either way)."""
    beyond = '{"t": {"0": 50}}'
    with pytest.raises(OffsetOutOfRangeError, match="ends at 50, beyond its latest offset 2"):
        offsets(log_dir, endingOffsets=beyond)
    with caplog.at_level(logging.WARNING):
        assert offsets(log_dir, endingOffsets=beyond, failOnDataLoss="false")[1] == {TP: 2}
    assert "reading to 2 (failOnDataLoss=false)" in caplog.text
    uncommitted = offsets(log_dir, endingOffsets=beyond, failOnDataLoss="false",
                          isolationLevel="read_uncommitted")  # fmt: skip
    assert uncommitted[1] == {TP: 3}
