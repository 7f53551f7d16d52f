"""Writers' turns on a log dir (storage/log/writer_lock.py): exclusion across processes, the
generation that tells a writer another one had a turn, and a killed holder."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.writer_lock import (
    GENERATION_FILE,
    LOCK_FILE,
    read_generation,
    writer_turn,
)
from kafkatier.storage.verify.paths import verify_paths

HOLDER = """
import sys, time
from pathlib import Path
from kafkatier.storage.log.writer_lock import writer_turn
with writer_turn(Path(sys.argv[1]), who="holder") as turn:
    Path(sys.argv[2]).write_text("holding")
    time.sleep(float(sys.argv[3]))
    if sys.argv[4] == "finish":
        Path(sys.argv[2]).write_text("finished " + turn.token)
"""


def hold(log_dir: Path, flag: Path, seconds: float, finish: bool = True) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(log_dir), str(flag), str(seconds),
         "finish" if finish else "no"],
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while not flag.exists():
        assert proc.poll() is None and time.monotonic() < deadline, "holder did not start"
        time.sleep(0.02)
    return proc


def test_own_turns_keep_the_generation_and_others_change_it(tmp_path: Path) -> None:
    with writer_turn(tmp_path) as first:
        assert first.changed_since(None)  # nothing remembered yet: reload
        mine = first.token
    with writer_turn(tmp_path) as again:
        assert not again.changed_since(mine)
        mine = again.token
    with writer_turn(tmp_path, who="other"):
        pass
    with writer_turn(tmp_path) as after:
        assert after.changed_since(mine)
    assert read_generation(tmp_path) is not None


def test_a_turn_waits_for_another_processs_turn(tmp_path: Path) -> None:
    proc = hold(tmp_path, tmp_path / "flag", 1.5)
    start = time.monotonic()
    with writer_turn(tmp_path, who="waiter") as turn:
        waited = time.monotonic() - start
        # the holder's whole turn came before ours: we start from the generation it left
        assert (tmp_path / "flag").read_text() == f"finished {turn.generation_at_start}"
        assert (tmp_path / LOCK_FILE).read_text() == f"{os.getpid()} waiter\n"
    assert waited > 0.5
    assert proc.wait() == 0


def test_a_killed_holder_frees_the_turn_and_shows_its_change(tmp_path: Path) -> None:
    with writer_turn(tmp_path) as turn:
        mine = turn.token
    proc = hold(tmp_path, tmp_path / "flag", 60, finish=False)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    start = time.monotonic()
    with writer_turn(tmp_path) as turn:
        assert time.monotonic() - start < 10
        assert turn.changed_since(mine)  # the killed turn wrote its token before any change


def test_the_turn_files_keep_the_log_dir_valid(tmp_path: Path) -> None:
    with writer_turn(tmp_path) as turn, LogDirectory(tmp_path) as logs:
        logs.get_or_create("t", 0)
        assert turn.token
    assert (tmp_path / LOCK_FILE).exists() and (tmp_path / GENERATION_FILE).exists()
    assert verify_paths([tmp_path]) == []


def test_a_damaged_generation_file_is_a_change_not_an_error(tmp_path: Path) -> None:
    """Bytes that are no token (a damaged file) count as another writer's turn, so the next
    writer reloads and writes a fresh token; every writer failed on them with an unexpected
    UnicodeDecodeError naming no file."""
    with writer_turn(tmp_path) as first:
        mine = first.token
    (tmp_path / GENERATION_FILE).write_bytes(b"\xff\xfe garbage \x00\n")
    with writer_turn(tmp_path) as turn:
        assert turn.changed_since(mine)
        fresh = turn.token
    assert read_generation(tmp_path) == fresh
