"""Named crash points for the SIGKILL tests: ``KAFKATIER_TIER_CRASH_AT=<point>[:<n>]`` makes the
process kill itself (SIGKILL, no cleanup at all) the n-th time (default 1st) it reaches
``<point>``. Unset, :func:`crash_point` costs one dictionary lookup."""

from __future__ import annotations

import os
import signal
import threading

ENV = "KAFKATIER_TIER_CRASH_AT"
_counts: dict[str, int] = {}
_lock = threading.Lock()


def crash_point(name: str) -> None:
    spec = os.environ.get(ENV)
    if not spec:
        return
    point, _, nth = spec.partition(":")
    if point != name:
        return
    with _lock:
        _counts[name] = _counts.get(name, 0) + 1
        reached = _counts[name] >= (int(nth) if nth else 1)
    if reached:
        os.kill(os.getpid(), signal.SIGKILL)
