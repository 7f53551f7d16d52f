"""What the benchmarks measure of their own processes: CPU seconds of the whole process tree
(driver, Spark's JVM, Python workers: less sensitive than wall time to other load on a shared
machine) and peak resident memory."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def peak_rss_mib(pid: int | str = "self") -> float:
    """The process's peak resident set (VmHWM) in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def jvm_pid(spark: Any) -> int | None:
    proc = getattr(spark.sparkContext._gateway, "proc", None)
    return None if proc is None else int(proc.pid)


TICKS = os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds() -> float:
    """User + system CPU of this process and all its live descendants (JVM, Python workers)."""
    children: dict[int, list[tuple[int, int]]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        children.setdefault(int(fields[1]), []).append(
            (int(entry), int(fields[11]) + int(fields[12]))
        )
    own = Path("/proc/self/stat").read_text()
    fields = own[own.rindex(")") + 2 :].split()
    total = int(fields[11]) + int(fields[12])
    stack = [os.getpid()]
    while stack:
        for pid, ticks in children.get(stack.pop(), []):
            total += ticks
            stack.append(pid)
    return total / TICKS
