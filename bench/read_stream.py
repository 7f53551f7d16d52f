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
``addBatch`` time (Spark's own progress: reading and processing the batch) and of the whole
query's time, and the ratios to Parquet.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

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


def run_once(spark: Any, side: str, root: Path, per_batch: int, n: int) -> tuple[float, float, int]:
    """(median addBatch seconds, whole query seconds, micro-batches) of one query."""
    checkpoint = root / f"chk-{side}-{n}"
    began = time.perf_counter()
    query = (stream(spark, side, root, per_batch).selectExpr("length(value) AS n")
             .writeStream.format("noop").option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())  # fmt: skip
    query.awaitTermination()
    took = time.perf_counter() - began
    batches = [p["durationMs"]["addBatch"] / 1000 for p in query.recentProgress
               if p["numInputRows"] > 0 and "addBatch" in p["durationMs"]]  # fmt: skip
    return statistics.median(batches), took, len(batches)


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
        found: dict[str, list[tuple[float, float, int]]] = {side: [] for side in SIDES}
        for r in range(args.rounds + 1):  # round 0 warms up the Python workers, not counted
            order = SIDES[r % len(SIDES) :] + SIDES[: r % len(SIDES)]
            for side in order:
                result = run_once(spark, side, root, per_batch, r)
                if r:
                    found[side].append(result)
        med = {side: (statistics.median(b for b, _, _ in runs),
                      statistics.median(q for _, q, _ in runs), runs[-1][2])
               for side, runs in found.items()}  # fmt: skip
        for side in SIDES:
            batch, query, count = med[side]
            print(f"{side:<8} micro-batch {batch:6.3f} s ({count} batches)  query {query:6.2f} s  "
                  f"ratio to parquet: micro-batch {batch / med['parquet'][0]:5.2f}, query "
                  f"{query / med['parquet'][1]:5.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
