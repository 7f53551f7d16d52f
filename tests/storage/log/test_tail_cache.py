"""The tail cache: bounds carried forward from one scan to the next are a fresh scan's (and
the writer's own last stable offset) through appends, transactions opened, committed and
aborted, rolls, reopened logs (a new snapshot in the active segment), a truncated tail and a
swapped file; and each scan after the first frames only what was appended since."""

from __future__ import annotations

import os
import pickle
import random
import shutil
from pathlib import Path

import pytest

from kafkatier.storage.log import tail, tail_cache
from kafkatier.storage.log.bounds import PartitionBounds, scan_bounds
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.log import Log
from kafkatier.storage.log.readonly import ReadOnlyPartition
from kafkatier.storage.log.tail import LogFile
from kafkatier.storage.log.tail_cache import TailCache
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record

PRODUCERS = (7000, 8000)


def append(log: Log, n: int, pid: int = -1, seq: int = -1) -> None:
    txn = {"producer_id": pid, "producer_epoch": 0, "base_sequence": seq, "transactional": True}
    for _ in range(n):
        records = [Record(i, 1000 + i, b"k%d" % i, b"v" * 40) for i in range(2)]
        log.append(build_batch(records, **(txn if pid >= 0 else {})))


def both(tmp_path: Path, cache: TailCache, committed: bool) -> tuple[PartitionBounds, ...]:
    """(kept, fresh) bounds of t-0."""
    with ReadOnlyPartition(tmp_path, "t", 0) as part:
        return scan_bounds(part, committed, cache), scan_bounds(part, committed)


class Writer:
    """Random steps on t-0: plain batches, transactional ones, markers, rolls, a reopen."""

    def __init__(self, tmp_path: Path, seed: int) -> None:
        self.path, self.rng = tmp_path, random.Random(seed)
        self.seqs = dict.fromkeys(PRODUCERS, 0)
        self.logs = LogDirectory(tmp_path)

    @property
    def log(self) -> Log:
        return self.logs.get_or_create("t", 0)

    def step(self) -> None:
        pid = self.rng.choice(PRODUCERS)
        kind = self.rng.choices(["plain", "txn", "marker", "roll", "reopen"], [5, 5, 3, 1, 1])[0]
        if kind == "plain":
            append(self.log, self.rng.randint(1, 3))
        elif kind == "txn":
            append(self.log, 1, pid, self.seqs[pid])
            self.seqs[pid] += 2
        elif kind == "marker":
            self.log.write_txn_marker(pid, 0, commit=self.rng.random() < 0.5)
        elif kind == "roll":
            self.log.roll()
        else:  # a clean close snapshots the end offset: a new key for the active segment
            self.logs.close()
            self.logs = LogDirectory(self.path)


@pytest.mark.parametrize("small", [tail.SMALL, 0], ids=["python", "c"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_kept_bounds_are_a_fresh_scans(
    tmp_path: Path, seed: int, small: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Framed in Python (small tails) and in C (every tail, where the library is built)."""
    monkeypatch.setattr(tail, "SMALL", small)
    writer, cache = Writer(tmp_path, seed), TailCache()
    try:
        for _ in range(150):
            writer.step()
            for committed in writer.rng.sample([True, False], writer.rng.randint(1, 2)):
                kept, fresh = both(tmp_path, cache, committed)
                assert kept == fresh
                if committed:
                    assert kept.last_stable == writer.log.last_stable_offset
    finally:
        writer.logs.close()


def test_a_cut_tail_and_a_swapped_file_start_again(tmp_path: Path) -> None:
    cache = TailCache()
    with LogDirectory(tmp_path) as ld:
        log = ld.get_or_create("t", 0)
        append(log, 30)
        append(log, 1, PRODUCERS[0], 0)  # open at 60
        assert both(tmp_path, cache, True)[0].last_stable == 60
        log.roll()
        append(log, 5)
        assert both(tmp_path, cache, True)[0].high_watermark == 72
    last = sorted((tmp_path / "t-0").glob("*.log"))[-1]
    with LogFile(str(last)) as file:
        batches = [h.at for h in file.headers()]
    os.truncate(last, batches[1].position + 5)  # a torn tail cut back by a recovering writer
    kept, fresh = both(tmp_path, cache, True)
    assert kept == fresh and kept.high_watermark == batches[0].last_offset + 1
    with LogDirectory(tmp_path / "other") as other:  # larger batches: framing on from where
        for _ in range(4):  # the old file's fold ended would land inside one
            other.get_or_create("t", 0).append(build_batch([Record(0, 1000, b"k", b"v" * 900)]))
    shutil.copy(tmp_path / "other" / "t-0" / last.name.replace("62", "00"), tmp_path / "swap")
    os.replace(tmp_path / "swap", last)  # another file (inode) under the same name
    kept, fresh = both(tmp_path, cache, True)
    assert kept == fresh and kept.high_watermark == 4  # its batches end at offset 3


def test_a_scan_after_the_first_frames_only_what_was_appended(
    tmp_path: Path, framed: list[int]
) -> None:
    cache = TailCache()
    with LogDirectory(tmp_path) as ld:
        log = ld.get_or_create("t", 0)
        append(log, 50)
        both(tmp_path, cache, True)
        state = cache._states[str(tmp_path / "t-0")]
        for _ in range(5):
            framed.clear()
            before = state.framed
            append(log, 2)
            kept, fresh = both(tmp_path, cache, True)
            assert framed[0] == before > 0 and kept == fresh  # the kept scan: the new two
            assert framed[1:] == [0]  # the fresh one


def test_the_cache_keeps_its_partitions_least_recently_used_and_pickles_empty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tail_cache, "MAX_PARTITIONS", 2)
    cache = TailCache()
    with LogDirectory(tmp_path) as ld:
        for p in range(3):
            append(ld.get_or_create("t", p), 3)
    for p in (0, 1, 2, 0):
        with ReadOnlyPartition(tmp_path, "t", p) as part:
            assert scan_bounds(part, True, cache).high_watermark == 6
    assert cache.held == 2 and list(cache._states) == [
        str(tmp_path / "t-2"), str(tmp_path / "t-0")]  # fmt: skip
    copy = pickle.loads(pickle.dumps(cache))
    assert isinstance(copy, TailCache) and copy.held == 0


@pytest.mark.parametrize("small", [tail.SMALL, 0], ids=["python", "c"])
def test_a_file_rewritten_in_place_is_framed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small: int
) -> None:
    """``cp`` over a segment (a restore from a copy) keeps its inode and may make it longer:
    the batch the fold last framed is not where it was, so the fold starts again."""
    monkeypatch.setattr(tail, "SMALL", small)
    cache = TailCache()
    with LogDirectory(tmp_path / "a") as ld:
        append(ld.get_or_create("t", 0), 20)  # batches of 2 records, about 130 bytes
    with LogDirectory(tmp_path / "b") as ld:
        log = ld.get_or_create("t", 0)
        for i in range(30):  # larger batches, of 1 record
            log.append(build_batch([Record(0, 1000, b"k%d" % i, b"v" * 300)]))
    name = "t-0/00000000000000000000.log"
    assert both(tmp_path / "a", cache, True)[0].high_watermark == 40
    inode = os.stat(tmp_path / "a" / name).st_ino
    shutil.copyfile(tmp_path / "b" / name, tmp_path / "a" / name)  # in place, as cp does
    assert os.stat(tmp_path / "a" / name).st_ino == inode
    kept, fresh = both(tmp_path / "a", cache, True)
    assert kept == fresh and kept.high_watermark == 30
