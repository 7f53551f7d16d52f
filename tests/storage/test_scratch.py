"""Scratch directories (kafkatier.storage.scratch): those a killed process left are removed by a
process's first scratch directory of their kind; a live process's, names without a pid and other
kinds are not. The cleaner's warm-up (storage/cleaner/warm.py) sweeps its kind too."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from kafkatier.storage.cleaner.warm import warming
from kafkatier.storage.scratch import new_scratch, prefix, remove_dead

PREFIX = prefix("compact")


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_killed_compactions_scratch_is_removed_and_no_live_ones(tmp_path: Path) -> None:
    live_parent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        dead = tmp_path / f"{PREFIX}{_dead_pid()}-abc"
        (dead / "segment").mkdir(parents=True)
        (dead / "segment" / "00000000000000000000.log").write_bytes(b"x" * 4096)
        mine = tmp_path / f"{PREFIX}{os.getpid()}-def"
        other = tmp_path / f"{PREFIX}{live_parent.pid}-ghi"
        old_style = tmp_path / f"{PREFIX}k3j9x_2q"  # before the pid was in the name
        unrelated = tmp_path / f"{prefix('warm')}{_dead_pid()}-mno"  # another kind
        for path in (mine, other, old_style, unrelated):
            path.mkdir()
        made = new_scratch("compact", tmp_path)
        assert made.is_dir() and made.name.startswith(f"{PREFIX}{os.getpid()}-")
        assert not dead.exists()
        assert all(p.exists() for p in (mine, other, old_style, unrelated))
    finally:
        live_parent.kill()
        live_parent.wait()
    dead_again = tmp_path / f"{PREFIX}{_dead_pid()}-jkl"
    dead_again.mkdir()
    new_scratch("compact", tmp_path)  # this process swept the root once: no listing again
    assert dead_again.exists()
    remove_dead(tmp_path, "compact")  # as the next process's first: the other process is gone
    assert not other.exists() and mine.exists()


def test_a_warm_up_a_killed_process_left_is_removed_by_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    left = tmp_path / f"{prefix('warm')}{_dead_pid()}-pqr"
    (left / "warm-up-0").mkdir(parents=True)
    with warming() as child:
        assert child is not None
        assert Path(child.args[-1]).parent == tmp_path  # type: ignore[index]
    assert not left.exists()
    assert list(tmp_path.iterdir()) == []  # its own removed too
