"""Benchmark: the sink's partitions flushed once every few batches (``kafkatier.sink.flushes``)
against a flush after every batch (as before 2026-12-01), side by side in one run.

    python bench/sink_flush.py [--partitions 8,1024] [--rows 200000] [--rounds 4] [--block 16]
                               [--warmup 8]

bench/scale_sink.py's micro-batch (``batch_frame``: 16-byte keys, 100-byte values, lz4, a cached
DataFrame of two Spark partitions) written by four sinks open side by side, one per partition
count and flush policy: ``deferred`` (the sink's own: a flush when 8 decided batches wait, or
256 MiB of staging files, or 5 s, or a roll) and ``each batch`` (``flushes.MOST_BATCHES`` set to
1 while that sink writes: a flush begun after every batch and finished beside the next one's
job, the sink's way before). Each round runs ``--block`` consecutive batches of every sink, as a
running query writes them (no sync between them: each policy pays its own writeback, in the
batches where it falls), the order of the sides reversed every other round; between sides the
filesystem is synced, untimed, so that no side's writeback runs into another's. Printed: the
command, per partition count and policy the mean and median warm batch (the mean counts the
batches a flush falls on), and per policy the most partitions over the fewest.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from scale_sink import block_arguments, side_by_side

from kafkatier.sink import flushes

POLICIES = {"deferred": flushes.MOST_BATCHES, "each batch": 1}


def measure(partitions: list[int], rows: int, rounds: int, block: int,
            warmup: int) -> dict[tuple[str, int], list[float]]:  # fmt: skip
    """Every warm batch's wall seconds, per (policy, partition count)."""
    sides = [(policy, n) for policy in POLICIES for n in partitions]
    times: dict[tuple[str, int], list[float]] = {side: [] for side in sides}
    with side_by_side("kafkatier-sink-flush", {side: side[1] for side in sides}, rows) as (
        df, runs
    ):
        try:
            for side, run in runs.items():
                flushes.MOST_BATCHES = POLICIES[side[0]]
                for _ in range(warmup):
                    run.write(df)
            for i in range(rounds):
                for side in sides if i % 2 == 0 else sides[::-1]:
                    flushes.MOST_BATCHES = POLICIES[side[0]]
                    os.sync()
                    for _ in range(block):
                        began = time.perf_counter()
                        runs[side].write(df)
                        times[side].append(time.perf_counter() - began)
        finally:  # the sinks' close then flushes whatever waits, whatever the policy
            flushes.MOST_BATCHES = POLICIES["deferred"]
    return times


def main() -> int:
    args, partitions = block_arguments(__doc__ or "", "sink_flush.py", rounds=4, block=16,
                                       warmup=8)
    times = measure(partitions, args.rows, args.rounds, args.block, args.warmup)
    print(f"{'policy':>10} {'parts':>6} {'mean':>9} {'median':>9} {'batches':>8}")
    for (policy, n), walls in times.items():
        print(f"{policy:>10} {n:>6} {statistics.mean(walls):>7.3f} s "
              f"{statistics.median(walls):>7.3f} s {len(walls):>8}")  # fmt: skip
    low, high = partitions[0], partitions[-1]
    for policy in POLICIES:
        a, b = times[(policy, low)], times[(policy, high)]
        mean = statistics.mean(b) / statistics.mean(a)
        median = statistics.median(b) / statistics.median(a)
        print(f"{policy}: {high} partitions / {low}: mean {mean:.2f}x, median {median:.2f}x")
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
