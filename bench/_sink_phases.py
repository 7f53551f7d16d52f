"""Phase timers of the sink's micro-batches (``bench/scale_sink.py --phases``): each step of the
driver's protocol (``kafkatier.sink.sink``'s module docstring) timed by wrapping the function
where the sink module calls it, so that a run shows which step grows with the partitions.

"beside the job" runs in the sink's helper thread while the encode job runs (the previous
batch's flush finishing, its index and producer entries set, the producer's next sequences):
it counts in a batch's time only where it outlasts the job. The wrappers cost a few
microseconds a batch; a run with them is not the one to take the headline ratio from.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from typing import Any

import kafkatier.sink.sink as sink_module

# phase name -> (owner, attribute): what the sink module calls for that step
STEPS: dict[str, tuple[Any, str]] = {
    "encode job": (sink_module.KafkaLogSink, "_encode"),
    "beside the job": (sink_module.KafkaLogSink, "_before_decision"),
    "checks": (sink_module, "check_all"),
    "disk space": (sink_module, "check_space"),
    "staging fsync": (sink_module, "sync_files"),
    "decision": (sink_module.StateFile, "save"),
    "appends": (sink_module, "write_all"),
}


class PhaseTimers:
    """The wrappers, installed by :meth:`install`; :meth:`take` gives the seconds each phase
    took since the last call (a phase called twice in a batch counts both)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._current: dict[str, float] = {}
        self._saved: list[tuple[Any, str, Any]] = []

    def install(self) -> None:
        for name, (owner, attribute) in STEPS.items():
            original = getattr(owner, attribute)
            self._saved.append((owner, attribute, original))
            setattr(owner, attribute, self._timed(name, original))

    def remove(self) -> None:
        for owner, attribute, original in reversed(self._saved):
            setattr(owner, attribute, original)
        self._saved.clear()

    def take(self) -> dict[str, float]:
        with self._lock:
            found, self._current = self._current, {}
        return {name: found.get(name, 0.0) for name in STEPS}

    def _timed(self, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                took = time.perf_counter() - started
                with self._lock:
                    self._current[name] = self._current.get(name, 0.0) + took

        return timed


def phase_lines(results: list[dict[str, Any]]) -> list[str]:
    """The phases' medians (``phases_ms`` of each result), a column per (rows, partitions)."""
    timed = [r for r in results if "phases_ms" in r]
    if not timed:
        return []
    heads = "".join(f"{str(r['rows']) + '/' + str(r['partitions']):>14}" for r in timed)
    lines = [f"{'phase (ms, warm median)  rows/partitions:':<42}{heads}"]
    for name in STEPS:
        lines.append(f"{name:<42}" + "".join(f"{r['phases_ms'][name]:>14.1f}" for r in timed))
    return lines
