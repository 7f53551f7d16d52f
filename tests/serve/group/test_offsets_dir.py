"""The server's offsets dir (``<log dir>/.kafkatier-serve``) is invisible to everything else
that walks the log dir (the log engine, the sidecar, the Spark reader's discovery, verify and
its progress total, serve's catalog), and is itself a Kafka log dir that ``kafkatier verify``
finds clean and ``kafkatier clean`` compacts to the latest commit per key."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkatier.cli.main import main as kafkatier
from kafkatier.serve.catalog import Catalog
from kafkatier.serve.config import OFFSETS_DIR_NAME
from kafkatier.serve.group.offset_store import TOPIC, OffsetStore
from kafkatier.serve.group.records import OffsetValue
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.readonly import discover
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record
from kafkatier.storage.verify.paths import log_bytes, verify_paths
from kafkatier.tiering.metadata.local import local_partitions


def test_readers_skip_it_and_it_compacts(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    with LogDirectory(logs) as ld:
        ld.get_or_create("t", 0).append(build_batch([Record(0, 1, b"k", b"v")]))
    offsets = logs / OFFSETS_DIR_NAME
    store = OffsetStore(offsets, 1)
    try:
        for i in range(50):  # 50 commits of the same two keys, in their own segments
            store.commit("g", [("t", 0, OffsetValue(i, -1, "", i)),
                               ("t", 1, OffsetValue(i, -1, "", i))])  # fmt: skip
            log = store._logs.get(TOPIC, 0)  # type: ignore[union-attr]
            log.roll()
    finally:
        store.close()
    with LogDirectory(logs) as ld:
        assert ld.topics() == {"t": 1}
    assert [tp for _, *tp in local_partitions([logs])] == [["t", 0]]
    assert discover(logs, None, ".*") == [("t", 0)]
    assert set(Catalog((logs,)).topics()) == {"t"}
    assert verify_paths([logs]) == []
    assert log_bytes([logs]) == sum(p.stat().st_size for p in (logs / "t-0").glob("*.log"))
    size = sum(p.stat().st_size for p in offsets.rglob("*.log"))
    assert kafkatier(["clean", str(offsets)]) == 0
    assert sum(p.stat().st_size for p in offsets.rglob("*.log")) < size / 10
    assert kafkatier(["verify", str(offsets)]) == 0
    store = OffsetStore(offsets, 1)
    try:
        assert store.committed("g") == {("t", 0): OffsetValue(49, -1, "", 49),
                                        ("t", 1): OffsetValue(49, -1, "", 49)}  # fmt: skip
    finally:
        store.close()


def test_a_commit_that_failed_for_space_does_not_keep_the_dir_locked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first commit creates the offsets dir; when the disk is full then, the lock file's
    write fails and the commit with it, and once there is room the next commit of the same
    server succeeds (the failed one had kept the lock, so every later commit was refused as
    "another process serves groups from this dir")."""
    import errno
    import os

    store = OffsetStore(tmp_path / OFFSETS_DIR_NAME, 1)
    real = os.pwrite

    def full(fd: int, data: bytes, offset: int) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "pwrite", full)
    try:
        with pytest.raises(OSError, match="No space left"):
            store.commit("g", [("t", 0, OffsetValue(1, -1, "", 1))])
        monkeypatch.setattr(os, "pwrite", real)
        store.commit("g", [("t", 0, OffsetValue(2, -1, "", 2))])
        assert store.committed("g")[("t", 0)].offset == 2
    finally:
        store.close()
