"""Benchmark: the sink's appends starting each partition from the state the last batch's call
left (``storage/log/commit_fields.Carried``) against reading it from the logs every batch (as
before 2026-12-01), alternating in one process.

    python bench/sink_carried.py [--partitions 8,1024] [--rows 200000] [--rounds 10]
                                 [--block 4] [--warmup 10]

bench/scale_sink.py's micro-batch (``batch_frame``: 16-byte keys, 100-byte values, lz4, a cached
DataFrame of two Spark partitions) written by one sink per partition count. Each round runs
both ways, in alternating order: for each way and sink, one batch that fills (or empties) the
carried state, untimed, then ``--block`` timed batches. The way that reads is the same sink
with a ``Carried`` that never has an entry. Printed: the command, per way and partition count
the median batch and the median of the appends alone (``append.write_all``, timed around the
call), and per way the most partitions over the fewest.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from scale_sink import block_arguments, side_by_side

from kafkatier.sink import sink as sink_module
from kafkatier.storage.log.commit_fields import Carried


class _Reading(Carried):
    """A carried state that never has an entry: every call reads each partition's state."""

    def take(self, *args: Any, **kwargs: Any) -> None:
        return None

    def keep(self, *args: Any, **kwargs: Any) -> None:
        return None


WAYS = {"carried": Carried, "read": _Reading}
Times = dict[tuple[str, int], list[tuple[float, float]]]


def measure(partitions: list[int], rows: int, rounds: int, block: int, warmup: int) -> Times:
    """(batch, appends) wall seconds of every timed batch, per (way, partition count)."""
    appends: list[float] = []
    write_all = sink_module.write_all

    def timed_write_all(*args: Any, **kwargs: Any) -> None:
        began = time.perf_counter()
        write_all(*args, **kwargs)
        appends.append(time.perf_counter() - began)

    times: Times = {(way, n): [] for way in WAYS for n in partitions}
    with side_by_side("kafkatier-sink-carried", {n: n for n in partitions}, rows) as (df, runs):
        sink_module.write_all = timed_write_all  # type: ignore[assignment]
        try:
            for run in runs.values():
                for _ in range(warmup):
                    run.write(df)
            for i in range(rounds):
                for way in list(WAYS) if i % 2 == 0 else list(WAYS)[::-1]:
                    for n, run in runs.items():
                        run.sink._carried = WAYS[way]()
                        run.write(df)  # fills the carried state (or, read, nothing)
                        for _ in range(block):
                            began = time.perf_counter()
                            run.write(df)
                            times[(way, n)].append((time.perf_counter() - began, appends[-1]))
        finally:
            sink_module.write_all = write_all
    return times


def main() -> int:
    args, partitions = block_arguments(__doc__ or "", "sink_carried.py", rounds=10, block=4,
                                       warmup=10)
    times = measure(partitions, args.rows, args.rounds, args.block, args.warmup)
    print(f"{'way':>8} {'parts':>6} {'batch':>9} {'appends':>9} {'batches':>8}")
    medians = {}
    for (way, n), pairs in times.items():
        batch = statistics.median(b for b, _ in pairs)
        medians[(way, n)] = batch
        appends = statistics.median(a for _, a in pairs)
        print(f"{way:>8} {n:>6} {batch * 1000:>6.1f} ms {appends * 1000:>6.1f} ms {len(pairs):>8}")
    low, high = partitions[0], partitions[-1]
    for way in WAYS:
        ratio = medians[(way, high)] / medians[(way, low)]
        print(f"{way}: a batch at {high} partitions / at {low}: {ratio:.2f}x (medians)")
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
