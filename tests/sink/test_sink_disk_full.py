"""The sink on a real full filesystem (``small_fs``): a micro-batch that runs out of space fails
with an error naming the file and ENOSPC; read_committed shows none of it and the log verifies;
once space returns, the batch replayed (a restarted query, a new sink instance) lands exactly
once. Staging files are gone after the failed batch: it fails before its commit decision (the
staging files do not fit, or the sink finds no room for the batch in the log dir); a batch whose
appends fail after the decision waits in the write-ahead log instead."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from small_fs import fill, small_fs
from test_sink import read_topic, state

from kafkatier.sink import KafkaLogSink
from kafkatier.sink import sink as sink_module
from kafkatier.storage.errors import LogWriteError
from kafkatier.storage.verify.paths import verify_paths


def frame(spark: Any, start: int, rows: int) -> Any:
    return spark.range(start, start + rows, 1, 2).selectExpr(
        "CAST(CONCAT(lpad(CAST(id AS STRING), 8, '0'), repeat('x', 300)) AS BINARY) AS value",
        "CAST(CONCAT('k', id % 101) AS BINARY) AS key",
    )


@pytest.mark.parametrize("full", ["staging", "log"])
def test_a_batch_into_a_full_disk_fails_and_replays_exactly_once(
    spark: Any, tmp_path: Path, full: str
) -> None:
    """``full``: what runs out of space first: the executors' staging files (on the same
    filesystem as the log), or the driver's appends to the log (staging elsewhere)."""
    with small_fs(tmp_path / "fs", 4096) as fs:
        logs = fs / "logs"
        staging = fs / "staging" if full == "staging" else tmp_path / "staging"
        sink = KafkaLogSink(logs, topic="events", partitions=2, staging=staging)
        sink(frame(spark, 0, 2000), 0)
        filler = fill(fs, leave=400 << 10)  # the next batch (about 3 MB) cannot fit
        with pytest.raises(Exception, match="No space left on device") as caught:
            sink(frame(spark, 2000, 10_000), 1)
        assert str(fs / full) in str(caught.value)
        # the sink's own one-line error, also where an executor's staging write failed (a
        # Spark stage failure with the cause further down, before)
        assert isinstance(caught.value, LogWriteError), repr(caught.value)[:300]
        assert "\n" not in str(caught.value), str(caught.value)
        assert read_topic(logs, "events").num_rows == 2000
        assert verify_paths([logs]) == []
        assert not [p for p in staging.rglob("*") if p.is_file()], "staging files left behind"
        filler.unlink()
        subprocess.run(["mount", "-o", "remount,size=16384k", str(fs)], check=True)
        replay = KafkaLogSink(logs, topic="events", partitions=2, staging=staging)
        replay(frame(spark, 2000, 10_000), 1)
        values = sorted(read_topic(logs, "events")["value"].to_pylist())
        assert [int(v[:8]) for v in values] == list(range(12_000))
        assert state(logs, "events")["inflight"] is None
        assert verify_paths([logs]) == []


def test_a_decided_batch_the_disk_cannot_take_waits_in_the_write_ahead_log(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer fills the disk after the sink's check for room: the batch is decided when
    its appends fail, so it stays in the write-ahead log (staging files kept) with only some
    partitions holding it; once space returns, the next instance completes it and Spark's
    replay of the batch id is skipped."""
    with small_fs(tmp_path / "fs", 4096) as fs:
        logs, staging = fs / "logs", tmp_path / "staging"
        sink = KafkaLogSink(logs, topic="events", partitions=2, staging=staging)
        sink(frame(spark, 0, 2000), 0)
        filler = fill(fs, leave=400 << 10)
        monkeypatch.setattr(sink_module, "check_space", lambda *args: None)  # the race lost
        with pytest.raises(Exception, match="No space left on device") as caught:
            sink(frame(spark, 2000, 10_000), 1)
        assert str(logs) in str(caught.value)
        assert state(logs, "events")["last_committed_batch"] == 1  # decided
        assert verify_paths([logs]) == []
        assert 2000 <= read_topic(logs, "events").num_rows < 12_000
        assert [p for p in staging.rglob("*") if p.is_file()], "the write-ahead log is kept"
        filler.unlink()
        subprocess.run(["mount", "-o", "remount,size=16384k", str(fs)], check=True)
        later = KafkaLogSink(logs, topic="events", partitions=2, staging=staging)
        later(frame(spark, 2000, 10_000), 1)  # recovery completes it; the replay is skipped
        later.close()
        values = sorted(read_topic(logs, "events")["value"].to_pylist())
        assert [int(v[:8]) for v in values] == list(range(12_000))
        assert verify_paths([logs]) == []
        assert not [p for p in staging.rglob("*") if p.is_file()]
