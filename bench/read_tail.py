"""Benchmark: a streaming query following appends at the end of a large active segment.

    python bench/read_tail.py [--partitions 4] [--batches 20000] [--rounds 10] [--reader jvm]

A query that tails a topic (``readStream.format("kafkatier")``, ``startingOffsets`` latest, into
Spark's ``noop`` sink) should cost the same per trigger however long the active segment it reads
the end of has grown: a sink writing small micro-batches into a topic with Kafka's default
``segment.bytes`` (1 GiB) fills each active segment with tens of thousands of batches before it
rolls. Two topics of N partitions, written and kept open in this process (the writer appends
as a sink would, the segments stay active): *long*, whose partitions each hold ``--batches``
batches of 10 records (about 1.4 KB each) before the query starts, and *short*, which hold 10.
A query on each (the order alternating), then, ``--rounds`` times, 10 records appended to each
partition of its topic and ``query.processAllAvailable()`` timed: the time from an append to the
query having read it. Printed: the command, each topic's median and best round, and long over
short (1.0: a trigger's cost does not grow with the active segment).
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

from scale_read import reader_session

from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.log import Log
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record

RECORDS = 10


class Writer:
    """Appends batches of ``RECORDS`` records (16-byte keys, 100-byte values) to a partition."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.next = 0

    def append(self, batches: int) -> None:
        now = int(time.time() * 1000)
        for _ in range(batches):
            records = [Record(self.next + i, now, b"key-%012d" % (self.next + i), b"v" * 100)
                       for i in range(RECORDS)]  # fmt: skip
            self.log.append(build_batch(records))
            self.next += RECORDS


def follow(spark: Any, root: Path, topic: str, writers: list[Writer], rounds: int) -> list[float]:
    """Seconds from each round's appends to the query having read them."""
    query = (spark.readStream.format("kafkatier").option("subscribe", topic)
             .option("startingOffsets", "latest").load(str(root / "logs"))
             .selectExpr("length(value) AS n").writeStream.format("noop")
             .option("checkpointLocation", str(root / f"chk-{topic}"))
             .trigger(processingTime="0 seconds").start())  # fmt: skip
    try:
        query.processAllAvailable()
        took = []
        for _ in range(rounds + 1):  # the first round warms up, not counted
            began = time.perf_counter()
            for writer in writers:
                writer.append(1)
            query.processAllAvailable()
            took.append(time.perf_counter() - began)
        return took[1:]
    finally:
        query.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--batches", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--reader", default="jvm", choices=["jvm", "python"])
    args = parser.parse_args()
    print(f"command: python bench/read_tail.py --partitions {args.partitions} --batches "
          f"{args.batches} --rounds {args.rounds} --reader {args.reader}", flush=True)  # fmt: skip
    with reader_session("kafkatier-read-tail", "kafkatier-read-tail-", args.reader) as (
        spark, root
    ), LogDirectory(root / "logs") as logs:  # fmt: skip
        writers = {
            topic: [Writer(logs.get_or_create(topic, p)) for p in range(args.partitions)]
            for topic in ("long", "short")
        }
        for topic, count in (("long", args.batches), ("short", 10)):
            for writer in writers[topic]:
                writer.append(count)
        sizes = {t: sum(w.log.active_segment.size for w in ws) for t, ws in writers.items()}
        found: dict[str, list[float]] = {"long": [], "short": []}
        for topic in ("short", "long", "long", "short"):  # each twice, the order mirrored
            found[topic] += follow(spark, root, topic, writers[topic], args.rounds // 2)
        for topic in ("long", "short"):
            runs = found[topic]
            print(f"{topic:<5} ({sizes[topic] / 2**20:7.1f} MiB of active segments): median "
                  f"{statistics.median(runs):6.3f} s, best {min(runs):6.3f} s per round")
        ratio = statistics.median(found["long"]) / statistics.median(found["short"])
        print(f"long / short (median): {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
