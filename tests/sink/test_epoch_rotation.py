"""Producer id rotation: a sink whose epochs are exhausted moves to a new producer id at epoch 0.

Crashes are simulated in-process: the sink's crash hook raises instead of SIGKILL-ing the driver
and the dying instance skips its in-process recovery, so its decided batch stays incomplete on
disk for the next instance, as after a real crash (segments are written without a userspace
buffer). The next instance completes it with the old id, at the fencing epoch, before it writes
with the new one.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kafkatier.sink import append as append_module
from kafkatier.sink import sink as sink_module
from kafkatier.sink.bookkeeping import (
    MAX_EPOCH,
    ProducerFencedError,
    SinkState,
    derive_producer_id,
    load_state,
    save_state,
)
from kafkatier.sink.hooks import CRASH_ENV
from kafkatier.sink.sink import KafkaLogSink
from kafkatier.sink.txn import open_txn_logs
from kafkatier.sink.wal import Wal
from kafkatier.storage.arrow.log import read_arrow
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.log import Log
from kafkatier.storage.log.reader import IsolationLevel
from kafkatier.storage.verify.paths import verify_paths
from kafkatier.storage.wire import ControlType

TOPIC = "events"  # also crash_driver.py's topic and sink id, with as many partitions
PARTITIONS = 3
DRIVER = Path(__file__).resolve().parent / "crash_driver.py"
DRIVER_ROWS = 30
RUN_TIMEOUT = 300
OLD_ID = derive_producer_id(TOPIC)
NEW_ID = derive_producer_id(TOPIC, 1)


Marker = tuple[int, ControlType]  # a transaction marker's producer epoch and type


class Died(BaseException):
    """The simulated crash (a BaseException, as nothing may swallow a SIGKILL)."""


def rows(spark: Any, start: int, stop: int) -> Any:
    """Ids ``start..stop`` as values, spread over every partition in two Spark tasks."""
    return spark.range(start, stop, 1, 2).selectExpr(
        "CAST(id AS STRING) AS value", f"CAST(id % {PARTITIONS} AS INT) AS partition"
    )


def new_sink(log_dir: Path) -> KafkaLogSink:
    return KafkaLogSink(log_dir, topic=TOPIC, partitions=PARTITIONS)


def set_stored_epoch(log_dir: Path, epoch: int) -> None:
    state = load_state(log_dir, TOPIC)
    state.producer_epoch = epoch
    save_state(log_dir, state)


def values(log_dir: Path, isolation: IsolationLevel) -> Counter[int]:
    with LogDirectory(log_dir) as logs:
        tables = [read_arrow(log, isolation=isolation) for log in logs]
    return Counter(int(v) for t in tables for v in t.column("value").to_pylist())


def markers(log: Log, producer_id: int) -> list[Marker]:
    """(epoch, COMMIT or ABORT) of the producer's markers in one partition, in log order."""
    found = []
    for segment in log.segments:
        for batch in segment.batches():
            if batch.is_control and batch.producer_id == producer_id:
                found.append((batch.producer_epoch, batch.control_record()[0]))
    return found


def end_offsets(log_dir: Path) -> dict[int, int]:
    with LogDirectory(log_dir) as logs:
        return {log.partition: log.log_end_offset for log in logs}


def die_in_batch_at(point: str) -> Callable[[int], Callable[[str], None]]:
    """In place of ``hooks.crash_points``: a hook raising at ``point``."""

    def crash(name: str) -> None:
        if name == point:
            raise Died(name)

    return lambda batch_id: crash


def crash_at_the_last_epoch(
    spark: Any, log_dir: Path, point: str, mp: pytest.MonkeyPatch
) -> set[int]:
    """Batch 0 by a first instance, then an instance at epoch MAX_EPOCH - 1 (the last one a
    client may hold) that dies at ``point`` in batch 1. Returns the partitions it wrote batch 1
    to (with its COMMIT marker, one write each)."""
    new_sink(log_dir)(rows(spark, 0, 60), 0)
    set_stored_epoch(log_dir, MAX_EPOCH - 2)
    dying = new_sink(log_dir)
    with mp.context() as patch:
        patch.setattr(sink_module, "crash_points", die_in_batch_at(point))
        patch.setattr(dying, "_recover_after_failure", lambda: None)  # dead: no recovery
        with pytest.raises(Died):
            dying(rows(spark, 60, 120), 1)
    state = load_state(log_dir, TOPIC)
    assert (state.producer_id, state.producer_epoch) == (OLD_ID, MAX_EPOCH - 1)
    decided = point != "after-stage-sync"
    assert state.wal is not None and state.wal.pending() == decided
    assert state.wal.batch_id == state.last_committed_batch == (1 if decided else 0)
    with LogDirectory(log_dir) as logs:
        assert not open_txn_logs(logs, [TOPIC], OLD_ID)  # a partition has all of it or none
        return {log.partition for log in logs if (MAX_EPOCH - 1, ControlType.COMMIT) in
                markers(log, OLD_ID)}  # fmt: skip


def check_new_id(log_dir: Path, epoch: int, old_markers: dict[int, list[Marker]]) -> None:
    """Every partition: the new id at ``epoch`` with no open transaction; the old id with none
    open either, and its markers exactly ``old_markers[partition]``."""
    state = load_state(log_dir, TOPIC)
    assert (state.producer_id, state.producer_epoch) == (NEW_ID, epoch)
    assert state.last_committed_batch == 2
    assert state.producer_generation == 1
    assert state.previous_producer_id is None and state.inflight is None
    with LogDirectory(log_dir) as logs:
        assert len(logs.logs) == PARTITIONS
        for log in logs:
            new = log.producer_state.last_entry(NEW_ID)
            assert new is not None and new.producer_epoch == epoch
            assert new.current_txn_first_offset is None
            old = log.producer_state.last_entry(OLD_ID)
            assert old is not None and old.current_txn_first_offset is None
            assert markers(log, OLD_ID) == old_markers[log.partition], log.partition


def test_exhausted_epoch_moves_the_sink_to_a_new_producer_id(spark: Any, tmp_path: Path) -> None:
    first = new_sink(tmp_path)
    first(rows(spark, 0, 60), 0)
    set_stored_epoch(tmp_path, MAX_EPOCH - 1)  # no next epoch for the next instance
    second = new_sink(tmp_path)
    second(rows(spark, 60, 120), 1)
    second(rows(spark, 120, 180), 2)
    assert verify_paths([tmp_path]) == []
    assert values(tmp_path, IsolationLevel.READ_COMMITTED) == Counter(range(180))
    check_new_id(tmp_path, 0, {p: [(0, ControlType.COMMIT)] for p in range(PARTITIONS)})
    ends = end_offsets(tmp_path)
    # the first instance's epoch is 0 too: only the producer id tells it is an older instance
    with pytest.raises(ProducerFencedError, match=f"producer id {NEW_ID} epoch 0"):
        first(rows(spark, 180, 200), 3)
    assert end_offsets(tmp_path) == ends
    assert load_state(tmp_path, TOPIC).last_committed_batch == 2


WRITTEN_BY_THE_DEAD = {  # how many partitions the dying instance wrote batch 1 to
    "after-stage-sync": 0,  # undecided: nothing written, Spark's replay writes it (new id)
    "after-decide": 0,  # decided: the next instance writes it with the old id, the replay skips
    "after-append": 1,  # decided, one partition written before it died
}


@pytest.mark.parametrize("point", list(WRITTEN_BY_THE_DEAD))
def test_the_old_ids_decided_batch_is_completed_before_the_switch(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    written = crash_at_the_last_epoch(spark, tmp_path, point, monkeypatch)
    assert len(written) == WRITTEN_BY_THE_DEAD[point]
    restarted = new_sink(tmp_path)
    restarted(rows(spark, 60, 120), 1)  # Spark replays the batch the dead instance was in
    restarted(rows(spark, 120, 180), 2)
    assert verify_paths([tmp_path]) == []
    assert values(tmp_path, IsolationLevel.READ_COMMITTED) == Counter(range(180))
    assert values(tmp_path, IsolationLevel.READ_UNCOMMITTED) == Counter(range(180))  # no copy
    # the old id's markers: batch 0's, then batch 1's (the dead instance's own, else the fencing
    # epoch's of the instance that completed it), unless batch 1 was never decided
    batch_1 = {p: [] if point == "after-stage-sync" else [(MAX_EPOCH, ControlType.COMMIT)]
               for p in range(PARTITIONS)}  # fmt: skip
    for p in written:
        batch_1[p] = [(MAX_EPOCH - 1, ControlType.COMMIT)]
    check_new_id(tmp_path, 0, {p: [(0, ControlType.COMMIT), *batch_1[p]] for p in batch_1})


def test_a_crash_after_the_switch_converges(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rotating instance dies after saving the new id, while it completes the old id's
    decided batch: the next instance (epoch 1 of the new id) completes the rest with the old id."""
    assert crash_at_the_last_epoch(spark, tmp_path, "after-decide", monkeypatch) == set()
    real_replay = append_module.replay

    def complete_one_then_die(wal: Wal, *args: Any, **kwargs: Any) -> int:
        real_replay(wal.only(1), *args, **kwargs)
        raise Died("while completing the old id's batch")

    with monkeypatch.context() as patch:
        patch.setattr(append_module, "replay", complete_one_then_die)
        with pytest.raises(Died):
            new_sink(tmp_path)(rows(spark, 60, 120), 1)
    state = load_state(tmp_path, TOPIC)
    assert (state.producer_id, state.producer_epoch, state.previous_producer_id) == (
        NEW_ID, 0, OLD_ID
    )  # fmt: skip
    final = new_sink(tmp_path)
    final(rows(spark, 60, 120), 1)  # replay: committed by the recovery, skipped
    final(rows(spark, 120, 180), 2)
    assert verify_paths([tmp_path]) == []
    assert values(tmp_path, IsolationLevel.READ_UNCOMMITTED) == Counter(range(180))
    assert values(tmp_path, IsolationLevel.READ_COMMITTED) == Counter(range(180))
    one_commit = [(0, ControlType.COMMIT), (MAX_EPOCH, ControlType.COMMIT)]
    check_new_id(tmp_path, 1, {p: one_commit for p in range(PARTITIONS)})


def drive(tmp: Path, crash: str | None = None) -> int:
    """One run of crash_driver.py (batches 0..2) on the same checkpoint; its exit status."""
    env = {k: v for k, v in os.environ.items() if k != CRASH_ENV}
    if crash:
        env[CRASH_ENV] = crash
    args = [tmp / "logs", tmp / "chk", tmp / "local", "2", str(DRIVER_ROWS)]
    with open(tmp / "driver.err", "ab") as err:
        proc = subprocess.Popen(
            [sys.executable, str(DRIVER), *map(str, args)],
            env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=err,
        )  # fmt: skip
        try:
            return proc.wait(RUN_TIMEOUT)
        finally:  # the JVM of a driver that killed itself is still running
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_sigkill_at_the_last_epoch_then_rotation(tmp_path: Path) -> None:
    """A real SIGKILL after the first partition's append of batch 1 at epoch MAX_EPOCH - 1; the
    restart completes the batch with the old id, then writes with the new id."""
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    (tmp_path / "local").mkdir()
    save_state(log_dir, SinkState(TOPIC, OLD_ID, MAX_EPOCH - 2))  # the next run: the last epoch
    rc = drive(tmp_path, crash="after-append:1")
    assert rc == -signal.SIGKILL, (tmp_path / "driver.err").read_text()[-3000:]
    dead_own = (MAX_EPOCH - 1, ControlType.COMMIT)
    with LogDirectory(log_dir) as logs:
        assert not open_txn_logs(logs, [TOPIC], OLD_ID)
        written = {log.partition for log in logs if markers(log, OLD_ID).count(dead_own) == 2}
    assert len(written) == 1
    assert drive(tmp_path) == 0, (tmp_path / "driver.err").read_text()[-3000:]
    assert verify_paths([log_dir]) == []
    every_row = Counter(range(3 * DRIVER_ROWS))
    assert values(log_dir, IsolationLevel.READ_COMMITTED) == every_row
    assert values(log_dir, IsolationLevel.READ_UNCOMMITTED) == every_row
    check_new_id(
        log_dir,
        0,
        {
            p: [dead_own, dead_own if p in written else (MAX_EPOCH, ControlType.COMMIT)]
            for p in range(PARTITIONS)
        },
    )
