"""Benchmark: the memory a ``TailCache`` header costs (its bound, ``MAX_HEADERS``, is in headers).

    python bench/tail_cache_memory.py [--batches 50000]

One partition of ``--batches`` one-record batches, its last segment's headers put in a fresh
cache; tracemalloc counts what the cache allocated. Printed: the command, bytes per header, and
what ``MAX_HEADERS`` headers then hold.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import tracemalloc
from pathlib import Path

from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.readonly import ReadOnlyPartition
from kafkatier.storage.log.tail_cache import MAX_HEADERS, TailCache
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=50_000)
    args = parser.parse_args()
    print(f"command: python bench/tail_cache_memory.py --batches {args.batches}")
    with tempfile.TemporaryDirectory() as tmp:
        with LogDirectory(Path(tmp)) as logs:
            log = logs.get_or_create("t", 0)
            for i in range(args.batches):
                log.append(build_batch([Record(i, 1_700_000_000_000 + i, b"k", b"v")]))
        cache = TailCache()
        tracemalloc.start()
        with ReadOnlyPartition(Path(tmp), "t", 0) as part:
            before = tracemalloc.get_traced_memory()[0]
            cache.headers(part)
            used = tracemalloc.get_traced_memory()[0] - before
    per = used / cache.held[1]
    print(f"{per:.0f} bytes a header; MAX_HEADERS ({MAX_HEADERS:,}) hold "
          f"{per * MAX_HEADERS / 2**20:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
