"""Killing a test subprocess with everything it started (a Spark driver's JVM and workers)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path


def kill_group(proc: subprocess.Popen[bytes], poll: float = 0.1) -> int:
    """SIGKILL ``proc``'s whole process group (started with ``start_new_session=True``), reap
    it and wait (30 s at most) until no member is left; returns its exit status."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    rc = proc.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(poll)
    return rc


def spawn(
    script: Path, args: list[str], env: Mapping[str, str], err: Path
) -> subprocess.Popen[bytes]:
    """``script`` run by this Python in a new session (so :func:`kill_group` reaches all it
    starts), stdout discarded, stderr appended to ``err``."""
    with open(err, "ab") as out:
        return subprocess.Popen(
            [sys.executable, str(script), *args],
            env=dict(env),
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=out,
        )
