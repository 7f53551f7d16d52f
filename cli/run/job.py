"""The streaming half of ``kafkatier run``: events in, two topics out through KafkaLogSink.

Every micro-batch (one ``foreachBatch`` call) is one transaction of one exactly-once sink
(routing rows by a ``topic`` column; one sink, as a log dir has one writer) over two topics:

* the events topic: key ``user_id``, value the event as JSON, timestamp the event's ``ts``, and
  a ``batch`` header naming the Spark batch id (the verifier derives the expected state from it);
* the state topic: per user seen in the batch, the latest state (its last event by
  ``(ts, event_id)`` and how many events it had in the batch), key ``user_id``; compaction keeps
  the newest per user.

Stopping is clean by construction: the generated stream is capped (the query goes idle), and
otherwise :meth:`BatchWriter.close` waits for the batch being written, after which a batch that
still starts fails before touching a log (Spark replays it on the next start).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafkatier.cli.config.run import RunSettings
from kafkatier.cli.run.source import EVENT_SCHEMA, SOURCE_NAME, register_clickstream
from kafkatier.sink.sink import KafkaLogSink
from kafkatier.storage.errors import KafkaTierError

Say = Callable[[str], None]


class StopRequested(KafkaTierError):
    """A micro-batch that started after the job was asked to stop (written by the next run)."""


LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""
"""Spark's log configuration for the job: errors only (its INFO/WARN chatter hides progress)."""


def spark_session(master: str, work_dir: Path) -> Any:
    import os
    import sys

    work_dir.mkdir(parents=True, exist_ok=True)
    log4j = work_dir / "log4j2.properties"
    log4j.write_text(LOG4J2)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # local mode: loopback only
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(master).appName("kafkatier-run")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.streaming.stopTimeout", "60s")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={log4j.as_uri()}")
        .getOrCreate()
    )  # fmt: skip
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def events_frame(df: Any, batch_id: int) -> Any:
    from pyspark.sql import functions as F

    batch = F.lit(str(batch_id)).cast("binary")
    header = F.struct(F.lit("batch").alias("key"), batch.alias("value"))
    return df.select(
        F.col("user_id").cast("binary").alias("key"),
        F.to_json(F.struct("event_id", "user_id", "page", "event_type", "ts"))
        .cast("binary").alias("value"),
        F.timestamp_millis("ts").alias("timestamp"),
        F.array(header).alias("headers"),
    )  # fmt: skip


def state_frame(df: Any, batch_id: int) -> Any:
    from pyspark.sql import functions as F

    last = F.max_by(F.struct("event_id", "page", "event_type", "ts"), F.struct("ts", "event_id"))
    per_user = df.groupBy("user_id").agg(last.alias("last"), F.count(F.lit(1)).alias("n"))
    value = F.struct("user_id", "last.event_id", "last.page", "last.event_type", "last.ts",
                     F.col("n").alias("batch_events"), F.lit(batch_id).alias("batch"))  # fmt: skip
    return per_user.select(
        F.col("user_id").cast("binary").alias("key"),
        F.to_json(value).cast("binary").alias("value"),
        F.timestamp_millis("last.ts").alias("timestamp"),
    )


@dataclass
class JobStats:
    batches: int = 0
    events: int = 0
    states: int = 0
    last_batch: int = -1
    seconds: float = 0.0  # spent writing micro-batches
    first_seconds: float = 0.0  # of which the first (Python workers and JVM warming up)
    first_events: int = 0
    stopped_by: str = ""


class BatchWriter:
    """The ``foreachBatch`` function: both topics per batch, counting, stopping (module doc)."""

    def __init__(self, sink: KafkaLogSink, topics: tuple[str, str], limit: int,
                 say: Say) -> None:  # fmt: skip
        self.sink, self.topics, self.limit, self.say = sink, topics, limit, say
        self.stats = JobStats()
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.stopping = False

    def __call__(self, df: Any, batch_id: int) -> None:
        with self.lock:
            if self.stopping:
                raise StopRequested("stopping: batch left for the next run", batch_id=batch_id)
            began = time.monotonic()
            df = df.persist()  # both topics derive from it: the source is read once
            try:
                counts = self._write(df, batch_id)
            finally:
                df.unpersist()
            self._count(batch_id, counts.get(self.topics[0], 0), counts.get(self.topics[1], 0),
                        time.monotonic() - began)  # fmt: skip

    def _write(self, df: Any, batch_id: int) -> dict[str, int]:
        """One transaction over both topics: the sink routes rows by their ``topic`` column."""
        from pyspark.sql import functions as F

        events, state = self.topics
        both = events_frame(df, batch_id).withColumn("topic", F.lit(events)).unionByName(
            state_frame(df, batch_id).withColumn("topic", F.lit(state)), allowMissingColumns=True
        ).persist()
        try:
            per_topic = both.groupBy("topic").count().collect()  # also fills the cache
            counts = {row["topic"]: int(row["count"]) for row in per_topic}
            if counts:
                self.sink(both, batch_id)
        finally:
            both.unpersist()
        return counts

    def _count(self, batch_id: int, rows: int, states: int, seconds: float) -> None:
        if not rows:
            return
        s = self.stats
        s.batches, s.events, s.states, s.last_batch = s.batches + 1, s.events + rows, \
            s.states + states, batch_id  # fmt: skip
        s.seconds += seconds
        if s.batches == 1:
            s.first_seconds, s.first_events = seconds, rows
        of = f"/{self.limit}" if self.limit else ""
        self.say(f"batch {s.batches}{of} (id {batch_id}): {rows} events, {states} user states "
                 f"in {seconds:.1f} s; {s.events} events so far")  # fmt: skip
        if self.limit and s.batches >= self.limit:
            self.done.set()

    def close(self) -> None:
        """Wait for the batch being written; later ones fail before writing (module doc)."""
        with self.lock:
            self.stopping = True


def start_query(spark: Any, run: RunSettings, writer: BatchWriter) -> Any:
    if run.input == "clickstream":
        register_clickstream(spark)
        cap = run.batches * run.max_rows_per_batch if run.batches else -1
        reader = (spark.readStream.format(SOURCE_NAME).option("seed", run.seed)
                  .option("users", run.users).option("rowsPerBatch", run.max_rows_per_batch)
                  .option("maxRows", cap).option("rowsPerSecond", run.rate)
                  .option("baseMs", int(time.time() * 1000)))  # fmt: skip
        df = reader.load()
    else:
        assert run.input_path is not None
        df = (spark.readStream.schema(EVENT_SCHEMA)
              .option("maxFilesPerTrigger", run.max_files_per_batch).json(str(run.input_path)))
    stream = df.writeStream.foreachBatch(writer).option(
        "checkpointLocation", str(run.checkpoint_dir.resolve())
    )
    if run.trigger_ms:
        stream = stream.trigger(processingTime=f"{run.trigger_ms} milliseconds")
    return stream.start()


def wait_for_end(query: Any, run: RunSettings, writer: BatchWriter) -> str:
    """Block until a stop condition holds; returns which one."""
    deadline = time.monotonic() + run.duration_ms / 1000 if run.duration_ms else None
    while True:
        if writer.done.wait(0.25):
            return f"{run.batches} batches written"
        if query.exception() is not None or not query.isActive:
            raise KafkaTierError(f"the streaming query failed: {query.exception()}")
        if deadline is not None and time.monotonic() > deadline:
            return f"run.duration.ms={run.duration_ms} reached"
        status = query.status
        if (run.stop_when_idle and writer.stats.batches and not status["isDataAvailable"]
                and not status["isTriggerActive"]):  # fmt: skip
            return "input idle"


def stop_query(query: Any, writer: BatchWriter, timeout: float = 60) -> None:
    """Stop after Spark has committed the last batch the sinks wrote."""
    writer.close()
    deadline = time.monotonic() + timeout
    while query.isActive and time.monotonic() < deadline:
        progress = query.lastProgress
        if progress is not None and progress["batchId"] >= writer.stats.last_batch:
            break
        time.sleep(0.1)
    query.stop()


def committed_offset(checkpoint: Path) -> dict[str, Any] | None:
    """The source's end offset of the last batch Spark committed (its checkpoint files)."""
    commits = [int(p.name) for p in (checkpoint / "commits").glob("[0-9]*")]
    if not commits:
        return None
    lines = (checkpoint / "offsets" / str(max(commits))).read_text().splitlines()
    found: dict[str, Any] = json.loads(lines[2])
    return found
