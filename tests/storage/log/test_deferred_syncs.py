"""The small files a log writes without fsync (the leader-epoch checkpoint at an epoch change,
the producer snapshot at a roll): the next flush syncs them, and a leader-epoch checkpoint torn
by a power loss before that is rebuilt from the batches when the partition is opened again."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.log.loader import LEADER_EPOCH_CHECKPOINT, open_log
from kafkatier.storage.log.log import Log
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record

CONFIG = LogConfig(segment_bytes=600, segment_index_bytes=4096)


def batch(n: int) -> bytes:
    now = int(time.time() * 1000)
    return build_batch([Record(i, now + i, None, b"x" * 50) for i in range(n)])


def fsynced_paths(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    paths: list[str] = []
    real = os.fsync

    def fsync(fd: Any) -> None:
        fd = fd if isinstance(fd, int) else fd.fileno()
        paths.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return paths


def test_an_epoch_change_and_a_roll_are_synced_by_the_next_flush(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log(tmp_path / "t-0", CONFIG)
    synced = fsynced_paths(monkeypatch)
    log.leader_epoch = 3
    while len(log.segments) < 2:
        log.append(batch(4))
    epochs = str(log.directory / LEADER_EPOCH_CHECKPOINT)
    assert synced == [] and log.has_unflushed_data  # the append path fsyncs nothing
    log.flush_data()
    assert epochs in synced and any(path.endswith(".snapshot") for path in synced)
    assert not log.has_unflushed_data
    assert open_log(log.directory, CONFIG).leader_epoch_cache.entries == [(3, 0)]


@pytest.mark.parametrize("torn", [b"0\n1\n3 ", b"\0" * 8, b"0\n2\n3 0\n"])
def test_a_torn_leader_epoch_checkpoint_is_rebuilt_from_the_batches(
    tmp_path: Path, torn: bytes
) -> None:
    log = open_log(tmp_path / "t-0", CONFIG)
    for epoch in (3, 5):
        log.leader_epoch = epoch
        for _ in range(4):
            log.append(batch(4))
    expected = log.leader_epoch_cache.entries
    assert len(expected) == 2 and len(log.segments) > 2
    log.close()  # clean: no recovery would run but for the torn checkpoint
    (log.directory / LEADER_EPOCH_CHECKPOINT).write_bytes(torn)
    reopened: Log = open_log(log.directory, CONFIG, recovery_point=log.log_end_offset,
                             clean_shutdown=True)  # fmt: skip
    assert reopened.leader_epoch_cache.entries == expected
    assert reopened.leader_epoch == 5 and reopened.log_end_offset == log.log_end_offset
