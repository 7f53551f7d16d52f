"""Benchmark: one large partition read by Spark, its tasks and its Python workers' memory.

    python bench/read_large.py [--records 8500000] [--rounds 3] [--jvm]

Issue 18 found one partition holding a 1 GiB segment read as a single Spark task (12.1 s on one
core while the other idled) whose Python worker's memory peaked at 767 MiB although
``readChunkBytes`` is 16 MiB. This writes N records (16-byte keys, 100-byte values of random
bytes: lz4 cannot shrink them, so the segment holds about what the issue's did) into one
partition of one topic (``segment.bytes`` 1 GiB, Kafka's default), and the same rows into
Parquet files (pyarrow, 1M rows a file); then, in one Spark session, in an order rotated from
round to round, times ``count()`` and ``agg(sum(length(value)))`` on both (files warm in the page
cache; a first untimed round starts the Python workers). Printed: the command, the segment
size, per query the medians and their ratio, the Spark tasks of each scan, and the peak resident
set (VmHWM) of the largest Spark Python worker and its anonymous memory (after the warm-up
round, which compiles the decoder, the peak of samples taken every 20 ms during the timed
rounds, and after them), against ``readChunkBytes``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from scale_read import QUERIES, kafkatier_frame, reader_session, scan_queries, warm_rounds

from kafkatier.storage.arrow.log import append_arrow
from kafkatier.storage.log.directory import LogDirectory

TOPIC = "large"
STEP = 1_000_000  # rows generated and appended at a time
READ_CHUNK_MIB = 16  # the reader's readChunkBytes default


def binary_column(gen: np.random.Generator, n: int, width: int) -> pa.Array:
    raw = gen.integers(0, 256, size=n * width, dtype=np.uint8).tobytes()
    fixed = pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), n, [None, pa.py_buffer(raw)])
    return fixed.cast(pa.binary())


def write(root: Path, records: int) -> int:
    """The topic and the Parquet files; returns the partition's bytes on disk."""
    gen = np.random.default_rng(1)
    (root / "parquet").mkdir(parents=True)
    with LogDirectory(root / "kafka") as logs:
        logs.topic_configs.update(TOPIC, {"compression.type": "lz4"}, source="bench")
        log = logs.get_or_create(TOPIC, 0)
        for i, start in enumerate(range(0, records, STEP)):
            n = min(STEP, records - start)
            table = pa.table({"key": binary_column(gen, n, 16),
                              "value": binary_column(gen, n, 100)})  # fmt: skip
            append_arrow(log, table, codec="lz4")
            pq.write_table(table, root / "parquet" / f"part-{i:04d}.parquet")
    return sum(f.stat().st_size for f in (root / "kafka").rglob("*.log"))


def worker_memory_mib() -> tuple[float, float]:
    """(VmHWM, RssAnon) of the largest Spark Python worker (``pyspark.daemon`` processes)."""
    peak = anon = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if b"pyspark.daemon" not in Path(f"/proc/{entry}/cmdline").read_bytes():
                continue
            status = Path(f"/proc/{entry}/status").read_text().splitlines()
        except OSError:
            continue
        kib = {line.split(":")[0]: int(line.split()[1]) for line in status
               if line.startswith(("VmHWM:", "RssAnon:"))}  # fmt: skip
        peak = max(peak, kib.get("VmHWM", 0) / 1024)
        anon = max(anon, kib.get("RssAnon", 0) / 1024)
    return peak, anon


class Sampler(threading.Thread):
    """The largest worker's anonymous memory, sampled every 20 ms while running (Linux keeps a
    peak of the whole resident set, VmHWM, but none of its anonymous part)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak_anon = 0.0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.02):
            self.peak_anon = max(self.peak_anon, worker_memory_mib()[1])


def jvm_task_memory(spark: Any) -> Any:
    """``io.kafkatier.source.TaskMemory`` of the session's JVM (its static peak)."""
    return spark.sparkContext._jvm.io.kafkatier.source.TaskMemory


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=8_500_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jvm", action="store_true", help="read with the JVM reader")
    args = parser.parse_args()
    print(f"command: python bench/read_large.py --records {args.records} --rounds {args.rounds}"
          f"{' --jvm' if args.jvm else ''}", flush=True)  # fmt: skip
    reader = "jvm" if args.jvm else "python"
    with reader_session("kafkatier-read-large", "kafkatier-read-large-", reader) as (spark, root):
        size = write(root, args.records)
        frames: dict[str, Any] = {
            "kafkatier": kafkatier_frame(spark, root / "kafka", TOPIC),
            "parquet": lambda: spark.read.parquet(str(root / "parquet")),
        }
        sampler = Sampler()
        sampler.start()
        warm_anon = 0.0

        def warmed_up() -> None:  # the peak of the timed rounds only, above the warm workers
            nonlocal warm_anon
            warm_anon, sampler.peak_anon = worker_memory_mib()[1], 0.0
            if args.jvm:
                jvm_task_memory(spark).reset()

        times = warm_rounds(frames, scan_queries(), args.rounds, warmed_up)
        sampler.done.set()
        peak, anon = worker_memory_mib()
        tasks = {side: frame().rdd.getNumPartitions() for side, frame in frames.items()}
        print(f"records: {args.records}, one partition, {size / 2**20:.0f} MiB of segments; "
              f"Spark tasks: kafkatier {tasks['kafkatier']}, parquet {tasks['parquet']}; "
              f"cores: {os.cpu_count()}")  # fmt: skip
        for name in QUERIES:
            k, p = (statistics.median(times[(side, name)]) for side in frames)
            print(f"{name:<20} kafkatier {k:6.2f} s  parquet {p:6.2f} s  ratio {k / p:5.2f}")
        if args.jvm:
            held = jvm_task_memory(spark).peak() / 2**20
            print(f"largest JVM reader task: held {held:.1f} MiB at most (read buffer and column "
                  f"vectors; readChunkBytes {READ_CHUNK_MIB} MiB)")  # fmt: skip
            return 0
        print(f"largest Python worker: peak RSS {peak:.0f} MiB (file pages included); anonymous "
              f"memory {warm_anon:.0f} MiB after the warm-up round, peak {sampler.peak_anon:.0f} "
              f"MiB in the timed rounds (sampled every 20 ms), {anon:.0f} MiB after them "
              f"(readChunkBytes {READ_CHUNK_MIB} MiB)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
