"""Benchmark: streaming micro-batches over a file source (or a kafkatier topic), through the
sink and through Spark's Parquet file sink, as a streaming job meets them.

    python bench/sink_stream.py [--rows N] [--partitions P] [--compression lz4] [--repeat K]
                                [--warmup W] [--running] [--source parquet|kafkatier]

The input: N rows (16-byte keys, 100-byte values) written once as 8 Parquet files. Three
streaming queries read their own source directory (``readStream.parquet``): (a) Spark's Parquet
file sink (``writeStream.format("parquet")``), (b) the noop sink (reading the input alone) and
(c) ``foreachBatch(KafkaLogSink(...))``. Each round, each query in turn (the order alternating)
gets the 8 files (hard links, under a directory name of their own, renamed into its source
directory at once) and runs once (``trigger(availableNow=True)``): one micro-batch of N rows
(the sink's listener closes its logs as each query ends, so each of its batches reopens them).
With ``--running`` each side's query starts once and goes on (the default trigger), each round's
files its next micro-batch, awaited with ``processAllAvailable``: what a long-running job sees;
the idle queries look for new files every 250 ms (``spark.sql.streaming.pollingDelay``, 10 ms by
default), so that their listings do not run beside the timed micro-batch. Timed: the
micro-batch's ``addBatch`` (Spark's progress report), where the sink reads the new files and
writes them; the query's start and its offset bookkeeping are not. The W warm-up
rounds are not reported. Unlike ``bench/sink.py --input parquet`` (a batch DataFrame over
Parquet files), a micro-batch reaches ``foreachBatch`` as a scan of the rows Spark computed
(Spark's ForeachBatchSink) inside the query's own SQL execution, where the JVM encoder finds
the micro-batch's plan (here a columnar file scan, whose column batches it reads), so this is
what a streaming job over a file source sees.

With ``--source kafkatier`` each side reads a Kafka-format topic of 8 partitions (lz4) instead:
``readStream.format("kafkatier")`` over a log directory of its own, its ``key`` and ``value``
(a Kafka source, as issue 18 names it; Spark's own Kafka source needs spark-sql-kafka, which
this machine cannot download). Each round appends the same N rows to every partition's log
before that side's query runs (untimed), so each micro-batch reads the round's new records,
just written, as the file source reads the round's new files.

Printed: the command, each side's best and median seconds with the runs, the median executor
CPU seconds of its jobs (Spark's stage metrics, through the UI's REST API on a free port) and of
the whole process tree while its query ran (its start included), and the ratios of the sink to
the Parquet file sink (issue 18's goal: at most 0.7).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import sys
import tempfile
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _process import tree_cpu_seconds
from spark_settings import spark_builder

from kafkatier.sink import KafkaLogSink, register_data_source
from kafkatier.storage.arrow.log import append_arrow
from kafkatier.storage.log.directory import LogDirectory

SIDES = ("parquet file sink", "noop (input read alone)", "kafkatier sink")
INPUT_TOPIC = "input"
INPUT_PARTITIONS = 8


def start_query(
    spark: Any, name: str, src: Path, work: Path, sink: Callable[..., None], running: bool = False,
    kafkatier_source: bool = False,
) -> Any:  # fmt: skip
    """The side's streaming query over ``src`` (Parquet files, or with ``kafkatier_source`` a
    log directory): one run over everything new in it (``availableNow``), or with ``running``
    one that goes on (the default trigger: a micro-batch as soon as new input is there);
    ``name``: the first word of the side's (``SIDES``)."""
    if kafkatier_source:
        reader = (spark.readStream.format("kafkatier").option("subscribe", INPUT_TOPIC)
                  .option("startingOffsets", "earliest").load(str(src))
                  .select("key", "value"))  # fmt: skip
    else:
        reader = spark.readStream.schema("key binary, value binary").parquet(str(src / "*"))
    writer = reader.writeStream.option("checkpointLocation", str(work / f"checkpoint-{name}"))
    if name == "parquet":
        writer = writer.format("parquet").option("path", str(work / "parquet-out"))
    elif name == "noop":
        writer = writer.format("noop")
    else:
        writer = writer.foreachBatch(sink)
    return (writer if running else writer.trigger(availableNow=True)).start()


def one_batch(
    spark: Any, side: str, work: Path, new_input: Input, rows: int, r: int, sink: Any,
    running: dict[str, Any] | None = None,
) -> tuple[float, float, float]:  # fmt: skip
    """The side's next micro-batch (``rows`` rows again: the 8 files under new names, or
    appended to the input topic): its addBatch seconds, the CPU seconds of the whole process
    tree while the query ran and the executor CPU seconds of its jobs' stages (Spark's stage
    metrics: the sharpest of the three on this shared machine). Without ``running``, a query
    started over the input (its start counted in the process's CPU); with it, each side's query
    that goes on (started at its first round) takes the files as its next micro-batch (the other
    sides' idle queries, which look for new files every 250 ms, counted in the process's CPU
    too)."""
    name = side.split()[0]
    src = work / f"src-{name}"
    if running is None:
        new_input.feed(src, r)
        seen: set[int] = set()
        cpu, stages = tree_cpu_seconds(), stage_cpu(spark)
        query = start_query(spark, name, src, work, sink, kafkatier_source=new_input.is_topic)
        query.awaitTermination()
    else:
        if side not in running:
            src.mkdir(exist_ok=True)
            running[side] = start_query(spark, name, src, work, sink, running=True,
                                        kafkatier_source=new_input.is_topic)  # fmt: skip
        query = running[side]
        seen = {p["batchId"] for p in query.recentProgress}
        cpu, stages = tree_cpu_seconds(), stage_cpu(spark)
        new_input.feed(src, r)
        query.processAllAvailable()
    cpu = tree_cpu_seconds() - cpu
    executors = sum(v for k, v in stage_cpu(spark).items() if k not in stages)
    progress = [p for p in query.recentProgress if p["numInputRows"] and p["batchId"] not in seen]
    if len(progress) != 1 or progress[0]["numInputRows"] != rows:
        raise RuntimeError(f"{side}: expected one micro-batch of the round's rows: {progress}")
    return float(progress[0]["durationMs"]["addBatch"]) / 1000, cpu, executors


@dataclass
class Input:
    """A round's new input: the 8 Parquet ``files`` (hard links under new names, into a
    directory renamed into the side's source directory: all 8 appear at once), or with
    ``table`` its rows appended to the 8 partitions of a kafkatier topic (lz4) in the side's
    log directory, an eighth each."""

    files: list[Path]
    table: pa.Table | None = None

    @property
    def is_topic(self) -> bool:
        return self.table is not None

    def feed(self, src: Path, r: int) -> None:
        if self.table is not None:
            per = -(-self.table.num_rows // INPUT_PARTITIONS)
            with LogDirectory(src) as logs:
                if r == 0:
                    logs.topic_configs.update(INPUT_TOPIC, {"compression.type": "lz4"},
                                              source="bench")  # fmt: skip
                for p in range(INPUT_PARTITIONS):
                    append_arrow(logs.get_or_create(INPUT_TOPIC, p), self.table.slice(p * per, per))
            return
        staging = src.with_name(f"staging-{src.name}-{r}")
        staging.mkdir()
        for i, f in enumerate(self.files):
            os.link(f, staging / f"part-{r}-{i}.parquet")
        src.mkdir(exist_ok=True)
        staging.rename(src / f"round-{r}")


def stage_cpu(spark: Any) -> dict[int, float]:
    """Executor CPU seconds of every completed stage (Spark's REST API)."""
    sc = spark.sparkContext
    url = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/stages?status=complete"
    with urllib.request.urlopen(url) as answer:
        return {s["stageId"]: s["executorCpuTime"] / 1e9 for s in json.load(answer)}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--compression", default="lz4")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=3, help="untimed rounds of every side")
    parser.add_argument("--running", action="store_true",
                        help="each side one query that goes on, not one query a round")
    parser.add_argument("--source", choices=("parquet", "kafkatier"), default="parquet",
                        help="what the queries read: Parquet files, or a kafkatier topic")
    args = parser.parse_args()
    if args.running and args.source == "kafkatier":
        parser.error("--running reads Parquet files only (a running query could take a "
                     "topic's appends in two micro-batches)")  # fmt: skip
    print("command:", " ".join([Path(sys.executable).name, *sys.argv]))
    spark = (
        spark_builder("kafkatier-bench-sink-stream")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.ui.enabled", "true")  # its REST API: stage metrics
        .config("spark.ui.port", str(free_port()))
        # a running query with nothing new looks again after this long (Spark's default 10 ms:
        # the idle sides' listings would then run beside the timed one's micro-batch)
        .config("spark.sql.streaming.pollingDelay", "250ms")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    work = Path(tempfile.mkdtemp(prefix="kafkatier-bench-sink-stream-"))
    try:
        spark.range(args.rows, numPartitions=2).selectExpr(
            "CAST(lpad(CAST(id AS STRING), 16, 'k') AS BINARY) AS key",
            "CAST(rpad(CAST(id AS STRING), 100, 'v') AS BINARY) AS value",
        ).repartition(8).write.parquet(str(work / "input"))
        files = sorted((work / "input").glob("*.parquet"))
        table = None
        if args.source == "kafkatier":
            register_data_source(spark)
            table = pq.read_table(work / "input").select(["key", "value"])
        new_input = Input(files, table)
        sink = KafkaLogSink(work / "logs", topic="bench", partitions=args.partitions,
                            compression=args.compression)  # fmt: skip
        times: dict[str, list[tuple[float, float, float]]] = {side: [] for side in SIDES}
        running: dict[str, Any] | None = {} if args.running else None
        for r in range(args.warmup + args.repeat):
            order = SIDES if r % 2 == 0 else SIDES[::-1]
            for side in order:
                took = one_batch(spark, side, work, new_input, args.rows, r, sink, running)
                if r >= args.warmup:
                    times[side].append(took)
        for query in (running or {}).values():
            query.stop()
        report(args, times)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


def report(args: argparse.Namespace, times: dict[str, list[tuple[float, float, float]]]) -> None:
    print("queries: " + ("each side one that goes on (--running)" if args.running
                         else "one a round (availableNow), the sink closed as each ends"))
    print("source: " + ("8 Parquet files (snappy) a round" if args.source == "parquet"
                        else "a kafkatier topic of 8 partitions (lz4), the round's rows appended"))
    print(f"rows a micro-batch: {args.rows}, key 16 B, value 100 B, partitions: "
          f"{args.partitions}, sink compression: {args.compression}, parquet: snappy, "
          f"cores: {os.cpu_count()}, load average after: {os.getloadavg()[0]:.1f}")  # fmt: skip
    for side, runs in times.items():
        wall = [w for w, _, _ in runs]
        cpu = statistics.median(c for _, c, _ in runs)
        executors = statistics.median(e for _, _, e in runs)
        print(f"{side:<24} addBatch best {min(wall):.2f} s, median {statistics.median(wall):.2f} s"
              f" (runs: {' '.join(f'{t:.2f}' for t in wall)}); executor CPU median "
              f"{executors:.2f} s, process tree CPU median {cpu:.2f} s")  # fmt: skip
    sink = [w for w, _, _ in times[SIDES[2]]]
    parquet = [w for w, _, _ in times[SIDES[0]]]
    ratios = [s / p for s, p in zip(sink, parquet, strict=True)]
    medians = statistics.median(sink) / statistics.median(parquet)
    cpus = [statistics.median(e for _, _, e in times[side]) for side in (SIDES[2], SIDES[0])]
    print(f"ratio kafkatier sink / parquet file sink: {medians:.2f} (medians), "
          f"{min(sink) / min(parquet):.2f} (best), rounds' own ratios median "
          f"{statistics.median(ratios):.2f} (goal <= 0.7); executor CPU "
          f"{cpus[0] / cpus[1]:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
