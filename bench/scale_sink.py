"""Benchmark: what each partition costs the sink, beside Spark's Parquet sink of the same batch.

    python bench/scale_sink.py [--partitions 8,64,256,1024] [--rows 5000,200000] [--repeat 5]
                               [--warmup 2] [--encoder auto|jvm|python]

The rows of bench/scale_read.py (``rows()``: random 16-byte keys, 100-byte values, half of each
value compressible), one cached DataFrame of two Spark partitions per row count, as a micro-batch
of a local[2] streaming query. For each row count and each partition count N, in one Spark session:

* a new ``KafkaLogSink`` (lz4) into a new log dir writes batch 0, which also creates the topic
  of N partitions: the *first* batch a user sees;
* ``--warmup`` untimed batches, then ``--repeat`` rounds of one *warm* batch (the sink's next
  batch id: a whole transaction, fsyncs and bookkeeping included) and Spark's Parquet writer of
  the same DataFrame into a new directory, back to back, the order alternating from round to
  round. Parquet's files are fsynced after each write, untimed (Spark does not sync them), so
  the sink's flush, which may sync the whole filesystem, does not pay for Parquet's pages.

One untimed batch of each writer runs first (JIT, the encoder jar, Python workers). Printed: the
command, per row count and N the first batch, the warm batch median (and best) of wall time and
of the CPU seconds of the whole process tree (driver, JVM, Python workers: on a shared machine
less noisy than wall time), Parquet's median in the same rounds and the ratio of the two wall
medians; then, per row count, the warm medians at the largest N over the smallest (the issue's
goal: 1,024 within 1.5x of 8).

``run()`` returns the figures as dicts, for a driver that runs several benchmarks in one session.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _process import tree_cpu_seconds
from scale_read import rows as scale_rows
from spark_settings import spark_builder

from kafkatier.sink import KafkaLogSink

TOPIC = "scale"
DEFAULT_PARTITIONS = (8, 64, 256, 1024)
DEFAULT_ROWS = (5_000, 200_000)


def timed(action: Callable[[], None]) -> tuple[float, float]:
    """Wall and process-tree CPU seconds of ``action``."""
    cpu, began = tree_cpu_seconds(), time.perf_counter()
    action()
    return time.perf_counter() - began, tree_cpu_seconds() - cpu


def sync_tree(root: Path) -> None:
    """fsync every file below ``root`` (module docstring)."""
    for path in root.rglob("*"):
        if path.is_file():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


def batch_frame(spark: Any, n: int) -> Any:
    """``n`` rows of bench/scale_read.py in a cached DataFrame of two partitions."""
    df = spark.createDataFrame(scale_rows(n).to_pandas()).repartition(2).cache()
    df.count()
    return df


class SinkRun:
    """One sink writing one topic of ``partitions`` partitions in its own log dir."""

    def __init__(self, root: Path, partitions: int, encoder: str) -> None:
        self.root = root
        self.sink = KafkaLogSink(root / "logs", topic=TOPIC, partitions=partitions,
                                 compression="lz4", encoder=encoder)  # fmt: skip
        self.batch_id = 0

    def write(self, df: Any) -> None:
        self.sink(df, self.batch_id)
        self.batch_id += 1

    def close(self) -> None:
        self.sink.close()
        shutil.rmtree(self.root, ignore_errors=True)


def measure(spark_df: Any, work: Path, partitions: int, repeat: int, warmup: int,
            encoder: str) -> dict[str, Any]:  # fmt: skip
    """The first batch, then ``repeat`` warm batches beside Parquet writes (module docstring)."""
    run = SinkRun(work / f"sink-{partitions}", partitions, encoder)
    sink_times: list[tuple[float, float]] = []
    parquet_times: list[tuple[float, float]] = []
    try:
        first = timed(lambda: run.write(spark_df))[0]
        for _ in range(warmup):
            run.write(spark_df)
        for i in range(repeat):
            target = work / f"parquet-{partitions}-{i}"
            sides = [
                lambda: sink_times.append(timed(lambda: run.write(spark_df))),
                lambda t=target: parquet_times.append(
                    timed(lambda: spark_df.write.parquet(str(t)))
                ),
            ]
            for side in sides if i % 2 == 0 else sides[::-1]:
                side()
                sync_tree(target)
            shutil.rmtree(target, ignore_errors=True)
    finally:
        run.close()
    walls = [wall for wall, _ in sink_times]
    return {
        "partitions": partitions,
        "first_s": first,
        "warm_median_s": statistics.median(walls),
        "warm_best_s": min(walls),
        "warm_cpu_median_s": statistics.median(cpu for _, cpu in sink_times),
        "parquet_median_s": statistics.median(wall for wall, _ in parquet_times),
        "warm_runs_s": walls,
        "parquet_runs_s": [wall for wall, _ in parquet_times],
    }


def run(
    partitions: list[int],
    rows: list[int] | None = None,
    *,
    repeat: int = 5,
    warmup: int = 2,
    encoder: str = "auto",
    spark: Any = None,
    report: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Every (row count, partition count) measured in one session (``spark``, or a local[2] one
    started and stopped here); ``report`` sees each result as it comes."""
    own = spark is None
    if own:
        spark = spark_builder("kafkatier-scale-sink").config(
            "spark.ui.showConsoleProgress", "false"
        ).getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
    work = Path(tempfile.mkdtemp(prefix="kafkatier-scale-sink-"))
    results: list[dict[str, Any]] = []
    try:
        for count in rows or list(DEFAULT_ROWS):
            df = batch_frame(spark, count)
            warm_up(df, work, min(partitions), encoder)
            for n in partitions:
                result = {"rows": count, **measure(df, work, n, repeat, warmup, encoder)}
                results.append(result)
                if report is not None:
                    report(result)
            df.unpersist()
    finally:
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
            f"{low['partitions']}: {high['warm_median_s'] / low['warm_median_s']:.2f}x wall, "
            f"{high['warm_cpu_median_s'] / low['warm_cpu_median_s']:.2f}x CPU "
            f"(first batch {high['first_s'] / low['first_s']:.2f}x)"
        )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", default=",".join(map(str, DEFAULT_PARTITIONS)))
    parser.add_argument("--rows", default=",".join(map(str, DEFAULT_ROWS)))
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--encoder", default="auto", choices=["auto", "jvm", "python"])
    args = parser.parse_args()
    print("command: python bench/scale_sink.py " + " ".join(sys.argv[1:]))
    print(f"cores: {os.cpu_count()}, load average before: {os.getloadavg()[0]:.1f}")
    print(HEADER, flush=True)
    results = run(
        [int(x) for x in args.partitions.split(",")],
        [int(x) for x in args.rows.split(",")],
        repeat=args.repeat,
        warmup=args.warmup,
        encoder=args.encoder,
        report=lambda r: print(row_line(r), flush=True),
    )
    for line in scaling_lines(results):
        print(line)
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
