"""Remote compaction's scratch directories (kafkatier.tiering.cleaner.scratch): those a killed
process left are removed by a process's first compaction; a live process's, and names without a
pid, are not."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from kafkatier.tiering.cleaner.scratch import PREFIX, new_scratch, remove_dead


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
        unrelated = tmp_path / "kafkatier-warm-1"
        for path in (mine, other, old_style, unrelated):
            path.mkdir()
        made = new_scratch(tmp_path)
        assert made.is_dir() and made.name.startswith(f"{PREFIX}{os.getpid()}-")
        assert not dead.exists()
        assert all(p.exists() for p in (mine, other, old_style, unrelated))
    finally:
        live_parent.kill()
        live_parent.wait()
    dead_again = tmp_path / f"{PREFIX}{_dead_pid()}-jkl"
    dead_again.mkdir()
    new_scratch(tmp_path)  # this process swept the root once: its later compactions list nothing
    assert dead_again.exists()
    remove_dead(tmp_path)  # as the next process's first compaction: the other process is gone
    assert not other.exists() and mine.exists()
