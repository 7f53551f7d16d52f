"""SIGKILL the Spark driver at chosen and random points; every row must be committed once.

Each run of crash_driver.py is one query (re)start on the same checkpoint: Spark replays the
batch it was in, the sink completes the batch the dead run decided, if any. Chosen points come
from KAFKATIER_SINK_CRASH (the sink kills itself once its staging files are durable but before
the commit decision, right after the decision, after the first partition's append, after every
append but before the partitions are durable); random ones kill the whole process group (driver
and JVM) from outside after a random delay. Nothing of an undecided batch reaches a partition,
so even a reader of uncommitted records sees every row once.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from process_group import kill_group, spawn

from kafkatier.sink.hooks import CRASH_ENV
from kafkatier.storage.arrow.log import read_arrow
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.reader import IsolationLevel
from kafkatier.storage.partitioner import default_partition
from kafkatier.storage.verify.paths import verify_paths

pytest.importorskip("pyspark", reason="pyspark is needed for the Spark sink crash test")

DRIVER = Path(__file__).resolve().parent / "crash_driver.py"
STATE = "kafkatier-sink.events.json"
TARGET = 5  # batches 0..5
ROWS = 40
# each fires at its first occurrence in its run: the runs die in batches 0, 0 (replayed), 1, 2
CHOSEN = ["after-stage-sync", "after-decide", "after-append", "after-appends"]
RUN_TIMEOUT = 300


def _epoch(tmp: Path) -> int:
    try:
        return int(json.loads((tmp / "logs" / STATE).read_text())["producer_epoch"])
    except (FileNotFoundError, ValueError, KeyError):
        return -1


def _run(tmp: Path, crash: str | None = None, kill_delay: float | None = None) -> int:
    """One driver run; ``kill_delay``: SIGKILL it that long after its sink starts writing
    (its first batch bumps the producer epoch)."""
    env = {k: v for k, v in os.environ.items() if k != CRASH_ENV}
    if crash:
        env[CRASH_ENV] = crash
    args = [str(tmp / "logs"), str(tmp / "chk"), str(tmp / "local"), str(TARGET), str(ROWS)]
    epoch = _epoch(tmp)
    proc = spawn(DRIVER, args, env, tmp / "driver.err")
    deadline = time.monotonic() + RUN_TIMEOUT
    while proc.poll() is None and time.monotonic() < deadline:
        if kill_delay is not None and _epoch(tmp) > epoch:
            time.sleep(kill_delay)
            break
        time.sleep(0.05)
    rc = proc.poll()
    killed = kill_group(proc)  # also the JVM of a driver that killed itself
    return killed if rc is None else rc


def _state(tmp: Path) -> dict[str, Any]:
    result: dict[str, Any] = json.loads((tmp / "logs" / STATE).read_text())
    return result


def _read(log_dir: Path, isolation: IsolationLevel) -> dict[int, pa.Table]:
    with LogDirectory(log_dir) as logs:
        return {log.partition: read_arrow(log, isolation=isolation) for log in logs}


def test_sigkill_anywhere_commits_every_row_exactly_once(tmp_path: Path) -> None:
    (tmp_path / "local").mkdir()
    rng = random.Random(4)
    for point in CHOSEN:
        rc = _run(tmp_path, crash=point)
        assert rc == -signal.SIGKILL, f"{point}: driver exited {rc}, see {tmp_path}/driver.err"
        assert list((tmp_path / "logs").glob("kafkatier-sink.events.wal.*"))  # inside a batch
    for _ in range(2):
        _run(tmp_path, kill_delay=rng.uniform(0.0, 4.0))
    assert _run(tmp_path) == 0, (tmp_path / "driver.err").read_text()[-3000:]

    state = _state(tmp_path)
    assert state["last_committed_batch"] == TARGET and state["inflight"] is None
    assert verify_paths([tmp_path / "logs"]) == []
    committed = _read(tmp_path / "logs", IsolationLevel.READ_COMMITTED)
    seen: list[int] = []
    for partition, table in committed.items():
        values = [int(v) for v in table.column("value").to_pylist()]
        assert values == sorted(values), f"partition {partition} out of input order"
        for key in table.column("key").to_pylist():
            if key is not None:
                assert default_partition(key, 3) == partition
        seen.extend(values)
    assert sorted(seen) == list(range((TARGET + 1) * ROWS))  # each row exactly once
    uncommitted = _read(tmp_path / "logs", IsolationLevel.READ_UNCOMMITTED)
    assert sum(t.num_rows for t in uncommitted.values()) == len(seen)  # no aborted copy
    assert state["producer_epoch"] >= len(CHOSEN)  # every restart that wrote bumped it
