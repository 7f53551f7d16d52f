"""Benchmark: what each partition costs the reader, beside Spark's Parquet scan of the same rows.

    python bench/scale.py [--partitions 8,128,1024] [--records 200000] [--rounds 3]

For each partition count N, the same records (16-byte keys, 100-byte values, lz4) are written
once with kafkatier's log engine into one topic of N partitions, and once as N Parquet files
(Spark's own writer, one file per Kafka partition, the same rows). Then, in one Spark session,
each round times back to back, in an order rotated from round to round (the machine is shared
and noisy, so every side of a round sees the same conditions), two queries over each (and over
the Kafka topic read as before the planning by bytes, one Spark task per Kafka partition, with
``openCostInBytes`` at 128 MiB):

* ``count()``;
* ``agg(sum(length(value)))``, which must read every value.

The page cache is dropped between writes and reads when this process may (root): the first
round reads from disk, later rounds warm. Printed: per N and query, the median of the rounds
for kafkatier and Parquet, their ratio, and the Spark tasks each query ran.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from spark_settings import spark_builder

from kafkatier.storage.arrow.log import append_arrow
from kafkatier.storage.log.directory import LogDirectory

TOPIC = "scale"


def rows(n: int, seed: int = 1) -> pa.Table:
    gen = np.random.default_rng(seed)
    keys = gen.integers(0, 256, size=(n, 16), dtype=np.uint8)
    values = gen.integers(0, 256, size=(n, 100), dtype=np.uint8)
    values[:, 50:] = 65  # half compressible, as JSON-ish values are
    return pa.table({
        "key": pa.array([bytes(k) for k in keys], pa.binary()),
        "value": pa.array([bytes(v) for v in values], pa.binary()),
    })  # fmt: skip


def write_kafka(path: Path, table: pa.Table, partitions: int) -> None:
    per = -(-table.num_rows // partitions)
    with LogDirectory(path) as logs:
        logs.topic_configs.update(TOPIC, {"compression.type": "lz4"}, source="bench")
        for p in range(partitions):
            log = logs.get_or_create(TOPIC, p)
            append_arrow(log, table.slice(p * per, per))


def write_parquet(spark: Any, path: Path, table: pa.Table, partitions: int) -> None:
    df = spark.createDataFrame(table.to_pandas()).repartition(partitions)
    df.write.parquet(str(path))


def drop_caches() -> None:
    try:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError:
        pass


def timed(run: Any) -> float:
    began = time.perf_counter()
    run()
    return time.perf_counter() - began


def queries(spark: Any, kafka: Path, parquet: Path) -> dict[str, dict[str, Any]]:
    from pyspark.sql import functions as F

    def kafkatier(**options: str) -> Any:
        return lambda: (spark.read.format("kafkatier").option("subscribe", TOPIC)
                        .options(**options).load(str(kafka)))  # fmt: skip

    frames = {"kafkatier": kafkatier(), "parquet": lambda: spark.read.parquet(str(parquet)),
              "per-partition": kafkatier(openCostInBytes=str(128 << 20))}  # fmt: skip
    return {
        side: {
            "count": lambda f=frame: f().count(),
            "sum(length(value))": lambda f=frame: f().agg(F.sum(F.length("value"))).collect(),
            "tasks": frame().rdd.getNumPartitions(),
        }
        for side, frame in frames.items()
    }


def bench_partitions(spark: Any, root: Path, table: pa.Table, n: int, rounds: int) -> None:
    kafka, parquet = root / f"kafka-{n}", root / f"parquet-{n}"
    write_kafka(kafka, table, n)
    write_parquet(spark, parquet, table, n)
    drop_caches()
    q = queries(spark, kafka, parquet)
    times: dict[tuple[str, str], list[float]] = {}
    sides = ["kafkatier", "parquet", "per-partition"]
    for r in range(rounds):
        order = sides[r % 3:] + sides[:r % 3]
        for name in ("count", "sum(length(value))"):
            for side in order:
                times.setdefault((side, name), []).append(timed(q[side][name]))
    for name in ("count", "sum(length(value))"):
        k, p, old = (statistics.median(times[(s, name)]) for s in sides)
        first = times[("kafkatier", name)][0]
        print(f"{n:>6} {name:<20} kafkatier {k:6.2f} s (first {first:5.2f}, "
              f"{q['kafkatier']['tasks']:>4} tasks)  parquet {p:6.2f} s "
              f"({q['parquet']['tasks']:>4} tasks)  ratio {k / p:5.2f}   one task a partition "
              f"{old:6.2f} s ({q['per-partition']['tasks']:>4} tasks)", flush=True)  # fmt: skip
    shutil.rmtree(kafka)
    shutil.rmtree(parquet)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", default="8,128,1024")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    counts = [int(x) for x in args.partitions.split(",")]
    print(f"command: python bench/scale.py --partitions {args.partitions} "
          f"--records {args.records} --rounds {args.rounds}")  # fmt: skip
    spark = (spark_builder("kafkatier-scale").config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())  # fmt: skip
    spark.sparkContext.setLogLevel("ERROR")
    from kafkatier.sink import register_data_source

    register_data_source(spark)
    table = rows(args.records)
    root = Path(tempfile.mkdtemp(prefix="kafkatier-scale-"))
    try:
        print(f"{'parts':>6} {'query':<20} median of {args.rounds} rounds")
        for n in counts:
            bench_partitions(spark, root, table, n, args.rounds)
    finally:
        shutil.rmtree(root, ignore_errors=True)
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
