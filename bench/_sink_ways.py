"""Two or more ways of the sink's driver compared batch by batch in one process
(``bench/sink_carried.py``, ``bench/sink_writes.py``): the micro-batch of
``scale_sink.batch_frame`` written by one sink per partition count, each round running every way
in alternating order; for each way and sink the way is set, one batch runs untimed (it fills or
empties what the way keeps), then ``block`` timed batches. Each batch's appends
(``append.write_all``, timed around the call) are kept beside its wall time."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Mapping
from typing import Any

from scale_sink import SinkRun, side_by_side

from kafkatier.sink import sink as sink_module

Way = Callable[[SinkRun], None]  # sets a way on a sink's run before its batches
Times = dict[tuple[str, int], list[tuple[float, float]]]


def measure(name: str, ways: Mapping[str, Way], partitions: list[int], rows: int, rounds: int,
            block: int, warmup: int) -> Times:  # fmt: skip
    """(batch, appends) wall seconds of every timed batch, per (way, partition count)."""
    appends: list[float] = []
    write_all = sink_module.write_all

    def timed_write_all(*args: Any, **kwargs: Any) -> None:
        began = time.perf_counter()
        write_all(*args, **kwargs)
        appends.append(time.perf_counter() - began)

    times: Times = {(way, n): [] for way in ways for n in partitions}
    with side_by_side(name, {n: n for n in partitions}, rows) as (df, runs):
        sink_module.write_all = timed_write_all  # type: ignore[assignment]
        try:
            for run in runs.values():
                for _ in range(warmup):
                    run.write(df)
            for i in range(rounds):
                for way in list(ways) if i % 2 == 0 else list(ways)[::-1]:
                    for n, run in runs.items():
                        ways[way](run)
                        run.write(df)
                        for _ in range(block):
                            began = time.perf_counter()
                            run.write(df)
                            times[(way, n)].append((time.perf_counter() - began, appends[-1]))
        finally:
            sink_module.write_all = write_all
    return times


def report(times: Times, partitions: list[int]) -> None:
    """Per way and partition count the median batch and appends; per way the most partitions
    over the fewest."""
    print(f"{'way':>8} {'parts':>6} {'batch':>9} {'appends':>9} {'batches':>8}")
    medians = {}
    ways = list(dict.fromkeys(way for way, _ in times))
    for (way, n), pairs in times.items():
        batch = statistics.median(b for b, _ in pairs)
        medians[(way, n)] = batch
        appends = statistics.median(a for _, a in pairs)
        print(f"{way:>8} {n:>6} {batch * 1000:>6.1f} ms {appends * 1000:>6.1f} ms {len(pairs):>8}")
    low, high = partitions[0], partitions[-1]
    for way in ways:
        ratio = medians[(way, high)] / medians[(way, low)]
        print(f"{way}: a batch at {high} partitions / at {low}: {ratio:.2f}x (medians)")
    print(f"load average after: {os.getloadavg()[0]:.1f}")
