"""Benchmark: streaming micro-batches of the kafkatier source beside Spark's Parquet file stream.

    python bench/read_stream.py [--records 2000000] [--partitions 8] [--batches 8] [--rounds 3]

Issue 18 asks that streaming reads (``readStream.format("kafkatier")``) get the scan's speed per
micro-batch. The rows of ``bench/scale_read.py`` (16-byte keys, 100-byte values, lz4) are written
once as a kafkatier topic of N partitions and once as B Parquet files (Spark's writer). Each side
then runs an ``availableNow`` query, ``select(length(value))`` into Spark's ``noop`` sink, in B
micro-batches of the same rows: ``maxOffsetsPerTrigger`` of records / B for kafkatier,
``maxFilesPerTrigger`` 1 for Parquet. Sides, in an order rotated from round to round, each round
on a fresh checkpoint: kafkatier with the JVM reader (``register_data_source(spark,
reader="jvm")``), kafkatier with the Python reader (``kafkatier_python``), and Parquet.

Printed: the command, per side the median over the rounds of the median micro-batch's
``addBatch`` time (Spark's own progress: reading and processing the batch) and whole trigger
(offsets, planning, commit logs too), of the time from ``start()`` to the first trigger (the
source's start-up: a Python source's stream starts a Python process of its own; the JVM
reader's asks the driver's planner) and of the whole query's time, and the ratios to Parquet.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from scale_read import TOPIC, reader_session, rows, write_kafka, write_parquet

SIDES = ("jvm", "python", "parquet")


def stream(spark: Any, side: str, root: Path, per_batch: int) -> Any:
    """The streaming DataFrame of one side (module docstring)."""
    if side == "parquet":
        schema = spark.read.parquet(str(root / "parquet")).schema
        return (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1)
                .parquet(str(root / "parquet")))  # fmt: skip
    source = "kafkatier" if side == "jvm" else "kafkatier_python"
    return (spark.readStream.format(source).option("subscribe", TOPIC)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", per_batch).load(str(root / "kafka")))  # fmt: skip


class Run(NamedTuple):
    """One query: its median micro-batch ``addBatch`` and trigger times, its time from
    ``start()`` to its first trigger (the source's start-up), the whole query's time, and how
    many micro-batches read rows."""

    add_batch: float
    trigger: float
    first_trigger: float
    query: float
    batches: int


def run_once(spark: Any, side: str, root: Path, per_batch: int, n: int) -> Run:
    checkpoint = root / f"chk-{side}-{n}"
    began = time.time()
    query = (stream(spark, side, root, per_batch).selectExpr("length(value) AS n")
             .writeStream.format("noop").option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())  # fmt: skip
    query.awaitTermination()
    took = time.time() - began
    progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
    first = datetime.fromisoformat(query.recentProgress[0]["timestamp"].replace("Z", "+00:00"))
    return Run(
        statistics.median(p["durationMs"]["addBatch"] / 1000 for p in progress),
        statistics.median(p["durationMs"]["triggerExecution"] / 1000 for p in progress),
        first.timestamp() - began,
        took,
        len(progress),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"command: python bench/read_stream.py --records {args.records} --partitions "
          f"{args.partitions} --batches {args.batches} --rounds {args.rounds}",
          flush=True)  # fmt: skip
    with reader_session("kafkatier-read-stream", "kafkatier-read-stream-", "jvm") as (spark, root):
        table = rows(args.records)
        write_kafka(root / "kafka", table, args.partitions)
        write_parquet(spark, root / "parquet", table, args.batches)
        per_batch = -(-args.records // args.batches)
        found: dict[str, list[Run]] = {side: [] for side in SIDES}
        for r in range(args.rounds + 1):  # round 0 warms up the Python workers, not counted
            order = SIDES[r % len(SIDES) :] + SIDES[: r % len(SIDES)]
            for side in order:
                result = run_once(spark, side, root, per_batch, r)
                if r:
                    found[side].append(result)
        med = {side: Run(*(statistics.median(getattr(r, f) for r in runs) for f in Run._fields))
               for side, runs in found.items()}  # fmt: skip
        base = med["parquet"]
        for side in SIDES:
            m = med[side]
            print(f"{side:<8} micro-batch {m.add_batch:6.3f} s (trigger {m.trigger:6.3f} s, "
                  f"{m.batches:.0f} batches)  first trigger after {m.first_trigger:5.2f} s  "
                  f"query {m.query:6.2f} s  ratio to parquet: micro-batch "
                  f"{m.add_batch / base.add_batch:5.2f}, trigger {m.trigger / base.trigger:5.2f}, "
                  f"query {m.query / base.query:5.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
