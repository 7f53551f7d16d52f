"""Killing a test subprocess with everything it started (a Spark driver's JVM and workers)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time


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
