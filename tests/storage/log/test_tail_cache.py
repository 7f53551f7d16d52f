"""The tail cache gives the same last-segment headers as a fresh walk of the file after
appends, a roll, a truncated tail and a swapped file, and locates offsets as the segment's own
lookup does."""

from __future__ import annotations

import os
import pickle
import shutil
from pathlib import Path

from kafkatier.storage.log.batch_position import BatchPosition
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.header_table import Header, HeaderTable
from kafkatier.storage.log.log import Log
from kafkatier.storage.log.readonly import ReadOnlyPartition
from kafkatier.storage.log.tail import LogFile
from kafkatier.storage.log.tail_cache import IDLE_S, TailCache
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record


def open_partition(log_dir: Path, topic: str, partition: int) -> ReadOnlyPartition:
    return ReadOnlyPartition(log_dir, topic, partition)


def listed(table: HeaderTable) -> list[Header]:
    return [Header(BatchPosition(*row[:5]), row[5], row[6]) for row in table.rows.tolist()]


def fresh(log_dir: Path) -> tuple[list[Header], list[Header]]:
    """(cached, walked) headers of t-0's last segment."""
    with open_partition(log_dir, "t", 0) as part, part.last_log() as log:
        return listed(CACHE.headers(part)), list(log.headers())


CACHE = TailCache()


def append(log: Log, first: int, n: int) -> None:
    for i in range(first, first + n):
        log.append(build_batch([Record(i, 1000 + i, b"k", b"v%d" % i)]))


def test_the_cache_follows_the_file(tmp_path: Path) -> None:
    with LogDirectory(tmp_path) as ld:
        log = ld.get_or_create("t", 0)
        append(log, 0, 30)
        cached, walked = fresh(tmp_path)
        assert len(walked) == 30 and cached == walked
        append(log, 30, 5)  # appends: extended from where the last walk ended
        cached, walked = fresh(tmp_path)
        assert len(walked) == 35 and cached == walked
        with open_partition(tmp_path, "t", 0) as part:
            for offset in (0, 17, 34):
                at = next(CACHE.locate(part, offset))
                assert at == part.segment(part.bases[-1]).translate_offset(offset)
                assert [*CACHE.locate(part, offset)] == [h.at for h in walked[offset:]]
            assert list(CACHE.locate(part, 35)) == []
        log.roll()
        append(log, 35, 3)  # a roll: the new last segment, walked from 0
        cached, walked = fresh(tmp_path)
        assert len(walked) == 3 and cached == walked
    last = sorted((tmp_path / "t-0").glob("*.log"))[-1]
    os.truncate(last, walked[1].at.position + 5)  # a torn tail cut back by a recovering writer
    cached, walked = fresh(tmp_path)
    assert len(walked) == 1 and cached == walked
    shutil.copy(sorted((tmp_path / "t-0").glob("*.log"))[0], tmp_path / "swap")
    os.replace(tmp_path / "swap", last)  # another file (inode) under the same name
    cached, walked = fresh(tmp_path)
    assert len(walked) == 35 and cached == walked


def test_the_cache_pickles_empty(tmp_path: Path) -> None:
    """Spark pickles the Python stream reader that holds one: it travels empty."""
    with LogDirectory(tmp_path) as ld:
        append(ld.get_or_create("t", 0), 0, 3)
    cache = TailCache()
    with open_partition(tmp_path, "t", 0) as part:
        assert len(cache.headers(part)) == 3
    copy = pickle.loads(pickle.dumps(cache))
    assert isinstance(copy, TailCache) and not copy._entries


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_cache_holds_at_most_its_budget_of_headers(tmp_path: Path) -> None:
    """Past ``max_headers`` a partition that does not fit takes the room of those unused for
    ``IDLE_S`` (the least recently used first), else is walked for that use and not kept (the
    same headers either way); a partition larger than the budget is never kept."""
    with LogDirectory(tmp_path) as ld:
        for p, n in enumerate((4, 5, 6, 12)):
            append(ld.get_or_create("t", p), 0, n)
    clock = Clock()
    cache = TailCache(max_headers=10, clock=clock)
    parts = [ReadOnlyPartition(tmp_path, "t", p) for p in range(4)]
    try:
        walked = []
        for part in parts:
            with part.last_log() as log:
                walked.append(list(log.headers()))

        def seen(p: int) -> bool:
            return listed(cache.headers(parts[p])) == walked[p]

        assert seen(0) and cache.held == (1, 4)
        assert seen(1) and cache.held == (2, 9)
        assert seen(2) and cache.held == (2, 9)  # both in use
        clock.now = IDLE_S - 1
        assert seen(1) and cache.held == (2, 9)  # 1 used again
        clock.now = IDLE_S
        assert seen(2) and cache.held == (1, 5)  # 0 idle: out; 1 not
        assert seen(3) and cache.held == (1, 5)  # too large: not kept
        clock.now = 10 * IDLE_S
        assert seen(3) and cache.held == (1, 5)  # nothing out for it
        assert seen(2) and cache.held == (1, 6)  # 1 idle: out
    finally:
        for part in parts:
            part.close()


def test_partitions_used_in_turn_beyond_the_budget_are_not_all_walked_again(
    tmp_path: Path,
) -> None:
    """A streaming query's triggers use every partition in turn: with one more than fit, the
    others stay kept and only that one is walked again (least-recently-used dropping walked
    every one at every trigger)."""
    with LogDirectory(tmp_path) as ld:
        for p in range(4):
            append(ld.get_or_create("t", p), 0, 5)
    cache = TailCache(max_headers=15, clock=Clock())
    parts = [ReadOnlyPartition(tmp_path, "t", p) for p in range(4)]
    walks = 0
    original = LogFile.table

    def counted(self: LogFile, position: int = 0) -> HeaderTable:
        nonlocal walks
        walks += position == 0
        return original(self, position)

    try:
        LogFile.table = counted  # type: ignore[method-assign]
        for _ in range(5):  # five triggers
            for part in parts:
                assert len(cache.headers(part)) == 5
        assert walks == 3 + 5  # three kept after their first walk, the fourth walked each time
    finally:
        LogFile.table = original  # type: ignore[method-assign]
        for part in parts:
            part.close()


def test_a_table_handed_out_stays_as_it_was_while_the_file_grows(tmp_path: Path) -> None:
    """The cache appends a partition's new headers in place (room to grow): a reader still
    holding the table of an earlier trigger sees the rows it had, unchanged."""
    cache = TailCache()
    with LogDirectory(tmp_path) as ld:
        log = ld.get_or_create("t", 0)
        append(log, 0, 4)
        with open_partition(tmp_path, "t", 0) as part:
            held = cache.headers(part)
            before = listed(held)
            for round_ in range(6):  # growths of the buffer, and appends into its room
                append(log, 4 + 3 * round_, 3)
                now = listed(cache.headers(part))
                assert listed(held) == before and now[:4] == before and len(now) == 7 + 3 * round_
            with part.last_log() as walked:
                assert now == list(walked.headers())
