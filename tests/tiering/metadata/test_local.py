"""A local partition as the sidecar reads it from pass to pass: given the sidecar's tail cache
its last stable and end offsets are a fresh scan's, and a pass after the first frames only what
was appended to the active segment since."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkatier.storage.errors import ConfigError
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.tail_cache import TailCache
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record
from kafkatier.tiering.metadata.local import LocalPartition, local_partitions


def test_the_kept_tail_answers_as_a_fresh_scan_and_frames_only_the_new(
    tmp_path: Path, framed: list[int]
) -> None:
    tails = TailCache()
    before = (-1, 0)  # the last segment's base and the bytes of it framed, after a pass
    checked = 0
    with LogDirectory(tmp_path) as ld:
        log = ld.get_or_create("t", 0)
        txn = {"producer_id": 9, "producer_epoch": 0, "transactional": True}
        for i in range(8):  # a pass after each append, the sidecar's
            log.append(build_batch([Record(j, 1000, b"k", b"v") for j in range(3)]))
            log.append(build_batch([Record(0, 1000, b"k", b"v")], base_sequence=i, **txn))
            if i % 2:
                log.write_txn_marker(9, 0, commit=True)
            with LocalPartition(tmp_path, "t", 0, tails=tails) as kept:
                framed.clear()
                answers = (kept.last_stable_offset(), kept.log_end_offset())
                positions = list(framed)
            with LocalPartition(tmp_path, "t", 0) as fresh:
                assert answers == (fresh.last_stable_offset(), fresh.log_end_offset())
            assert answers == (log.last_stable_offset, log.log_end_offset)
            state = next(iter(tails._states.values()))
            if state.base == before[0]:  # not rolled since the last pass (a marker may roll)
                assert positions[0] == before[1] > 0, positions
                checked += 1
            before = (state.base, state.framed)
    assert tails.held == 1 and checked >= 3


def test_a_partition_in_two_log_dirs_is_refused(tmp_path: Path) -> None:
    """Kafka's LogManager refuses to start on one ("Duplicate log directories for ..."): which
    copy is the partition is not for the sidecar, status or serve to guess."""
    for name in ("a", "b"):
        with LogDirectory(tmp_path / name) as logs:
            logs.get_or_create("t", 0).append(build_batch([Record(0, 1, b"k", b"v")]))
    assert [(d.name, t, p) for d, t, p in local_partitions([tmp_path / "a"])] == [("a", "t", 0)]
    with pytest.raises(ConfigError, match="partition t-0 is in two log dirs") as raised:
        local_partitions([tmp_path / "a", tmp_path / "b"])
    assert str(tmp_path / "a" / "t-0") in str(raised.value)
    assert str(tmp_path / "b" / "t-0") in str(raised.value)
