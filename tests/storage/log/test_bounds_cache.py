"""The bounds cache (storage/log/bounds_cache.py): a partition's bounds are answered from the
cache while its directory, last segment and checkpointed log start are as they were, read
anew after an append, a roll or a moved log start, and never kept from files changed within the
filesystem's timestamp granularity of the look."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.log.bounds import PartitionBounds, scan_bounds
from kafkatier.storage.log.bounds_cache import SETTLED_NS, BoundsCache
from kafkatier.storage.log.dir_watch import DirectoryWatch
from kafkatier.storage.log.loader import open_log
from kafkatier.storage.log.log import Log
from kafkatier.storage.log.readonly import ReadOnlyPartition
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record


class LaterClock:
    """The time of a look a while after the files were written (their stamps settled), or,
    with ``ahead_ns`` 0, right after."""

    def __init__(self) -> None:
        self.ahead_ns = 2 * SETTLED_NS

    def __call__(self) -> int:
        return time.time_ns() + self.ahead_ns


def writer(tmp_path: Path) -> Log:
    config = LogConfig.from_properties({"segment.index.bytes": "4096"}, source="test")
    return open_log(tmp_path / "t-0", config)


def append(log: Log, n: int = 3) -> None:
    log.append(build_batch([Record(i, 1_000 + i, b"k", b"v" * 50) for i in range(n)]))


def read(cache: BoundsCache, log_dir: Path, hint: int = 0) -> PartitionBounds:
    """What ``kafkatier serve`` does for a partition's bounds (``partition_view.local_bounds``)."""
    directory = str(log_dir / "t-0")
    found = cache.get(directory, hint)
    if found is not None:
        return found
    look = cache.look(directory)
    with ReadOnlyPartition(log_dir, "t", 0, hint) as part:
        assert look is not None
        look = look.at_log(part.file(part.bases[-1], ".log"))
        found = scan_bounds(part, committed=True)
        cache.put(look, hint, found)
    return found


def fresh(log_dir: Path, hint: int = 0) -> PartitionBounds:
    with ReadOnlyPartition(log_dir, "t", 0, hint) as part:
        return scan_bounds(part, committed=True)


def test_unchanged_files_are_answered_from_the_cache(tmp_path: Path) -> None:
    log = writer(tmp_path)
    append(log)
    log.flush()
    cache = BoundsCache(LaterClock())
    first = read(cache, tmp_path)
    for _ in range(5):
        assert read(cache, tmp_path) == first == fresh(tmp_path)
    assert cache.hits == 5
    log.close()


def test_an_append_a_roll_or_a_moved_log_start_is_read_anew(tmp_path: Path) -> None:
    log = writer(tmp_path)
    append(log)
    cache = BoundsCache(LaterClock())
    read(cache, tmp_path)
    append(log)  # the last segment grew
    assert read(cache, tmp_path).high_watermark == 6 == fresh(tmp_path).high_watermark
    log.roll()  # a new, empty last segment (and a snapshot) in the directory
    append(log, 1)
    assert read(cache, tmp_path) == fresh(tmp_path)
    assert read(cache, tmp_path).high_watermark == 7
    hits = cache.hits
    assert read(cache, tmp_path, hint=4).log_start == 4 == fresh(tmp_path, hint=4).log_start
    assert cache.hits == hits  # a moved checkpointed start is a miss
    log.close()


def test_files_changed_within_the_timestamp_granularity_are_not_kept(tmp_path: Path) -> None:
    log = writer(tmp_path)
    append(log)
    cache = BoundsCache()  # the look happens now: the segment was written within SETTLED_NS
    read(cache, tmp_path)
    read(cache, tmp_path)
    assert cache.hits == 0
    log.close()


def test_a_kept_partitions_token_changes_with_an_append_or_a_roll(tmp_path: Path) -> None:
    log = writer(tmp_path)
    append(log)
    directory = str(tmp_path / "t-0")
    assert BoundsCache(LaterClock()).token(directory) is None  # not kept: the caller lists
    clock = LaterClock()
    cache = BoundsCache(clock)
    read(cache, tmp_path)
    token = cache.token(directory)
    assert token is not None and cache.token(directory) == token
    append(log, 1)
    grown = cache.token(directory)
    assert grown is not None and grown != token
    log.roll()
    assert cache.token(directory) not in (None, grown)  # the directory changed
    clock.ahead_ns = 0
    assert cache.token(directory) is None  # stamps of just now are not trusted
    log.close()


@pytest.mark.skipif(DirectoryWatch.open() is None, reason="no inotify on this system")
def test_a_watched_partition_is_answered_without_a_stat_and_sees_every_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a directory watch, bounds just written are kept (no timestamp must settle), a look
    at an unchanged partition makes no ``stat`` call, and an append, a roll or a moved log
    start right after the look is seen at the next one."""
    log = writer(tmp_path)
    append(log)
    watch = DirectoryWatch.open()
    assert watch is not None
    cache = BoundsCache(watch=watch)  # the look happens right after the write
    directory = str(tmp_path / "t-0")
    first = read(cache, tmp_path)
    stats: list[str] = []
    real_stat = os.stat
    monkeypatch.setattr(os, "stat",
                        lambda path, *a, **k: stats.append(path) or real_stat(path, *a, **k))
    for _ in range(3):
        assert read(cache, tmp_path) == first
    token = cache.token(directory)
    assert (cache.hits, stats, token) == (3, [], cache.token(directory))
    monkeypatch.setattr(os, "stat", real_stat)
    append(log)  # at once: no timestamp granularity to wait out
    assert read(cache, tmp_path).high_watermark == 6 == fresh(tmp_path).high_watermark
    assert cache.token(directory) != token
    log.roll()
    append(log, 1)
    assert read(cache, tmp_path) == fresh(tmp_path)
    hits = cache.hits
    assert read(cache, tmp_path, hint=4).log_start == 4
    assert cache.hits == hits  # a moved checkpointed start is a miss
    log.close()
    watch.close()
