"""log.max.open.files: a log dir of many partitions keeps at most that many descriptors open
(``storage/file_budget.py``), and a partition whose files were closed and reopened behaves
exactly as one never closed: same offsets, recovery points, producer state, index lookups and
byte-identical files (partition.metadata and meta.properties aside: they hold random ids)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from crash_writer import check_partition
from fd_probe import open_descriptors

from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.errors import ConfigError
from kafkatier.storage.file_budget import (
    MIN_OPEN_FILES,
    BudgetedFile,
    FileBudget,
    default_max_open_files,
    resolve_max_open_files,
)
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.log import Log
from kafkatier.storage.log.reader import iter_records
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record

NOW = 1_700_000_000_000
PARTITIONS = 40
RANDOM_IDS = {"partition.metadata", "meta.properties", "kafkatier-topic.t.properties"}  # topic ids


def config(_topic: str) -> LogConfig:
    return LogConfig(segment_bytes=1500, index_interval_bytes=120, segment_index_bytes=4096)


def records(p: int, round_: int, n: int) -> list[Record]:
    value = b"v" * (40 + p % 7)
    return [Record(i, NOW + round_ * 10 + i, f"k{p}".encode(), value) for i in range(n)]


def workload(log_dir: LogDirectory, rounds: int = 12) -> list[object]:
    """Idempotent and transactional appends to every partition in turn (so each use finds the
    partition's files closed by the budget), rolls, aborted transactions, and lookups; returns
    what the lookups saw."""
    log_dir.create_partitions("t", PARTITIONS)
    seen: list[object] = []
    for r in range(rounds):
        for p in range(PARTITIONS):
            log = log_dir.logs[("t", p)]
            log.append(build_batch(records(p, r, 3), producer_id=7, producer_epoch=0,
                                   base_sequence=3 * r))  # fmt: skip
            if r % 4 == 1:
                log.append(build_batch(records(p, r, 2), producer_id=9, producer_epoch=0,
                                       base_sequence=2 * (r // 4), transactional=True))  # fmt: skip
                log.write_txn_marker(9, 0, commit=r % 8 == 1, timestamp=NOW + r)
            seen.append(_lookups(log, r))
        if r % 5 == 4:
            log_dir.flush()
    return seen


def _lookups(log: Log, r: int) -> object:
    target = max(log.log_end_offset - 5, 0)
    found = log.segment_for(target).translate_offset(target)
    by_time = log.segments[0].find_offset_by_timestamp(NOW + r * 10, 0)
    return (log.log_end_offset, found and found.position, by_time, len(log.segments))


def state(log_dir: LogDirectory) -> dict[object, object]:
    return {
        tp: (
            log.log_end_offset,
            log.recovery_point,
            log.last_stable_offset,
            {pid: e.to_snapshot_entry() for pid, e in log.producer_state.producers.items()},
            log.leader_epoch_cache.entries,
            [(s.base_offset, s.size) for s in log.segments],
        )
        for tp, log in sorted(log_dir.logs.items())
    }


def files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name not in RANDOM_IDS
    }


def test_partitions_whose_files_were_closed_behave_as_never_closed(tmp_path: Path) -> None:
    tight, loose = tmp_path / "tight", tmp_path / "loose"
    a = LogDirectory(tight, config_for=config, clock=lambda: NOW, max_open_files=MIN_OPEN_FILES)
    b = LogDirectory(loose, config_for=config, clock=lambda: NOW, max_open_files=100_000)
    before = open_descriptors()
    assert workload(a) == workload(b)
    assert a.file_budget.evictions > 1000 and b.file_budget.evictions == 0
    assert a.file_budget.open_handles <= MIN_OPEN_FILES
    assert b.file_budget.open_handles > 3 * PARTITIONS
    assert state(a) == state(b)
    for log in a:
        check_partition(log)  # indexes, snapshots, txn index against an independent reader
        assert list(iter_records(log, 0)) == list(iter_records(b.logs[("t", log.partition)], 0))
    b.close()
    assert open_descriptors() - before <= MIN_OPEN_FILES + 2  # a's handles, a stray at most
    a.close()
    assert files(tight) == files(loose)


def test_a_log_dir_reopened_under_a_tight_budget_reads_the_same(tmp_path: Path) -> None:
    with LogDirectory(tmp_path, config_for=config, clock=lambda: NOW) as log_dir:
        workload(log_dir, rounds=6)
    with LogDirectory(tmp_path, config_for=config, clock=lambda: NOW) as log_dir:
        expected = state(log_dir)
    with LogDirectory(tmp_path, config_for=config, clock=lambda: NOW,
                      max_open_files=MIN_OPEN_FILES) as log_dir:  # fmt: skip
        assert state(log_dir) == expected
        assert log_dir.file_budget.open_handles <= MIN_OPEN_FILES
        for log in log_dir:
            check_partition(log)


class Recorder:
    """A handle that records its release (busy: refuses)."""

    def __init__(self, name: str, budget: FileBudget, released: list[str]) -> None:
        self.name, self.budget, self.released = name, budget, released
        self.referenced = True
        self.busy = False

    def release_if_idle(self) -> bool:
        if self.busy:
            return False
        self.released.append(self.name)
        self.budget.closed(self)
        return True


def test_clock_evicts_the_least_recently_used_idle_handles() -> None:
    released: list[str] = []
    budget = FileBudget(3)
    a, b, c, d, e = (Recorder(n, budget, released) for n in "abcde")
    for h in (a, b, c):
        budget.opened(h)
    budget.opened(d)  # all referenced: one turn clears the bits, then the oldest goes
    assert released == ["a"]
    b.referenced = True  # b used since: a second chance; c is the oldest unused
    c.busy = True  # ... but in use: skipped
    budget.opened(e)
    assert released == ["a", "d"] and budget.open_handles == 3
    for h in (b, c, e):
        h.busy = True
    budget.opened(Recorder("f", budget, released))  # everything busy: over budget for now
    assert budget.open_handles == 4 and released == ["a", "d"]


def test_a_pinned_file_is_never_closed_under_its_user(tmp_path: Path) -> None:
    budget = FileBudget(1)
    first = BudgetedFile(tmp_path / "a", os.O_RDWR | os.O_CREAT, budget, fd=-1)
    (tmp_path / "b").write_bytes(b"b")
    second = BudgetedFile(tmp_path / "b", os.O_RDONLY, budget)
    with first.use() as fd:
        os.pwrite(fd, b"a", 0)
        with second.use() as other:  # would evict first, but first is pinned
            assert os.pread(other, 1, 0) == b"b"
            assert os.pread(fd, 1, 0) == b"a"
        assert budget.open_handles == 2 and first.is_open  # over budget while in use
    (tmp_path / "c").write_bytes(b"c")
    third = BudgetedFile(tmp_path / "c", os.O_RDONLY, budget)
    with third.use():  # the next open closes the idle ones
        assert not first.is_open and not second.is_open and third.is_open
    with first.use() as fd:  # and the next use reopens it
        assert os.pread(fd, 1, 0) == b"a"


def test_pins_hold_across_threads(tmp_path: Path) -> None:
    budget = FileBudget(MIN_OPEN_FILES)
    paths = [tmp_path / f"f{i}" for i in range(64)]
    for i, p in enumerate(paths):
        p.write_bytes(bytes([i]) * 8)
    handles = [BudgetedFile(p, os.O_RDONLY, budget) for p in paths]
    errors: list[object] = []

    def reader(offset: int) -> None:
        for k in range(2000):
            i = (offset + 7 * k) % len(handles)
            with handles[i].use() as fd:
                if os.pread(fd, 8, 0) != bytes([i]) * 8:
                    errors.append((i, k))

    threads = [threading.Thread(target=reader, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and budget.evictions > 0
    assert budget.open_handles <= MIN_OPEN_FILES


def test_the_setting_is_checked_and_derived_from_the_limit() -> None:
    assert resolve_max_open_files(None) == resolve_max_open_files(-1) == default_max_open_files()
    assert resolve_max_open_files(64) == 64
    with pytest.raises(ConfigError, match=r"setting=log\.max\.open\.files, value=3"):
        resolve_max_open_files(3)
    script = (
        "import resource; resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256)); "
        "from kafkatier.storage.file_budget import default_max_open_files as d; print(d())"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "128"


LOW_LIMIT_WRITER = """
import resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, ({limit}, {limit}))
from pathlib import Path
from fd_probe import open_descriptors
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record
root, count, peak = Path(sys.argv[1]), {count}, 0
def batch(i):
    return build_batch([Record(0, 1_700_000_000_000 + i, None, bytes([i]) * 5000)])
with LogDirectory(root) as log_dir:
    log_dir.create_partitions("t", count)
    for i in range(2):  # the second batch of each partition writes an index entry
        for log in log_dir:
            log.append(batch(i))
            peak = max(peak, open_descriptors())
    log_dir.flush()
with LogDirectory(root) as log_dir:
    assert sorted(log.log_end_offset for log in log_dir) == [2] * count
    for log in log_dir:
        assert log.segments[0].translate_offset(1).position > 0
        log.append(batch(2))
        peak = max(peak, open_descriptors())
print(peak)
"""


def test_more_partitions_than_the_process_may_open_files(tmp_path: Path) -> None:
    """A log dir of 512 partitions (three descriptors each when open) in a process limited to
    64 descriptors: written, flushed, closed, reopened and written again (the suite's cheap
    stand-in for 4,096 partitions under 256, which bench/scale_produce.py runs)."""
    script = LOW_LIMIT_WRITER.format(limit=64, count=512)
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True,
                          text=True, cwd=Path(__file__).parents[1], timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert int(done.stdout) < 64
    with LogDirectory(tmp_path) as log_dir:
        assert sorted(log.log_end_offset for log in log_dir) == [3] * 512
