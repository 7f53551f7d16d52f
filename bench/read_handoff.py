"""Benchmark: how much of a kafkatier scan is the hand-off of Arrow batches from Python to Spark.

    python bench/read_handoff.py [--records 2000000] [--partitions 8] [--rounds 3]

Issue 18 asks for full scans no slower than Spark's Parquet scan of the same rows, and for a
JVM-side decoder if Python cannot get there. This measures whether it can. The rows of
bench/scale_read.py (16-byte keys, 100-byte values, lz4) are written once as a kafkatier topic
of N partitions, once as N Parquet files (Spark's writer), and once as Arrow IPC files holding
the very table the kafkatier reader produces (decoded here with ``read_arrow``, projected to
Spark's Kafka schema without headers), one file per Spark task of the kafkatier scan. Three
sources are then queried in one Spark session, in an order rotated from round to round:

* ``kafkatier``: ``spark.read.format("kafkatier")``, decoding the segments in Python workers;
* ``handoff``: a Python data source whose tasks only memory-map their Arrow file and yield its
  batches (no decoding, no copy in Python): the floor of any reader that runs in Python
  workers, since Spark's reading of the Arrow stream and its conversion to rows remain;
* ``parquet``: ``spark.read.parquet``, decoded inside the JVM.

Queries: ``count()`` and ``agg(sum(length(value)))``, medians of the rounds, the files warm in
the page cache (the first round is a warm-up of the Python workers and is not counted). Printed:
the command, each median, and the ratios kafkatier/parquet and handoff/parquet: when the
hand-off alone is not below Parquet's whole scan, no Python-side decoder can meet the goal.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from scale_read import (
    QUERIES,
    kafkatier_frame,
    reader_session,
    rows,
    scan_queries,
    warm_rounds,
    write_kafka,
    write_parquet,
)

SIDES = ("kafkatier", "handoff", "parquet")


def write_arrow_files(kafka: Path, target: Path, files: int) -> list[str]:
    """The kafkatier reader's table of every partition, split into ``files`` Arrow IPC files."""
    from kafkatier.sink.source.datasource import kafka_schema
    from kafkatier.storage import LogDirectory, read_arrow

    with LogDirectory(kafka) as logs:
        parts = [read_arrow(log) for (_, _), log in sorted(logs.logs.items())]
    names = kafka_schema(False).fieldNames()
    table = pa.concat_tables(parts).select(names)
    per = -(-table.num_rows // files)
    target.mkdir(parents=True)
    paths = []
    for i in range(files):
        path = target / f"part-{i}.arrow"
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as out:
            out.write_table(table.slice(i * per, per), max_chunksize=64 * 1024)
        paths.append(str(path))
    return paths


def handoff_source(paths: list[str]) -> Any:
    """A Python data source yielding the Arrow files' batches, one task a file."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from kafkatier.sink.source.datasource import kafka_schema

    class Reader(DataSourceReader):  # type: ignore[misc]
        def partitions(self) -> list[InputPartition]:
            return [InputPartition(path) for path in paths]

        def read(self, partition: InputPartition) -> Any:
            import pyarrow as pa

            with pa.memory_map(partition.value) as source:
                reader = pa.ipc.open_file(source)
                for i in range(reader.num_record_batches):
                    yield reader.get_batch(i)

    class Handoff(DataSource):  # type: ignore[misc]
        @classmethod
        def name(cls) -> str:
            return "kafkatier_handoff"

        def schema(self) -> Any:
            return kafka_schema(False)

        def reader(self, schema: Any) -> Reader:
            return Reader()

    return Handoff


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"command: python bench/read_handoff.py --records {args.records} --partitions "
          f"{args.partitions} --rounds {args.rounds}", flush=True)  # fmt: skip
    with reader_session("kafkatier-read-handoff", "kafkatier-read-handoff-") as (spark, root):
        table = rows(args.records)
        write_kafka(root / "kafka", table, args.partitions)
        write_parquet(spark, root / "parquet", table, args.partitions)
        frames = {
            "kafkatier": kafkatier_frame(spark, root / "kafka"),
            "parquet": lambda: spark.read.parquet(str(root / "parquet")),
        }
        tasks = frames["kafkatier"]().rdd.getNumPartitions()
        spark.dataSource.register(handoff_source(
            write_arrow_files(root / "kafka", root / "arrow", tasks)))  # fmt: skip
        frames["handoff"] = lambda: spark.read.format("kafkatier_handoff").load()
        times = warm_rounds({side: frames[side] for side in SIDES}, scan_queries(), args.rounds)
        print(f"records: {args.records}, partitions: {args.partitions}, Spark tasks: {tasks} "
              f"(each side), files warm in the page cache")  # fmt: skip
        for name in QUERIES:
            med = {side: statistics.median(times[(side, name)]) for side in SIDES}
            print(f"{name:<20} " + "  ".join(f"{s} {med[s]:5.2f} s" for s in SIDES)
                  + f"  kafkatier/parquet {med['kafkatier'] / med['parquet']:4.2f}"
                  f"  handoff/parquet {med['handoff'] / med['parquet']:4.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
