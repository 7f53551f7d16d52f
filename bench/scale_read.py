"""Benchmark: what each partition costs the reader, beside Spark's Parquet scan of the same rows.

    python bench/scale_read.py [--partitions 8,128,1024] [--records 200000] [--rounds 3]
                          [--per-partition] [--jvm]

``run(partitions, records, rounds)`` returns the figures as dicts for a driver script.

For each partition count N, the same records (16-byte keys, 100-byte values, lz4) are written
once with kafkatier's log engine into one topic of N partitions, and once as N Parquet files
(Spark's own writer, one file per Kafka partition, the same rows). Then, in one Spark session,
each round times back to back, in an order rotated from round to round (the machine is shared
and noisy, so every side of a round sees the same conditions), two queries over each (and, with
``--per-partition``, over the Kafka topic read as before the planning by bytes, one Spark task
per Kafka partition, with ``openCostInBytes`` at 128 MiB: minutes at 1,024 partitions):

* ``count()``;
* ``agg(sum(length(value)))``, which must read every value.

kafkatier reads with the Python reader, or with ``--jvm`` with the JVM reader
(``register_data_source(spark, reader="jvm")``), the Python reader then timed beside it as a
third side (``python``).

The page cache is dropped before each query of the first round when this process may (root):
the first round reads from disk (the files, and the libraries and jars the page cache held),
later rounds warm. Printed: per N and query, the median of the rounds
for kafkatier and Parquet, their ratio, the first round's times, and the Spark tasks each query
ran; then the driver's planning alone (``DataSourceReader.partitions()``, in this process: the
median of five).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
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


def warm_rounds(
    frames: dict[str, Any], query: dict[str, Any], rounds: int, after_warm_up: Any = None
) -> dict[tuple[str, str], list[float]]:
    """Seconds of each (side, query name): ``query[name](frames[side])`` in ``rounds`` rounds
    after an untimed one (it starts the Python workers; ``after_warm_up`` is called after
    it), the order of the sides rotated from round to round."""
    sides = list(frames)
    times: dict[tuple[str, str], list[float]] = {}
    for r in range(rounds + 1):
        if r == 1 and after_warm_up is not None:
            after_warm_up()
        order = sides[r % len(sides) :] + sides[: r % len(sides)]
        for name in query:
            for side in order:
                took = timed(lambda n=name, s=side: query[n](frames[s]))
                if r:
                    times.setdefault((side, name), []).append(took)
    return times


@contextlib.contextmanager
def reader_session(app: str, prefix: str, reader: str = "python") -> Iterator[tuple[Any, Path]]:
    """A local Spark session with the kafkatier reader registered (``register_data_source``'s
    ``reader``), and a scratch directory; both gone afterwards."""
    spark = (spark_builder(app).config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())  # fmt: skip
    spark.sparkContext.setLogLevel("ERROR")
    from kafkatier.sink import register_data_source

    register_data_source(spark, reader=reader)
    root = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield spark, root
    finally:
        shutil.rmtree(root, ignore_errors=True)
        spark.stop()


def scan_queries() -> dict[str, Callable[[Callable[[], Any]], Any]]:
    """The queries the read benchmarks time, each over a function that makes the DataFrame:
    ``count()`` and ``agg(sum(length(value)))``, which must read every value."""
    from pyspark.sql import functions as F

    return {
        "count": lambda frame: frame().count(),
        "sum(length(value))": lambda frame: frame().agg(F.sum(F.length("value"))).collect(),
    }


def kafkatier_frame(
    spark: Any, path: Path, topic: str = TOPIC, source: str = "kafkatier", **options: str
) -> Callable[[], Any]:
    """What makes the DataFrame of ``topic`` in the log dir ``path``, read by kafkatier (or by
    the Python reader behind the JVM one: ``source="kafkatier_python"``)."""
    return lambda: (spark.read.format(source).option("subscribe", topic)
                    .options(**options).load(str(path)))  # fmt: skip


def queries(spark: Any, kafka: Path, parquet: Path, sides: list[str]) -> dict[str, dict[str, Any]]:
    frames = {
        "kafkatier": kafkatier_frame(spark, kafka),
        "python": kafkatier_frame(spark, kafka, source="kafkatier_python"),
        "parquet": lambda: spark.read.parquet(str(parquet)),
        "per-partition": kafkatier_frame(spark, kafka, openCostInBytes=str(128 << 20)),
    }
    return {
        side: {
            **{name: lambda f=frame, q=q: q(f) for name, q in scan_queries().items()},
            "tasks": frame().rdd.getNumPartitions(),
        }
        for side, frame in frames.items()
        if side in sides
    }


def planning_seconds(kafka: Path) -> float:
    """The driver's planning alone: the median of five ``partitions()`` of a batch reader."""
    from kafkatier.sink.source.datasource import KafkaTierBatchReader
    from kafkatier.sink.source.options import parse_options

    opts = parse_options({"path": str(kafka), "subscribe": TOPIC}, streaming=False)
    return statistics.median(timed(KafkaTierBatchReader(opts).partitions) for _ in range(5))


def bench_partitions(
    spark: Any, root: Path, table: pa.Table, n: int, rounds: int, sides: list[str]
) -> list[dict[str, Any]]:
    """One row per query: medians, first rounds and tasks of each side for N partitions."""
    kafka, parquet = root / f"kafka-{n}", root / f"parquet-{n}"
    write_kafka(kafka, table, n)
    write_parquet(spark, parquet, table, n)
    drop_caches()
    q = queries(spark, kafka, parquet, sides)
    times: dict[tuple[str, str], list[float]] = {}
    for r in range(rounds):
        order = sides[r % len(sides) :] + sides[: r % len(sides)]
        for name in QUERIES:
            for side in order:
                if r == 0:
                    drop_caches()  # each side's first query reads from disk
                times.setdefault((side, name), []).append(timed(q[side][name]))
    plan = planning_seconds(kafka)
    shutil.rmtree(kafka)
    shutil.rmtree(parquet)
    return [
        {"partitions": n, "query": name, "planning": plan,
         **{f"{side} s": statistics.median(times[(side, name)]) for side in sides},
         **{f"{side} first s": times[(side, name)][0] for side in sides},
         **{f"{side} tasks": q[side]["tasks"] for side in sides}}
        for name in QUERIES
    ]  # fmt: skip


QUERIES = ("count", "sum(length(value))")


def run(
    partitions: list[int],
    records: int = 200_000,
    rounds: int = 3,
    per_partition: bool = False,
    jvm: bool = False,
) -> list[dict[str, Any]]:
    """Every figure (module docstring), one dict per partition count and query."""
    table = rows(records)
    found: list[dict[str, Any]] = []
    sides = ["kafkatier", "parquet", *(["python"] if jvm else []),
             *(["per-partition"] if per_partition else [])]  # fmt: skip
    reader = "jvm" if jvm else "python"
    with reader_session("kafkatier-scale", "kafkatier-scale-", reader) as (spark, root):
        for n in partitions:
            found += bench_partitions(spark, root, table, n, rounds, sides)
            print_rows(found[-len(QUERIES) :])
    return found


def print_rows(found: list[dict[str, Any]]) -> None:
    for r in found:
        k, p = r["kafkatier s"], r["parquet s"]
        old = (f"   one task a partition {r['per-partition s']:6.2f} s "
               f"({r['per-partition tasks']:>4} tasks)" if "per-partition s" in r else "")
        print(f"{r['partitions']:>6} {r['query']:<20} kafkatier {k:6.2f} s (first "
              f"{r['kafkatier first s']:5.2f}, {r['kafkatier tasks']:>4} tasks)  parquet "
              f"{p:6.2f} s (first {r['parquet first s']:5.2f}, {r['parquet tasks']:>4} tasks)  "
              f"ratio {k / p:5.2f}  planning {r['planning']:5.2f} s{old}{_python(r)}",
              flush=True)  # fmt: skip


def _python(r: dict[str, Any]) -> str:
    if "python s" not in r:
        return ""
    return (f"   python reader {r['python s']:6.2f} s (first {r['python first s']:5.2f}), "
            f"ratio {r['python s'] / r['parquet s']:5.2f}")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", default="8,128,1024")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--per-partition", action="store_true",
                        help="also time one Spark task a partition (slow)")
    parser.add_argument("--jvm", action="store_true",
                        help="kafkatier reads with the JVM reader; the Python reader beside it")
    args = parser.parse_args()
    counts = [int(x) for x in args.partitions.split(",")]
    print(f"command: python bench/scale_read.py --partitions {args.partitions} --records "
          f"{args.records} --rounds {args.rounds}"
          f"{' --per-partition' if args.per_partition else ''}"
          f"{' --jvm' if args.jvm else ''}")  # fmt: skip
    print(f"{'parts':>6} {'query':<20} median of {args.rounds} rounds", flush=True)
    run(counts, args.records, args.rounds, args.per_partition, args.jvm)
    return 0


if __name__ == "__main__":
    sys.exit(main())
