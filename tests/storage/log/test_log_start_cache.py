"""The log-start checkpoint cache (storage/log/log_start_cache.py): the same offsets as a fresh
read of the file, read once while the file stays, again as soon as the writer replaces it, and
within its maximum age even when a replacement looks the same."""

from __future__ import annotations

import os
from pathlib import Path

from kafkatier.storage.checkpoint.checkpoint_file import (
    LOG_START_OFFSET_CHECKPOINT,
    OffsetCheckpointFile,
)
from kafkatier.storage.log.log_start_cache import LOOK_S, MAX_AGE_S, LogStartCache
from kafkatier.storage.log.readonly import checkpointed_log_starts


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_read_once_while_unchanged_and_again_once_replaced(tmp_path: Path) -> None:
    clock = Clock()
    cache = LogStartCache(clock)
    assert cache.get(tmp_path) == {}  # no checkpoint yet: no hints
    checkpoint = OffsetCheckpointFile(tmp_path / LOG_START_OFFSET_CHECKPOINT)
    checkpoint.write({("t", p): 10 * p for p in range(50)})
    clock.now += 2 * LOOK_S
    assert cache.get(tmp_path) == checkpointed_log_starts(tmp_path)  # the new file is seen
    reads = cache.parses
    for _ in range(100):  # fetches of 100 partitions, the file looked at between them
        assert cache.get(tmp_path)[("t", 7)] == 70
        clock.now += LOOK_S / 10
    assert cache.parses == reads
    checkpoint.write({("t", p): 10 * p + 5 for p in range(50)})  # retention moved the starts
    assert cache.get(tmp_path)[("t", 7)] == 70  # not looked at again yet
    clock.now += 2 * LOOK_S
    assert cache.get(tmp_path)[("t", 7)] == 75
    assert cache.parses == reads + 1


def test_a_replacement_that_looks_the_same_is_seen_within_the_maximum_age(tmp_path: Path) -> None:
    """Same inode, size and modification time (as an inode reused within the filesystem's
    timestamp granularity would give): the old parse serves until it is MAX_AGE_S old."""
    clock = Clock()
    cache = LogStartCache(clock)
    path = tmp_path / LOG_START_OFFSET_CHECKPOINT
    OffsetCheckpointFile(path).write({("t", 0): 11})
    assert cache.get(tmp_path) == {("t", 0): 11}
    before = os.stat(path)
    data = path.read_bytes()
    with open(path, "r+b") as f:  # the same length, rewritten in place
        f.write(data.replace(b"11", b"12"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    clock.now += MAX_AGE_S / 2
    assert cache.get(tmp_path) == {("t", 0): 11}
    clock.now += MAX_AGE_S
    assert cache.get(tmp_path) == {("t", 0): 12}
