"""Benchmark: the memory a ``TailCache`` keeps a partition, however long its active segment.

    python bench/tail_cache_memory.py [--partitions 16] [--batches 1000,20000]

For each count of batches: ``--partitions`` partitions of that many one-record batches in their
active segments, one committed ``scan_bounds`` of each through a fresh cache; tracemalloc counts
what the cache still holds once the scans are done (all it keeps: a ``TailState`` a partition).
Printed: the command, and per count the bytes a partition (stop 72's cache kept every header:
241 bytes a batch).
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import tracemalloc
from pathlib import Path

from kafkatier.storage.log.bounds import scan_bounds
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.readonly import ReadOnlyPartition
from kafkatier.storage.log.tail_cache import TailCache
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record


def held(root: Path, partitions: int) -> int:
    """Bytes the cache holds after scanning every partition."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    cache = TailCache()
    for p in range(partitions):
        with ReadOnlyPartition(root, "t", p) as part:
            scan_bounds(part, True, cache)
    gc.collect()
    with_cache = tracemalloc.get_traced_memory()[0]
    assert cache.held == partitions
    del cache
    gc.collect()
    without = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return max(with_cache - before, 0) - max(without - before, 0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=16)
    parser.add_argument("--batches", default="1000,20000")
    args = parser.parse_args()
    print(f"command: python bench/tail_cache_memory.py --partitions {args.partitions} "
          f"--batches {args.batches}")  # fmt: skip
    for batches in map(int, args.batches.split(",")):
        with tempfile.TemporaryDirectory() as tmp, LogDirectory(Path(tmp)) as logs:
            for p in range(args.partitions):
                log = logs.get_or_create("t", p)
                for i in range(batches):
                    log.append(build_batch([Record(i, 1_700_000_000_000 + i, b"k", b"v")]))
            held(Path(tmp), args.partitions)  # imports and first-use caches, not counted
            kept = held(Path(tmp), args.partitions)
        print(f"{batches:>8,} batches a partition: {kept / args.partitions:8.0f} bytes a "
              f"partition kept (stop 72: {241 * batches:,})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
