"""Benchmark: framing an active segment's batch headers, in Python and in C.

    python bench/tail_walk.py [--batches 80000] [--rounds 5]

One partition of ``--batches`` batches of 10 records (16-byte keys, 100-byte values: about
1.3 KB a batch, as ``bench/read_tail.py`` writes), its ``.log`` framed whole by
``LogFile.headers`` (a Python object a batch) and by ``LogFile.table`` (``storage/native/
headers.c`` where the library is built: rows of int64s), alternately, each ``--rounds`` times,
from the page cache (a query tailing a segment reads what the writer just wrote). Printed: the
command, each walk's best and median, and table over Python.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.tail import LogFile
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=80_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"command: python bench/tail_walk.py --batches {args.batches} --rounds {args.rounds}")
    walks = {"python": lambda log: len(list(log.headers())), "table": lambda log: len(log.table())}
    took: dict[str, list[float]] = {name: [] for name in walks}
    with tempfile.TemporaryDirectory() as tmp:
        with LogDirectory(Path(tmp)) as logs:
            log = logs.get_or_create("t", 0)
            for i in range(args.batches):
                log.append(build_batch([Record(10 * i + j, 1_700_000_000_000, b"key-%012d" % j,
                                               b"v" * 100) for j in range(10)]))  # fmt: skip
        path = str(next((Path(tmp) / "t-0").glob("*.log")))
        size = Path(path).stat().st_size
        for _ in range(args.rounds):
            for name, walk in walks.items():
                with LogFile(path) as file:
                    began = time.perf_counter()
                    assert walk(file) == args.batches
                    took[name].append(time.perf_counter() - began)
    print(f"{size / 2**20:.1f} MiB, {args.batches:,} batches")
    for name, runs in took.items():
        print(f"{name:<6}: best {min(runs):.4f} s, median {statistics.median(runs):.4f} s")
    ratio = statistics.median(took["table"]) / statistics.median(took["python"])
    print(f"table / python (median): {ratio:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
