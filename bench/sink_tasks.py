"""Benchmark: what the input's Spark partitions cost the sink at many Kafka partitions.

    python bench/sink_tasks.py [--partitions 1024] [--inputs 16] [--rows 5000,200000]
                               [--repeat 5] [--block 3]

Every encode task writes a record batch for each Kafka partition it has rows for, and the
driver parses and appends each one, so a micro-batch read in many Spark partitions (a Kafka
source's, one a topic partition) costs batches x partitions. The sink encodes in at most as
many tasks as Spark runs at once (``KafkaLogSink(max_tasks=None)``, by ``coalesce``);
``max_tasks=0`` keeps the input's partitions, as before. For each row count, one cached
DataFrame of ``--inputs`` partitions (bench/scale_read.py's rows) into a topic of
``--partitions`` partitions (lz4), two sinks side by side: the default and ``max_tasks=0``;
``--repeat`` rounds of ``--block`` warm batches of each and one Parquet write of the same
DataFrame, the order reversed every other round, the filesystem synced untimed between sides
(bench/scale_sink.py's method). Printed: the command, per row count each side's warm median
(best), the record batches a partition got per micro-batch, and the median over rounds of
each round's own ratio (default / max_tasks=0).
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from scale_sink import BLOCK, SinkRun, batch_frame, timed
from spark_settings import spark_builder

from kafkatier.storage.log.directory import LogDirectory

SIDES = {"default": None, "max_tasks=0": 0}


def batches_per_partition(run: SinkRun) -> float:
    """Data batches a partition got per micro-batch, on average, so far."""
    with LogDirectory(run.root / "logs") as logs:
        data = sum(not b.is_control for log in logs for s in log.segments for b in s.batches())
        partitions = len(logs.logs)
    return data / partitions / run.batch_id


def measure(spark: Any, work: Path, args: argparse.Namespace, rows: int) -> dict[str, Any]:
    df = batch_frame(spark, rows, args.inputs, work)
    runs = {name: SinkRun(work / f"{rows}-{name}", args.partitions, "auto", tasks)
            for name, tasks in SIDES.items()}  # fmt: skip
    times: dict[str | None, list[list[float]]] = {name: [] for name in [*runs, None]}
    try:
        for run in runs.values():
            for _ in range(1 + args.warmup):  # the first creates the topic
                run.write(df)
        for i in range(args.repeat):
            sides: list[str | None] = [*runs, None]  # None: Parquet
            for side in sides if i % 2 == 0 else sides[::-1]:
                if side is None:
                    target = work / f"parquet-{i}"
                    times[None].append([timed(functools.partial(df.write.parquet,
                                                                str(target)))[0]])  # fmt: skip
                    shutil.rmtree(target, ignore_errors=True)
                else:
                    times[side].append([timed(runs[side].writer(df))[0]
                                        for _ in range(args.block)])  # fmt: skip
                os.sync()
        per = {name: batches_per_partition(run) for name, run in runs.items()}
    finally:
        for run in runs.values():
            run.close()
        df.unpersist()
    return {"rows": rows, "times": times, "batches": per}


def report(result: dict[str, Any]) -> None:
    times = result["times"]
    for name in [*SIDES, None]:
        walls = [w for block in times[name] for w in block]
        label = name or "parquet"
        extra = (f", {result['batches'][name]:.1f} record batches a partition per micro-batch"
                 if name else "")  # fmt: skip
        print(f"{result['rows']:>8} rows {label:>12}: warm median {statistics.median(walls):.3f} s "
              f"(best {min(walls):.3f}){extra}")  # fmt: skip
    paired = [statistics.median(a) / statistics.median(b)
              for a, b in zip(times["default"], times["max_tasks=0"], strict=True)]  # fmt: skip
    print(f"{result['rows']:>8} rows: default / max_tasks=0, median of the rounds' own ratios: "
          f"{statistics.median(paired):.2f}")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=1024)
    parser.add_argument("--inputs", type=int, default=16, help="the input's Spark partitions")
    parser.add_argument("--rows", default="5000,200000")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--block", type=int, default=BLOCK)
    parser.add_argument("--warmup", type=int, default=2)
    args = parser.parse_args()
    print("command: python bench/sink_tasks.py " + " ".join(sys.argv[1:]))
    print(f"cores: {os.cpu_count()}, load average before: {os.getloadavg()[0]:.1f}", flush=True)
    spark = spark_builder("kafkatier-sink-tasks").config(
        "spark.ui.showConsoleProgress", "false"
    ).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    work = Path(tempfile.mkdtemp(prefix="kafkatier-sink-tasks-"))
    try:
        for rows in (int(x) for x in args.rows.split(",")):
            report(measure(spark, work, args, rows))
    finally:
        shutil.rmtree(work, ignore_errors=True)
        spark.stop()
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
