"""Benchmark: one micro-batch through KafkaLogSink next to Spark's own Parquet writer.

    python bench/sink.py [--rows N] [--partitions P] [--compression lz4] [--repeat K] [--warmup W]
                         [--encoder auto|jvm|python] [--input cached|parquet]

Builds N rows (16-byte keys, 100-byte values) on local[2]: ``--input cached`` (the default) in a
cached DataFrame; ``--input parquet`` written once to 8 Parquet files and read from them by every
write, uncached (they are in the page cache, having just been written), and each round also
times that read alone (Spark's ``noop`` writer). A batch DataFrame over Parquet files, which the
JVM encoder reads from the scan's column batches; a streaming micro-batch over a file source
reaches ``foreachBatch`` as a scan of its computed rows, and ``bench/sink_stream.py`` measures
that case.
Then, in the same run and Spark session, alternating so that both see the same machine load, K
times each:

(a) ``df.write.parquet`` (Spark's default snappy compression) into a new directory, and
(b) one micro-batch through ``KafkaLogSink(..., partitions=P, compression=..., encoder=...)``: the
    next batch id of one sink on one topic (as a streaming query writes), a whole transaction,
    fsyncs included. ``--encoder python`` measures the Python-worker encoder (``mapInArrow``) that
    the sink falls back to without a JDK; the default is the JVM encoder (sink/jvm.py).

Reports the best (and median) wall time of each, their ratio, the CPU seconds of the whole
process tree (driver, JVM, Python workers: less sensitive than wall time to other load on a
shared machine) and the peak RSS of the Python driver (VmHWM) and the driver JVM. The W warm-up
rounds of both writers (the JVM's JIT keeps speeding both up for a few rounds; the encoder jar is
loaded, or numba's cache in the Python workers; the sink's first batch, which also creates the
topic) are excluded, as a
long-running streaming query would not see them; the first batch of a fresh sink into a new
topic is timed separately.
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

from _process import jvm_pid, peak_rss_mib, tree_cpu_seconds
from spark_settings import spark_builder

from kafkatier.sink import KafkaLogSink


class Timings:
    """Wall and CPU seconds of each run of one action."""

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []

    def run(self, action: Callable[[], None]) -> None:
        cpu, start = tree_cpu_seconds(), time.perf_counter()
        action()
        self.wall.append(time.perf_counter() - start)
        self.cpu.append(tree_cpu_seconds() - cpu)

    def summary(self) -> str:
        return (f"best {min(self.wall):.2f} s, median {statistics.median(self.wall):.2f} s "
                f"(runs: {' '.join(f'{w:.2f}' for w in self.wall)}), "
                f"CPU best {min(self.cpu):.2f} s")  # fmt: skip


def input_frame(spark: Any, df: Any, kind: str, path: Path) -> Any:
    """The rows to write: cached in Spark, or in 8 Parquet files read anew by each write."""
    if kind == "cached":
        cached = df.cache()
        cached.count()
        return cached
    df.repartition(8).write.parquet(str(path))
    return spark.read.parquet(str(path))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--compression", default="lz4")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=3, help="untimed rounds of both writers")
    parser.add_argument("--encoder", default="auto", choices=["auto", "jvm", "python"])
    parser.add_argument("--input", default="cached", choices=["cached", "parquet"])
    args = parser.parse_args()
    print("command:", " ".join([Path(sys.executable).name, *sys.argv]))
    spark = (
        spark_builder("kafkatier-bench-sink")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    df = spark.range(args.rows, numPartitions=2).selectExpr(
        "CAST(lpad(CAST(id AS STRING), 16, 'k') AS BINARY) AS key",
        "CAST(rpad(CAST(id AS STRING), 100, 'v') AS BINARY) AS value",
    )
    load = os.getloadavg()[0]
    work = Path(tempfile.mkdtemp(prefix="kafkatier-bench-sink-"))
    df = input_frame(spark, df, args.input, work / "input")
    parquet, sink_times, first, read_only = Timings(), Timings(), Timings(), Timings()
    try:
        sink = KafkaLogSink(
            work / "logs", topic="bench", partitions=args.partitions,
            compression=args.compression, encoder=args.encoder,
        )  # fmt: skip
        warm = time.perf_counter()
        for i in range(args.warmup):
            df.write.parquet(str(work / f"parquet-warm-{i}"))
            sink(df, i)
        warm = time.perf_counter() - warm
        before_sink = peak_rss_mib()
        for i in range(args.warmup, args.warmup + args.repeat):
            parquet.run(lambda i=i: df.write.parquet(str(work / f"parquet-{i}")))
            if args.input != "cached":  # what reading the input alone costs either writer
                read_only.run(lambda: df.write.format("noop").mode("overwrite").save())
            sink_times.run(lambda i=i: sink(df, i))
        fresh = KafkaLogSink(
            work / "fresh", topic="bench", partitions=args.partitions,
            compression=args.compression, encoder=args.encoder,
        )  # fmt: skip
        first.run(lambda: fresh(df, 0))
        log_bytes = sum(f.stat().st_size for f in (work / "fresh").rglob("*.log"))
        parquet_bytes = sum(
            f.stat().st_size for f in (work / f"parquet-{args.warmup}").rglob("*.parquet")
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"rows: {args.rows}, key 16 B, value 100 B, partitions: {args.partitions}, sink "
        f"compression: {args.compression}, encoder: {args.encoder} ("
        f"{'jvm' if sink.encoder.loaded is not None else 'python'} used), parquet: snappy, "
        f"input: {args.input}, cores: {os.cpu_count()}, "
        f"load average before: {load:.1f}"
    )
    print(f"parquet write: {parquet.summary()}, {parquet_bytes} bytes")
    if read_only.wall:
        print(f"input read alone (Spark's noop writer): {read_only.summary()}")
    print(f"sink batch:    {sink_times.summary()}, {log_bytes} bytes of .log per batch")
    print(f"ratio sink/parquet: {min(sink_times.wall) / min(parquet.wall):.2f} (best wall), "
          f"{statistics.median(sink_times.wall) / statistics.median(parquet.wall):.2f} (median "
          f"wall), {min(sink_times.cpu) / min(parquet.cpu):.2f} (CPU)")  # fmt: skip
    print(f"first batch of a new sink into a new topic: {first.wall[0]:.2f} s; "
          f"warm-ups: {warm:.2f} s")  # fmt: skip
    pid = jvm_pid(spark)
    jvm = f"{peak_rss_mib(pid):.0f} MiB" if pid else "unknown"
    print(f"peak driver RSS: python {peak_rss_mib():.0f} MiB (after the warm-ups: "
          f"{before_sink:.0f} MiB), JVM {jvm}")  # fmt: skip
    spark.stop()


if __name__ == "__main__":
    main()
