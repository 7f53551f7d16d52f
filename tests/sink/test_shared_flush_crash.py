"""The sink at 1,024 partitions: crashes and power cuts around its commit decision.

A micro-batch's staging files are its write-ahead log: fsynced before the decision, kept until
the partitions the batch was written to are durable (one syncfs after the batch, or an fsync
per file where syncfs is not trusted; kafkatier.sink.sink). Here many partitions (small
segments, so some roll) are written, the sink dies at a chosen step, and then the log dir loses
whatever no fsync covered (power_loss.py: SIGKILL alone loses nothing); the next instance
recovers. Every row must end up committed exactly once, as kafka-python's reader sees the
segment files, with no aborted copy.

The driver subprocess (crash_driver.py) writes 1,024 partitions and is SIGKILLed between batch
1's staging flush and its commit decision. The other steps are cut in-process, over 256
partitions (a crash hook that raises, as test_epoch_rotation.py does: no Spark start per step):
after most partitions got the decided batch, after all of them did (nothing of it durable in
the partitions: the write-ahead log completes it), and right after the decision. Both ways of
making many partitions durable are cut: one syncfs of the filesystem and an fsync per file (the
first in-process instance, on a filesystem where syncfs is not trusted).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import power_loss
import pytest
from crash_writer import read_partition
from process_group import kill_group, spawn

from kafkatier.sink import flushes
from kafkatier.sink import sink as sink_module
from kafkatier.sink.hooks import CRASH_ENV
from kafkatier.sink.sink import KafkaLogSink
from kafkatier.storage import fsutil
from kafkatier.storage.verify.paths import verify_paths

pytest.importorskip("pyspark", reason="pyspark is needed for the Spark sink crash test")

DRIVER = Path(__file__).resolve().parent / "crash_driver.py"
TOPIC = "events"  # crash_driver.py's topic and sink id
PARTITIONS = 1024  # the driver's; the in-process test writes a quarter of them
ROWS = 4 * PARTITIONS  # per batch: about 3 keyed and 1 keyless row per partition
KEYS = 1 << 30  # every keyed row its own key
SEGMENT_BYTES = 700  # a roll every few batches
RUN_TIMEOUT = 300
COMMIT = 1


class Died(BaseException):
    """The in-process crash (a BaseException, as nothing may swallow a SIGKILL)."""


def rows(spark: Any, start: int, stop: int) -> Any:
    """Values ``start..stop`` as crash_driver.py's stream has them, in two Spark tasks."""
    return spark.range(start, stop, 1, 2).selectExpr(
        "CAST(id AS STRING) AS value",
        f"CASE WHEN id % 4 = 0 THEN NULL ELSE CAST(id % {KEYS} AS STRING) END AS key",
    )


def new_sink(log_dir: Path, partitions: int = PARTITIONS) -> KafkaLogSink:
    config = {"segment.bytes": str(SEGMENT_BYTES)}
    return KafkaLogSink(log_dir, topic=TOPIC, partitions=partitions, compression="lz4",
                        config=config)  # fmt: skip


def state(log_dir: Path) -> dict[str, Any]:
    result: dict[str, Any] = json.loads((log_dir / f"kafkatier-sink.{TOPIC}.json").read_text())
    return result


def committed(log_dir: Path) -> tuple[Counter[int], set[int], int]:
    """The values committed (a producer's rows up to its COMMIT marker), the partitions
    holding any, and how many transactions are still open."""
    values: Counter[int] = Counter()
    partitions: set[int] = set()
    still_open = 0
    for directory in sorted(log_dir.glob(f"{TOPIC}-*")):
        pending: dict[int, list[int]] = {}
        for batch in read_partition(directory):
            if batch.control:
                done = pending.pop(batch.pid, [])
                if batch.marker is not None and batch.marker[0] == COMMIT and done:
                    values.update(done)
                    partitions.add(int(directory.name.rsplit("-", 1)[1]))
            elif batch.transactional:
                pending.setdefault(batch.pid, []).extend(int(r[3]) for r in batch.records)
        still_open += sum(1 for open_rows in pending.values() if open_rows)
    return values, partitions, still_open


def check_exactly_once(log_dir: Path, rows_written: int, partitions_written: int) -> None:
    values, partitions, still_open = committed(log_dir)
    assert still_open == 0
    assert sorted(values) == list(range(rows_written))  # each row exactly once
    assert len(partitions) == partitions_written
    assert verify_paths([log_dir]) == []


# ------------------------------------------------------------------------- driver subprocess


def run_driver(tmp: Path, crash: str, target: int) -> int:
    env = {k: v for k, v in os.environ.items() if k != CRASH_ENV}
    env[power_loss.ENV] = str(tmp / "fsyncs.jsonl")
    env[CRASH_ENV] = crash
    shape = [target, ROWS, PARTITIONS, KEYS, SEGMENT_BYTES]
    args = [str(tmp / "logs"), str(tmp / "chk"), str(tmp / "local"), *map(str, shape)]
    proc = spawn(DRIVER, args, env, tmp / "driver.err")
    try:
        rc: int | None = proc.wait(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        rc = None
    killed = kill_group(proc)  # also the JVM of a driver that killed itself
    return killed if rc is None else rc


def sigkill_and_cut(tmp: Path, crash: str, rng: random.Random) -> power_loss.Loss:
    logs = tmp / "logs"
    durable = power_loss.durable_files(logs)
    rc = run_driver(tmp, crash, target=int(crash.rsplit(":", 1)[1]))
    assert rc == -signal.SIGKILL, f"{crash}: driver exited {rc}, see {tmp}/driver.err"
    return power_loss.lose_unsynced(logs, tmp / "fsyncs.jsonl", durable, rng)


def test_sigkill_between_the_staging_flush_and_the_commit(spark: Any, tmp_path: Path) -> None:
    (tmp_path / "local").mkdir()
    logs = tmp_path / "logs"
    lost = sigkill_and_cut(tmp_path, "after-stage-sync:1", random.Random(1024))
    after = state(logs)
    assert after["last_committed_batch"] == 0 and after["wal"]["batch_id"] == 0
    assert len(after["wal"]["parts"]) == 5 * PARTITIONS
    assert lost["syncfs"] > 0, lost  # batch 0's 1,024 partitions made durable by one syncfs
    assert list(logs.glob("kafkatier-sink.events.wal.1-*")), "batch 1's staging files"
    sink = new_sink(logs)  # the next instance: recovery, then Spark's replay of batch 1
    for batch in (1, 2):
        sink(rows(spark, batch * ROWS, (batch + 1) * ROWS), batch)
    sink.close()
    check_exactly_once(logs, 3 * ROWS, PARTITIONS)
    assert not list(logs.glob("kafkatier-sink.events.wal.*"))


# ---------------------------------------------------------------------------------- in-process


def die_at(point: str, nth: int = 1) -> Callable[[int], Callable[[str], None]]:
    """In place of ``hooks.crash_points``: a crash hook raising the ``nth`` time the sink
    reaches ``point``."""
    reached = [0]

    def crash(name: str) -> None:
        if name == point:
            reached[0] += 1
            if reached[0] == nth:
                raise Died(name)

    return lambda batch_id: crash


def record_syncs(monkeypatch: pytest.MonkeyPatch, record: Path) -> None:
    """This process's fsyncs and syncfs recorded in ``record`` (power_loss.py)."""
    for target, name, replacement in power_loss.recorders(str(record)):
        monkeypatch.setattr(target, name, replacement)


def test_power_cuts_after_the_commit_decision(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = tmp_path / "fsyncs.jsonl"
    logs = tmp_path / "logs"
    rng = random.Random(7)
    record_syncs(monkeypatch, record)
    partitions, size = PARTITIONS // 4, ROWS // 4
    sink = new_sink(logs, partitions)
    with monkeypatch.context() as patch:  # the first instance's log dir fsyncs each file
        patch.setattr(fsutil, "syncfs_trusted", lambda path: False)
        patch.setattr(flushes, "MOST_BATCHES", 1)  # batch 0's flush not deferred
        sink(rows(spark, 0, size), 0)
    sink(rows(spark, size, size + 8), 1)  # a few partitions, its flush deferred
    start = size + 8
    durable: dict[str, int] = {}  # the record holds every fsync since the log dir was created
    steps = [(2, "after-append"), (3, "after-appends"), (4, "after-decide")]
    total: power_loss.Loss = Counter()
    for batch, point in steps:
        nth = partitions * 3 // 4 if point == "after-append" else 1  # most partitions written
        with monkeypatch.context() as patch:
            patch.setattr(sink_module, "crash_points", die_at(point, nth))
            patch.setattr(sink, "_recover_after_failure", lambda: None)  # dead
            with pytest.raises(Died):
                sink(rows(spark, start, start + size), batch)
        decided = state(logs)
        assert decided["last_committed_batch"] == decided["wal"]["batch_id"] == batch
        waiting = [1] if batch == 2 else []  # batch 1's flush deferred; a recovery flushes all
        assert [wal["batch_id"] for wal in decided["deferred"]] == waiting
        lost = power_loss.lose_unsynced(logs, record, durable, rng)
        if point != "after-decide":  # the batch reached the partitions, not their disk
            assert lost["files_cut"] + lost["files_gone"] > partitions // 4, lost
        total += lost
        record_syncs(monkeypatch, record)
        durable = power_loss.durable_files(logs)
        sink = new_sink(logs, partitions)  # the next instance: recovery completes the batch
        sink(rows(spark, start, start + size), batch)  # Spark's replay: skipped
        assert state(logs)["last_committed_batch"] == batch
        start += size
    sink.close()
    assert total["deferred_lost"] > 0 and total["syncfs"] > 0, total
    check_exactly_once(logs, start, partitions)
    assert not list(logs.glob("kafkatier-sink.events.wal.*"))
