"""SIGKILL during retention or DeleteRecords: reopening always gives a log that verifies clean,
whose log start offset is consistent, and whose records are exactly a suffix of the original
(nothing lost above the new start); finishing the interrupted work then gives what an
uninterrupted run gives.

This file is also the worker: ``python test_retention_crash.py LOG_DIR MODE POINT:N`` opens the
log dir, arms a crash point (SIGKILL the N-th time POINT is reached) and runs one retention mode.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kafka.record.default_records import DefaultRecordBatch

from kafkatier.storage.checkpoint.leader_epoch import LeaderEpochFileCache
from kafkatier.storage.cleaner.retention import delete_old_segments, delete_records
from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.index.lazy import LazyIndex
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.log import Log
from kafkatier.storage.log.segment import LogSegment
from kafkatier.storage.producer.state import ProducerStateManager
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record
from kafkatier.storage.verify.paths import verify_paths

T0 = 1_700_000_000_000
TOPIC, PID = "doomed", 42
SEGMENTS = 8  # rolled segments of one 3-record batch, plus the active one
NOW = T0 + 20_000
MODES: dict[str, dict[str, Any]] = {  # LogConfig settings of each mode (None: DeleteRecords)
    "time": {"retention_ms": NOW - (T0 + 2000) - 1, "file_delete_delay_ms": 60_000},
    "all": {"retention_ms": 1000, "file_delete_delay_ms": 0},
    "size": {"retention_bytes": 1, "file_delete_delay_ms": 0},  # fixed up per log below
    "records": {"file_delete_delay_ms": 0},
}
RECORDS_TARGET = 16  # DeleteRecords: inside the sixth segment [15, 18)


def config(mode: str) -> LogConfig:
    settings: dict[str, Any] = {"segment_index_bytes": 4096, "retention_ms": -1, **MODES[mode]}
    return LogConfig(**settings)


def open_dir(path: Path, mode: str) -> LogDirectory:
    return LogDirectory(path, config_for=lambda _topic: config(mode), clock=lambda: NOW)


def run_mode(log_dir: LogDirectory, mode: str) -> None:
    log = log_dir.logs[(TOPIC, 0)]
    if mode == "records":
        delete_records(log, RECORDS_TARGET, now_ms=NOW, persist_start=log_dir.checkpoint)
    else:
        if mode == "size":  # keep the newest three segments' worth of bytes
            log.config = LogConfig(retention_bytes=3 * log.segments[0].size, retention_ms=-1,
                                   file_delete_delay_ms=0)  # fmt: skip
        delete_old_segments(log, now_ms=NOW)
    log_dir.checkpoint()


# ------------------------------------------------------------------------------- the worker


CRASH_POINTS: dict[str, tuple[Any, str, bool]] = {  # name: (owner, method, kill before?)
    "renamed": (LogSegment, "change_suffix", False),  # n segments renamed .deleted
    # index files renamed, .log not yet: each segment renames its offset index, then its time
    # index (opened or not), so the 2n-th call ends the n-th segment's index renames
    "mid_rename": (LazyIndex, "rename_to", False),
    "snapshot": (ProducerStateManager, "delete_snapshot", False),
    "epoch_flush": (LeaderEpochFileCache, "flush", True),
    "after_roll": (Log, "roll", False),
    "checkpoint": (LogDirectory, "checkpoint", True),
    "after_persist": (LogDirectory, "checkpoint", False),
    "unlink": (Path, "unlink", False),  # the pending removal of .deleted files
}


def arm(spec: str) -> None:
    name, n = spec.split(":")
    owner, method, before = CRASH_POINTS[name]
    original: Callable[..., Any] = getattr(owner, method)
    count = [0]

    def hit() -> None:
        count[0] += 1
        if count[0] >= int(n):
            print(f"CRASHPOINT {spec}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if before:
            hit()
        result = original(*args, **kwargs)
        if not before:
            hit()
        return result

    setattr(owner, method, wrapped)


def worker(argv: list[str]) -> None:
    path, mode, spec = Path(argv[1]), argv[2], argv[3]
    log_dir = open_dir(path, mode)
    arm(spec)
    run_mode(log_dir, mode)
    log_dir.close()
    print("DONE", flush=True)


# ------------------------------------------------------------------------------- the checks


def records_on_disk(directory: Path) -> dict[int, tuple[bytes | None, bytes | None]]:
    """offset -> (key, value) over the live ``.log`` files, read with kafka-python."""
    out = {}
    for path in sorted(directory.glob("*.log")):
        data, pos = path.read_bytes(), 0
        while pos < len(data):
            size = 12 + int.from_bytes(data[pos + 8 : pos + 12], "big")
            for r in DefaultRecordBatch(bytearray(data[pos : pos + size])):
                out[r.offset] = (r.key, r.value)
            pos += size
    return out


def build_original(path: Path) -> None:
    with LogDirectory(path, config_for=lambda _t: config("time"), clock=lambda: T0) as log_dir:
        log = log_dir.get_or_create(TOPIC, 0)
        for i in range(SEGMENTS + 1):
            records = [Record(j, T0 + 1000 * i, b"k%d" % (3 * i + j), b"v%d" % i)
                       for j in range(3)]  # fmt: skip
            log.append(build_batch(records, producer_id=PID, producer_epoch=0,
                                   base_sequence=3 * i))  # fmt: skip
            if i < SEGMENTS:
                log.roll()


@pytest.fixture(scope="module")
def original(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("original") / "logs"
    build_original(path)
    return path


@pytest.fixture(scope="module")
def reference(original: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Each mode run without a crash: (segment bases, log start offset)."""
    out = {}
    for mode in MODES:
        path = Path(shutil.copytree(original, tmp_path_factory.mktemp(mode) / "logs"))
        with open_dir(path, mode) as log_dir:
            run_mode(log_dir, mode)
            log = log_dir.logs[(TOPIC, 0)]
            out[mode] = ([s.base_offset for s in log.segments], log.log_start_offset)
    return out


def check_reopened(path: Path, mode: str, original_records: dict[int, Any],
                   reference: tuple[list[int], int]) -> None:  # fmt: skip
    log_dir = open_dir(path, mode)
    log = log_dir.logs[(TOPIC, 0)]
    directory = log.directory
    assert not list(directory.glob("*.deleted"))
    start, end = log.log_start_offset, log.log_end_offset
    final_bases, final_start = reference
    assert 0 <= start <= final_start and end == max(original_records) + 1
    assert log.segments[0].base_offset <= start
    on_disk = records_on_disk(directory)
    survivors = {o: kv for o, kv in on_disk.items() if o >= start}
    assert survivors == {o: kv for o, kv in original_records.items() if o >= start}
    assert all(original_records[o] == kv for o, kv in on_disk.items())
    problems = [str(p) for p in verify_paths([path]) if p.severity == "error"]
    assert problems == []
    run_mode(log_dir, mode)  # finish the interrupted work
    assert ([s.base_offset for s in log.segments], log.log_start_offset) == reference
    entry = log.producer_state.last_entry(PID)
    if mode == "all":  # no batch left, and Kafka's loader drops the snapshot at the log start
        assert entry is None or entry.last_seq == 3 * SEGMENTS + 2
    else:  # rebuilt from the snapshot at the first segment, or the batches that remain
        assert entry is not None and entry.last_seq == 3 * SEGMENTS + 2
    log.append(build_batch([Record(0, NOW, b"k", b"after")], producer_id=PID, producer_epoch=0,
                           base_sequence=3 * SEGMENTS + 3))  # fmt: skip
    log_dir.close()
    assert [p for p in verify_paths([path]) if p.severity == "error"] == []
    assert final_bases[0] == open_dir(path, mode).logs[(TOPIC, 0)].segments[0].base_offset


CASES = [
    ("time", "renamed:1"), ("time", "renamed:3"), ("time", "mid_rename:4"),
    ("time", "snapshot:2"), ("time", "epoch_flush:1"), ("time", "checkpoint:1"),
    ("all", "after_roll:1"), ("all", "renamed:5"), ("all", "mid_rename:18"),
    ("all", "snapshot:8"), ("all", "unlink:7"), ("all", "checkpoint:1"),
    ("size", "renamed:2"), ("size", "unlink:3"), ("size", "epoch_flush:1"),
    ("records", "after_persist:1"), ("records", "renamed:4"), ("records", "mid_rename:10"),
    ("records", "unlink:2"),
]  # fmt: skip


@pytest.mark.parametrize(("mode", "point"), CASES)
def test_sigkill_during_retention(original: Path, reference: dict[str, Any], tmp_path: Path,
                                  mode: str, point: str) -> None:  # fmt: skip
    path = Path(shutil.copytree(original, tmp_path / "logs"))
    original_records = records_on_disk(path / f"{TOPIC}-0")
    proc = subprocess.run(
        [sys.executable, __file__, str(path), mode, point],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stdout, proc.stderr)
    assert f"CRASHPOINT {point}" in proc.stdout
    check_reopened(path, mode, original_records, reference[mode])


def test_reference_runs_delete_what_they_should(reference: dict[str, Any]) -> None:
    """The uninterrupted runs the crash cases are compared with."""
    assert reference["time"] == ([9, 12, 15, 18, 21, 24], 9)  # timestamps <= T0 + 2000
    assert reference["all"] == ([27], 27)
    assert reference["size"] == ([18, 21, 24], 18)
    assert reference["records"] == ([15, 18, 21, 24], RECORDS_TARGET)


if __name__ == "__main__":
    worker(sys.argv)
