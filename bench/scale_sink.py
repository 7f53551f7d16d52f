"""Benchmark: what each partition costs the sink, beside Spark's Parquet sink of the same batch.

    python bench/scale_sink.py [--partitions 8,64,256,1024] [--rows 5000,200000] [--repeat 5]
                               [--block 3] [--warmup 2] [--encoder auto|jvm|python] [--phases]

The rows of bench/scale_read.py (``rows()``: random 16-byte keys, 100-byte values, half of each
value compressible), one cached DataFrame of two Spark partitions per row count (a scan of a
Parquet file of them: ``batch_frame``), as a micro-batch of a local[2] streaming query. For each
row count, in one Spark session:

* for each partition count N a new ``KafkaLogSink`` (lz4) into a new log dir writes batch 0,
  which also creates the topic of N partitions: the *first* batch a user sees; then
  ``--warmup`` untimed batches;
* ``--repeat`` rounds, each of ``--block`` consecutive *warm* batches of every N's sink (its
  next batch ids: whole transactions, bookkeeping and the flush each batch leaves to the next
  included, as in a running query) and one write of Spark's Parquet writer of the same
  DataFrame into a new directory, the order of the sides reversed every other round. The
  partition counts share every round, so a slow stretch of this shared machine falls on all
  of them alike; after each side the filesystem is synced, untimed (Parquet's files, and a
  sink's last flush, whose remaining marks its own next batch still pays), so that no side's
  writeback runs into the next side's time. The sinks stay open side by side, so their
  partitions share the process's descriptor budget (``log.max.open.files``: half of
  ``ulimit -n``); over it, a block's first batch reopens what the other sinks' blocks closed.

One untimed batch of each writer runs first (JIT, the encoder jar, Python workers). Printed: the
command, per row count and N the first batch, the warm batch median (and best) of wall time and
of the CPU seconds of the whole process tree (driver, JVM, Python workers: on a shared machine
less noisy than wall time), Parquet's median in the same rounds and the ratio of the two wall
medians; then, per row count, the warm medians at the largest N over the smallest (the issue's
goal: 1,024 within 1.5x of 8) and the median over rounds of each round's own ratio.

``--phases``: also the median of each step of the driver's warm batches (``_sink_phases.py``:
the encode job, what runs beside it, the checks, the staging files' fsync, the decision, the
appends) per row and partition count, in milliseconds.

``run()`` returns the figures as dicts, for a driver that runs several benchmarks in one session.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _process import tree_cpu_seconds
from _sink_phases import STEPS, PhaseTimers, phase_lines
from scale_read import rows as scale_rows
from spark_settings import spark_builder

from kafkatier.sink import KafkaLogSink

K = TypeVar("K")  # a side of a side-by-side benchmark

TOPIC = "scale"
DEFAULT_PARTITIONS = (8, 64, 256, 1024)
DEFAULT_ROWS = (5_000, 200_000)
BLOCK = 3  # consecutive warm batches of one sink in a round


def timed(action: Callable[[], None]) -> tuple[float, float]:
    """Wall and process-tree CPU seconds of ``action``."""
    cpu, began = tree_cpu_seconds(), time.perf_counter()
    action()
    return time.perf_counter() - began, tree_cpu_seconds() - cpu


def batch_frame(spark: Any, n: int, partitions: int = 2, work: Path | None = None) -> Any:
    """``n`` rows of bench/scale_read.py in a cached DataFrame of ``partitions`` partitions,
    read from a Parquet file written into ``work`` (a new temporary directory if None): the
    small plan of a streaming source's micro-batch. A frame made from local data instead
    (``createDataFrame`` of a pandas frame, as this benchmark did before 2026-11-28) carries
    its rows in its plan: Spark then took 30-100 ms a batch at 200,000 rows to analyse and
    optimise it (the sink's select and size estimate, and the Parquet writer's plan alike),
    against 15-25 ms for the file's (ad hoc, ``/work/tmp/plan_cost2.py``)."""
    import pyarrow.parquet as pq

    where = Path(tempfile.mkdtemp(prefix="kafkatier-batch-") if work is None else work)
    path = where / f"batch-{n}.parquet"
    pq.write_table(scale_rows(n), path)
    df = spark.read.parquet(str(path)).repartition(partitions).cache()
    df.count()
    return df


class SinkRun:
    """One sink writing one topic of ``partitions`` partitions in its own log dir."""

    def __init__(self, root: Path, partitions: int, encoder: str,
                 max_tasks: int | None = None) -> None:  # fmt: skip
        self.root = root
        self.sink = KafkaLogSink(root / "logs", topic=TOPIC, partitions=partitions,
                                 compression="lz4", encoder=encoder,
                                 max_tasks=max_tasks)  # fmt: skip
        self.batch_id = 0

    def write(self, df: Any) -> None:
        self.sink(df, self.batch_id)
        self.batch_id += 1

    def writer(self, df: Any) -> Callable[[], None]:
        """:meth:`write` of ``df``, to be timed."""
        return functools.partial(self.write, df)

    def close(self) -> None:
        self.sink.close()
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def side_by_side(
    name: str, sides: Mapping[K, int], rows: int
) -> Iterator[tuple[Any, dict[K, SinkRun]]]:
    """A Spark session named ``name``, :func:`batch_frame` of ``rows`` rows, and one
    :class:`SinkRun` a side (``sides``: each one's partition count), for a benchmark that runs
    them side by side; every sink closed, its files and the session gone, after."""
    spark = spark_builder(name).config("spark.ui.showConsoleProgress", "false").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    work = Path(tempfile.mkdtemp(prefix=f"{name}-"))
    runs = {side: SinkRun(work / f"sink-{i}", n, "auto")
            for i, (side, n) in enumerate(sides.items())}  # fmt: skip
    try:
        yield batch_frame(spark, rows, work=work), runs
    finally:
        for run in runs.values():
            run.close()
        shutil.rmtree(work, ignore_errors=True)
        spark.stop()


def block_arguments(doc: str, script: str, rounds: int, block: int,
                    warmup: int) -> tuple[argparse.Namespace, list[int]]:  # fmt: skip
    """The side-by-side sink benchmarks' options (``--partitions``, ``--rows``, ``--rounds``,
    ``--block``, ``--warmup``; ``doc``'s first paragraph their help) and the partition counts,
    sorted, once the command and the machine's cores and load are printed."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--partitions", default="8,1024")
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--block", type=int, default=block)
    parser.add_argument("--warmup", type=int, default=warmup)
    args = parser.parse_args()
    print(f"command: python bench/{script} " + " ".join(sys.argv[1:]))
    print(f"cores: {os.cpu_count()}, load average before: {os.getloadavg()[0]:.1f}", flush=True)
    return args, sorted(int(x) for x in args.partitions.split(","))


def measure(spark_df: Any, work: Path, partitions: list[int], repeat: int, warmup: int,
            encoder: str, block: int = BLOCK,
            phases: PhaseTimers | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """The first batch of each partition count, then ``repeat`` rounds of ``block`` warm
    batches of every partition count and one Parquet write (module docstring); ``phases``:
    installed timers, whose figures of each warm batch are kept."""
    runs = {n: SinkRun(work / f"sink-{n}", n, encoder) for n in partitions}
    first: dict[int, float] = {}
    rounds: dict[int, list[list[tuple[float, float]]]] = {n: [] for n in partitions}
    steps: dict[int, list[dict[str, float]]] = {n: [] for n in partitions}

    def warm_batch(n: int) -> tuple[float, float]:
        if phases is not None:
            phases.take()  # what the untimed work since left behind
        figures = timed(runs[n].writer(spark_df))
        if phases is not None:
            steps[n].append(phases.take())
        return figures

    parquet_times: list[float] = []
    try:
        for n, run_ in runs.items():
            first[n] = timed(run_.writer(spark_df))[0]
            for _ in range(warmup):
                run_.write(spark_df)
        for i in range(repeat):
            target = work / f"parquet-{i}"
            sides: list[int | None] = [*runs, None]  # None: Parquet
            for side in sides if i % 2 == 0 else sides[::-1]:
                if side is None:
                    write = functools.partial(spark_df.write.parquet, str(target))
                    parquet_times.append(timed(write)[0])
                else:
                    rounds[side].append([warm_batch(side) for _ in range(block)])
                os.sync()  # no side's writeback runs into the next side's time
            shutil.rmtree(target, ignore_errors=True)
    finally:
        for run_ in runs.values():
            run_.close()
    fewest = rounds[min(partitions)]
    results = [_figures(n, first[n], rounds[n], fewest, parquet_times) for n in partitions]
    for result in results if phases is not None else []:
        mine = steps[result["partitions"]]
        result["phases_ms"] = {name: 1000 * statistics.median(b[name] for b in mine)
                               for name in STEPS}  # fmt: skip
    return results


def _figures(
    n: int, first: float, rounds: list[list[tuple[float, float]]],
    fewest: list[list[tuple[float, float]]], parquet: list[float],
) -> dict[str, Any]:  # fmt: skip
    """One partition count's figures; ``paired_ratio``: the median over rounds of its block's
    median wall time over the fewest partitions' in the same round."""
    times = [t for batch in rounds for t in batch]
    walls = [wall for wall, _ in times]
    paired = [statistics.median(w for w, _ in mine) / statistics.median(w for w, _ in low)
              for mine, low in zip(rounds, fewest, strict=True)]  # fmt: skip
    return {
        "partitions": n,
        "first_s": first,
        "warm_median_s": statistics.median(walls),
        "warm_best_s": min(walls),
        "warm_cpu_median_s": statistics.median(cpu for _, cpu in times),
        "parquet_median_s": statistics.median(parquet),
        "paired_ratio": statistics.median(paired),
        "warm_runs_s": walls,
        "parquet_runs_s": parquet,
    }


def run(
    partitions: list[int],
    rows: list[int] | None = None,
    *,
    repeat: int = 5,
    warmup: int = 2,
    block: int = BLOCK,
    encoder: str = "auto",
    spark: Any = None,
    report: Callable[[dict[str, Any]], None] | None = None,
    phases: bool = False,
) -> list[dict[str, Any]]:
    """Every (row count, partition count) measured in one session (``spark``, or a local[2] one
    started and stopped here); ``report`` sees each result as it comes; ``phases``: with the
    driver's steps timed (``phases_ms`` in each result)."""
    own = spark is None
    if own:
        spark = spark_builder("kafkatier-scale-sink").config(
            "spark.ui.showConsoleProgress", "false"
        ).getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
    work = Path(tempfile.mkdtemp(prefix="kafkatier-scale-sink-"))
    results: list[dict[str, Any]] = []
    timers = PhaseTimers() if phases else None
    if timers is not None:
        timers.install()
    try:
        for count in rows or list(DEFAULT_ROWS):
            df = batch_frame(spark, count, work=work)
            warm_up(df, work, min(partitions), encoder)
            for figures in measure(df, work, sorted(partitions), repeat, warmup, encoder, block,
                                   timers):  # fmt: skip
                result = {"rows": count, **figures}
                results.append(result)
                if report is not None:
                    report(result)
            df.unpersist()
    finally:
        if timers is not None:
            timers.remove()
        shutil.rmtree(work, ignore_errors=True)
        if own:
            spark.stop()
    return results


def warm_up(df: Any, work: Path, partitions: int, encoder: str) -> None:
    """One untimed batch of each writer: JIT, the encoder jar, Python workers."""
    run_ = SinkRun(work / "warm-up", partitions, encoder)
    try:
        run_.write(df)
    finally:
        run_.close()
    df.write.parquet(str(work / "warm-up-parquet"))
    shutil.rmtree(work / "warm-up-parquet", ignore_errors=True)


HEADER = (f"{'rows':>8} {'parts':>6} {'first batch':>12} {'warm median (best)':>20} "
          f"{'warm CPU':>9} {'parquet median':>15} {'sink/parquet':>13}")  # fmt: skip


def row_line(r: dict[str, Any]) -> str:
    ratio = r["warm_median_s"] / r["parquet_median_s"]
    return (f"{r['rows']:>8} {r['partitions']:>6} {r['first_s']:>10.3f} s "
            f"{r['warm_median_s']:>9.3f} s ({r['warm_best_s']:.3f}) "
            f"{r['warm_cpu_median_s']:>7.2f} s "
            f"{r['parquet_median_s']:>13.3f} s {ratio:>13.2f}")  # fmt: skip


def scaling_lines(results: list[dict[str, Any]]) -> list[str]:
    """Per row count: the warm median at the most partitions over the fewest."""
    lines = []
    for count in sorted({r["rows"] for r in results}):
        mine = sorted((r for r in results if r["rows"] == count), key=lambda r: r["partitions"])
        low, high = mine[0], mine[-1]
        if low is high:
            continue
        lines.append(
            f"{count} rows: warm batch at {high['partitions']} partitions / at "
            f"{low['partitions']}: {high['warm_median_s'] / low['warm_median_s']:.2f}x wall "
            f"(median of the rounds' own ratios {high['paired_ratio']:.2f}x), "
            f"{high['warm_cpu_median_s'] / low['warm_cpu_median_s']:.2f}x CPU "
            f"(first batch {high['first_s'] / low['first_s']:.2f}x)"
        )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", default=",".join(map(str, DEFAULT_PARTITIONS)))
    parser.add_argument("--rows", default=",".join(map(str, DEFAULT_ROWS)))
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--block", type=int, default=BLOCK)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--encoder", default="auto", choices=["auto", "jvm", "python"])
    parser.add_argument("--phases", action="store_true", help="time the driver's steps too")
    args = parser.parse_args()
    print("command: python bench/scale_sink.py " + " ".join(sys.argv[1:]))
    print(f"cores: {os.cpu_count()}, load average before: {os.getloadavg()[0]:.1f}")
    print(HEADER, flush=True)
    results = run(
        [int(x) for x in args.partitions.split(",")],
        [int(x) for x in args.rows.split(",")],
        repeat=args.repeat,
        block=args.block,
        warmup=args.warmup,
        encoder=args.encoder,
        report=lambda r: print(row_line(r), flush=True),
        phases=args.phases,
    )
    for line in [*scaling_lines(results), *phase_lines(results)]:
        print(line)
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
