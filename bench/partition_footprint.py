"""Benchmark: what one new partition takes (inodes, disk, this process's memory), the figures
``storage/log/creation.check_room`` refuses a count by, and what the writers' per-batch
``LogDirectory.partition_count`` costs at that many partitions.

    python bench/partition_footprint.py [N ...]   (default 1024 4096)

For each N a new log dir under the working directory's filesystem (``./bench-footprint-*``),
one ``create_partitions`` of N partitions, the filesystem's free inodes and bytes
(``statvfs``) and the process's resident size (``/proc/self/statm``) before and after, then the
median of 200 calls of ``partition_count``. Prints the command and per-partition figures.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from kafkatier.storage.log.creation import (
    BYTES_PER_PARTITION,
    INODES_PER_PARTITION,
    MEMORY_PER_PARTITION,
)
from kafkatier.storage.log.directory import LogDirectory


def _resident() -> int:
    with open("/proc/self/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _free(path: Path) -> tuple[int, int]:
    fs = os.statvfs(path)
    return fs.f_ffree, fs.f_bfree * fs.f_frsize


def measure(count: int) -> dict[str, float]:
    work = Path(tempfile.mkdtemp(prefix="bench-footprint-", dir="."))
    try:
        with LogDirectory(work / "logs") as logs:
            os.sync()
            inodes, space = _free(work)
            resident = _resident()
            logs.create_partitions("t", count)
            os.sync()
            inodes_after, space_after = _free(work)
            grown = _resident() - resident
            times = []
            for _ in range(200):
                start = time.perf_counter()
                logs.partition_count("t")
                times.append(time.perf_counter() - start)
        return {"inodes": (inodes - inodes_after) / count,
                "disk": (space - space_after) / count, "memory": grown / count,
                "count_ms": statistics.median(times) * 1000}  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description="What one new partition takes.")
    parser.add_argument("counts", nargs="*", type=int, default=[1024, 4096],
                        help="partition counts to create (default 1024 4096)")  # fmt: skip
    counts = parser.parse_args(argv).counts
    print("command: python bench/partition_footprint.py " + " ".join(map(str, counts)))
    print(f"check_room's figures: {INODES_PER_PARTITION} inodes, {BYTES_PER_PARTITION} bytes "
          f"of disk, {MEMORY_PER_PARTITION} bytes of memory a partition")  # fmt: skip
    print(f"{'partitions':>10}  {'inodes':>7}  {'disk B':>8}  {'memory B':>9}  "
          f"{'partition_count ms':>18}")  # fmt: skip
    for count in counts:
        m = measure(count)
        print(f"{count:>10}  {m['inodes']:>7.2f}  {m['disk']:>8.0f}  {m['memory']:>9.0f}  "
              f"{m['count_ms']:>18.3f}")  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
