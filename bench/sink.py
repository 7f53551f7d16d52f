"""Benchmark: one micro-batch through KafkaLogSink next to Spark's own Parquet writer.

    python bench/sink.py [--rows N] [--partitions P] [--compression lz4] [--repeat K]

Builds N rows (16-byte keys, 100-byte values) in a cached DataFrame on local[2], then, in the same
run and Spark session, times (best of K; the machine is shared and noisy):

(a) ``df.write.parquet`` (Spark's default snappy compression), and
(b) ``KafkaLogSink(..., partitions=P, compression=...)(df, batch_id)``: a whole transactional
    micro-batch, fsyncs included, into a fresh log dir each time.

Prints the command, both times, the ratio sink/parquet, and the peak RSS of the Python driver
(VmHWM) and of the driver JVM. Spark needs one warm-up of each writer (JIT, numba cache load in
the Python workers), which is excluded from the figures and reported.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "sink"))

from conftest import spark_builder

from kafkatier.sink import KafkaLogSink


def peak_rss_mib(pid: int | str = "self") -> float:
    """The process's peak resident set (VmHWM) in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def jvm_pid(spark: Any) -> int | None:
    proc = getattr(spark.sparkContext._gateway, "proc", None)
    return None if proc is None else int(proc.pid)


def timed(action: Callable[[int], None], repeat: int) -> tuple[float, float]:
    """(warm-up seconds, best of ``repeat``) for ``action(i)``."""
    start = time.perf_counter()
    action(0)
    warm = time.perf_counter() - start
    best = float("inf")
    for i in range(1, repeat + 1):
        start = time.perf_counter()
        action(i)
        best = min(best, time.perf_counter() - start)
    return warm, best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--compression", default="lz4")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    print("command:", " ".join([Path(sys.executable).name, *sys.argv]))
    spark = spark_builder("kafkatier-bench-sink").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    df = spark.range(args.rows, numPartitions=2).selectExpr(
        "CAST(lpad(CAST(id AS STRING), 16, 'k') AS BINARY) AS key",
        "CAST(rpad(CAST(id AS STRING), 100, 'v') AS BINARY) AS value",
    )
    df = df.cache()
    df.count()
    work = Path(tempfile.mkdtemp(prefix="kafkatier-bench-sink-"))
    try:
        parquet = timed(lambda i: df.write.parquet(str(work / f"parquet-{i}")), args.repeat)
        before_sink = peak_rss_mib()

        def write_sink(i: int) -> None:
            sink = KafkaLogSink(
                work / f"logs-{i}", topic="bench", partitions=args.partitions,
                compression=args.compression,
            )  # fmt: skip
            sink(df, 0)

        sink = timed(write_sink, args.repeat)
        log_bytes = sum(f.stat().st_size for f in (work / "logs-1").rglob("*.log"))
        parquet_bytes = sum(f.stat().st_size for f in (work / "parquet-1").rglob("*.parquet"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"rows: {args.rows}, key 16 B, value 100 B, partitions: {args.partitions}, sink "
        f"compression: {args.compression}, parquet: snappy, cores: {os.cpu_count()}"
    )
    print(f"parquet write: {parquet[1]:.2f} s (warm-up {parquet[0]:.2f} s), {parquet_bytes} bytes")
    print(f"sink batch:    {sink[1]:.2f} s (warm-up {sink[0]:.2f} s), {log_bytes} bytes of .log")
    print(f"ratio sink/parquet: {sink[1] / parquet[1]:.2f}")
    pid = jvm_pid(spark)
    jvm = f"{peak_rss_mib(pid):.0f} MiB" if pid else "unknown"
    print(f"peak driver RSS: python {peak_rss_mib():.0f} MiB (before the sink runs: "
          f"{before_sink:.0f} MiB), JVM {jvm}")  # fmt: skip
    spark.stop()


if __name__ == "__main__":
    main()
