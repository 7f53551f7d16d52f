"""A sink whose streaming query stops normally leaves each partition as a Kafka broker leaves it
after a clean shutdown: indexes trimmed, producer snapshots at the log end, the clean-shutdown
marker; the log dir then opens with nothing to recover, and a restarted query appends on."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from kafkatier.sink import KafkaLogSink
from kafkatier.storage.checkpoint.metadata import CleanShutdownFile
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.producer.snapshot import list_snapshot_files
from kafkatier.storage.verify.paths import verify_paths
from kafkatier.storage.wire import OFFSET_INDEX_ENTRY, TIME_INDEX_ENTRY


def run_query(spark: Any, sink: KafkaLogSink, tmp_path: Path, files: range) -> None:
    """A query over JSON files, to its natural end: ``availableNow`` reads what is there, one
    file a batch, and stops (stopping a query mid-batch interrupts that batch instead)."""
    landing = tmp_path / "landing"
    landing.mkdir(exist_ok=True)
    for n in files:
        (landing / f"{n:03d}.json").write_text(
            "".join(json.dumps({"key": str(i % 7), "value": f"{n}-{i}"}) + "\n" for i in range(40)))
    stream = (spark.readStream.schema("key STRING, value STRING").option("maxFilesPerTrigger", 1)
              .json(str(landing)))  # fmt: skip
    query = (stream.writeStream.foreachBatch(sink).trigger(availableNow=True)
             .option("checkpointLocation", str(tmp_path / "chk")).start())  # fmt: skip
    assert query.awaitTermination(120)
    assert query.exception() is None


def wait_for_clean_close(logs: Path) -> None:
    deadline = time.monotonic() + 60  # the listener bus delivers the end a moment later
    while not CleanShutdownFile(logs).exists():
        assert time.monotonic() < deadline, "the sink did not close after its query stopped"
        time.sleep(0.1)


def test_a_stopped_query_leaves_a_cleanly_shut_down_log_dir(spark: Any, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    sink = KafkaLogSink(logs, topic="events", partitions=2)
    run_query(spark, sink, tmp_path, range(4))
    wait_for_clean_close(logs)
    for index in [*logs.rglob("*.index"), *logs.rglob("*.timeindex")]:
        entry = (OFFSET_INDEX_ENTRY if index.suffix == ".index" else TIME_INDEX_ENTRY).size
        assert index.stat().st_size % entry == 0 and index.stat().st_size < 4096, index
    with LogDirectory(logs) as opened:
        assert opened.had_clean_shutdown  # nothing to recover
        for log in opened:
            snapshots = [s.offset for s in list_snapshot_files(log.directory)]
            assert log.log_end_offset in snapshots
    assert verify_paths([logs]) == []
    run_query(spark, sink, tmp_path, range(4, 7))  # the same sink, the query restarted
    wait_for_clean_close(logs)
    with LogDirectory(logs) as opened:
        assert opened.had_clean_shutdown
        assert sum(log.log_end_offset for log in opened) == 7 * 40 + 2 * 7  # + COMMIT markers


def test_watching_for_the_end_converts_no_progress_event(
    spark: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    """The sink's listener takes Spark's events as they come: pyspark's wrapper would turn
    every micro-batch's progress into Python objects first (67-241 ms of the driver's Python an
    event, six timed), beside the next micro-batch. The end still closes the sink."""
    import pyspark.sql.streaming.listener as listener

    converted: list[object] = []
    real = listener.QueryProgressEvent.fromJObject.__func__  # type: ignore[attr-defined]
    counted = classmethod(lambda cls, j: converted.append(j) or real(cls, j))
    monkeypatch.setattr(listener.QueryProgressEvent, "fromJObject", counted)
    logs = tmp_path / "logs"
    run_query(spark, KafkaLogSink(logs, topic="events", partitions=2), tmp_path, range(3))
    wait_for_clean_close(logs)
    assert converted == []


EXITING = """
import json, sys
from pathlib import Path
from pyspark.sql import SparkSession
from kafkatier.sink import KafkaLogSink

tmp = Path(sys.argv[1])
landing = tmp / "landing"
landing.mkdir()
for n in range(3):
    (landing / f"{n:03d}.json").write_text(
        "".join(json.dumps({"key": str(i % 7), "value": f"{n}-{i}"}) + "\\n" for i in range(40)))
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "2").getOrCreate())
stream = (spark.readStream.schema("key STRING, value STRING").option("maxFilesPerTrigger", 1)
          .json(str(landing)))
query = (stream.writeStream.foreachBatch(KafkaLogSink(tmp / "logs", topic="events", partitions=2))
         .trigger(availableNow=True).option("checkpointLocation", str(tmp / "chk")).start())
query.awaitTermination()
"""


def test_a_driver_that_exits_as_its_query_ends_closes_the_logs(tmp_path: Path) -> None:
    """The usual end of a script (``awaitTermination()``, then nothing): the driver's Python
    exited before the listener's event arrived, so the logs were never closed (no marker, the
    last batches' staging files left for the next start to replay). The exit closes them, its
    threads refusing work by then (the log flusher's pool: the close runs in the caller)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run([sys.executable, "-c", EXITING, str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]  # the close at exit failed
    logs = tmp_path / "logs"
    assert CleanShutdownFile(logs).exists()
    assert not list(logs.rglob("*.kbatches"))  # no staging file of a batch left to replay
    with LogDirectory(logs) as opened:
        assert opened.had_clean_shutdown
        assert sum(log.log_end_offset for log in opened) == 3 * 40 + 3 * 2  # records, markers
