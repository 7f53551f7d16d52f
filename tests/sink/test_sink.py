"""KafkaLogSink through a real local SparkSession: placement, content, replay, errors, fencing."""

from __future__ import annotations

import gc
import json
import re
import struct
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from crash_writer import read_partition

from kafkatier.sink import KafkaLogSink, flushes
from kafkatier.sink import append as append_module
from kafkatier.sink.bookkeeping import ProducerFencedError, derive_producer_id
from kafkatier.sink.hooks import QUERY_ID_PROPERTY
from kafkatier.sink.pieces import _SPAN_FIELDS, _by_partition, unpack_pieces
from kafkatier.sink.plan import OPEN_BATCH_MOST, open_batch_bytes, task_limit, tasks_for_size
from kafkatier.sink.schema import SinkSchemaError, check_schema, normalize
from kafkatier.sink.source.datasource import register_data_source
from kafkatier.sink.stage import sink_staging_root
from kafkatier.storage.arrow.log import read_arrow
from kafkatier.storage.config.topic_files import TopicConfigStore
from kafkatier.storage.errors import ConfigError, CorruptRecordError
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.reader import IsolationLevel
from kafkatier.storage.partitioner import default_partition
from kafkatier.storage.verify.paths import verify_paths
from kafkatier.storage.wire import Codec

COMMITTED = IsolationLevel.READ_COMMITTED
HEADER_TYPE = "array<struct<key: string, value: binary>>"


def read_topic(log_dir: Path, topic: str, isolation: IsolationLevel = COMMITTED) -> pa.Table:
    with LogDirectory(log_dir) as logs:
        tables = [read_arrow(log, isolation=isolation) for log in logs if log.topic == topic]
    return pa.concat_tables(tables) if tables else pa.table({})


def end_offsets(log_dir: Path) -> dict[tuple[str, int], int]:
    with LogDirectory(log_dir) as logs:
        return {(log.topic, log.partition): log.log_end_offset for log in logs}


def state(log_dir: Path, sink_id: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads((log_dir / f"kafkatier-sink.{sink_id}.json").read_text())
    return result


def mixed_rows(spark: Any, n: int) -> Any:
    """Keys on most rows (binary), none on every 5th, an explicit partition on every 7th; five
    Spark tasks, appended in task order."""
    return spark.range(0, n, 1, 5).selectExpr(
        "CAST(CONCAT('v', id) AS BINARY) AS value",
        "CASE WHEN id % 5 = 0 THEN NULL ELSE CAST(CONCAT('k', id % 23) AS BINARY) END AS key",
        "CASE WHEN id % 7 = 0 THEN CAST(id % 4 AS INT) END AS partition",
        f"CAST(array(named_struct('key', 'h', 'value', CAST(id AS STRING))) AS {HEADER_TYPE})"
        " AS headers",
        "CASE WHEN id % 2 = 0 THEN timestamp_millis(1700000000000 + id) END AS timestamp",
    )


def test_rows_land_where_a_kafka_producer_puts_them(spark: Any, tmp_path: Path) -> None:
    sink = KafkaLogSink(tmp_path, topic="events", partitions=4, compression="lz4")
    before = int(time.time() * 1000)
    sink(mixed_rows(spark, 600), 0)
    after = int(time.time() * 1000)
    assert verify_paths([tmp_path]) == []
    table = read_topic(tmp_path, "events")
    assert table.num_rows == 600
    keyless_counts = [0, 0, 0, 0]
    for row in table.to_pylist():
        i = int(row["value"][1:])
        assert row["headers"] == [{"key": "h", "value": str(i).encode()}]
        if i % 2 == 0:
            assert row["timestamp"] == datetime.fromtimestamp((1700000000000 + i) / 1000, UTC)
        else:  # default: the batch's write time
            assert before <= row["timestamp"].timestamp() * 1000 <= after
        if i % 7 == 0:
            assert row["partition"] == i % 4
        elif i % 5:
            assert row["partition"] == default_partition(f"k{i % 23}".encode(), 4)
            assert row["key"] == f"k{i % 23}".encode()
        else:
            assert row["key"] is None
            keyless_counts[row["partition"]] += 1
    assert max(keyless_counts) - min(keyless_counts) <= 2  # spread evenly
    for partition in range(4):  # input order (the tasks' order, then rows) per partition
        ids = [int(r["value"][1:]) for r in table.to_pylist() if r["partition"] == partition]
        assert ids == sorted(ids)
    with LogDirectory(tmp_path) as logs:
        batches = [b for log in logs for s in log.segments for b in s.batches()]
    data = [b for b in batches if not b.is_control]
    assert {b.codec for b in data} == {Codec.LZ4} and all(b.is_transactional for b in data)
    assert {b.producer_id for b in batches} == {derive_producer_id("events")}
    assert sum(b.is_control for b in batches) == 4  # one COMMIT per partition


def test_replayed_batch_id_is_skipped_and_sequences_continue(spark: Any, tmp_path: Path) -> None:
    sink = KafkaLogSink(tmp_path, topic="t", partitions=2)
    df = spark.range(50).selectExpr("CAST(id AS STRING) AS value")
    sink(df, 0)
    ends = end_offsets(tmp_path)
    sink(df, 0)  # Spark's replay after a restart
    assert end_offsets(tmp_path) == ends
    sink(df, 1)
    assert read_topic(tmp_path, "t").num_rows == 100
    assert state(tmp_path, "t")["last_committed_batch"] == 1
    assert state(tmp_path, "t")["inflight"] is None
    assert verify_paths([tmp_path]) == []


def test_a_newer_instance_fences_the_older_one(spark: Any, tmp_path: Path) -> None:
    first = KafkaLogSink(tmp_path, topic="t", partitions=2)
    second = KafkaLogSink(tmp_path, topic="t", partitions=2)
    first(spark.range(10).selectExpr("CAST(id AS STRING) AS value"), 0)
    second(spark.range(10, 30).selectExpr("CAST(id AS STRING) AS value"), 1)
    with pytest.raises(ProducerFencedError, match="fenced: a newer instance started"):
        first(spark.range(30, 40).selectExpr("CAST(id AS STRING) AS value"), 2)
    second(spark.range(40, 45).selectExpr("CAST(id AS STRING) AS value"), 2)
    values = sorted(int(v) for v in read_topic(tmp_path, "t").column("value").to_pylist())
    assert values == [*range(30), *range(40, 45)]
    assert state(tmp_path, "t")["producer_epoch"] == 1
    assert verify_paths([tmp_path]) == []


def test_routing_by_topic_column(spark: Any, tmp_path: Path) -> None:
    sink = KafkaLogSink(tmp_path, partitions=3, sink_id="router")
    df = spark.range(90).selectExpr(
        "CAST(id AS STRING) AS value", "CAST(id AS STRING) AS key",
        "CASE WHEN id % 3 = 0 THEN 'a' ELSE 'b' END AS topic",
    )  # fmt: skip
    sink(df, 0)
    a = read_topic(tmp_path, "a").column("value").to_pylist()
    b = read_topic(tmp_path, "b").column("value").to_pylist()
    assert sorted(int(v) for v in a) == list(range(0, 90, 3))
    assert sorted(int(v) for v in b) == [i for i in range(90) if i % 3]
    with LogDirectory(tmp_path) as logs:
        assert logs.topics() == {"a": 3, "b": 3}
        logs.get_or_create("__consumer_offsets", 0)  # a broker's log dir, copied
    assert verify_paths([tmp_path]) == []
    internal = df.selectExpr("value", "key", "'__consumer_offsets' AS topic")
    with pytest.raises(SinkSchemaError, match="cannot append to internal topic __consumer_off"):
        sink(internal, 1)
    with LogDirectory(tmp_path) as logs:
        assert logs.logs[("__consumer_offsets", 0)].log_end_offset == 0


@pytest.mark.parametrize("encoder", ["jvm", "python"])
def test_a_batch_of_just_the_sink_columns_is_written_as_it_comes(
    spark: Any, tmp_path: Path, encoder: str
) -> None:
    """A frame that holds just the columns the encoder reads, in any order, goes to the encoder
    as it is (no ``select``); one with a column a fixed topic ignores is reduced first. Both
    encoders read the columns by name: keys, values and timestamps land as given."""
    df = spark.range(40).selectExpr(
        "CAST(CONCAT('v', id) AS BINARY) AS value",
        "TIMESTAMP_MILLIS(1700000000000 + id) AS timestamp",
        "CAST(CONCAT('k', id) AS BINARY) AS key",
    )  # fmt: skip
    cols = check_schema(df.schema, fixed_topic=True)
    assert normalize(df, cols) is df
    routed = df.selectExpr("*", "'t' AS topic")
    assert normalize(routed, check_schema(routed.schema, fixed_topic=True)).columns == [
        "key", "value", "timestamp"
    ]
    sink = KafkaLogSink(tmp_path, topic="t", partitions=3, encoder=encoder)
    sink(df, 0)
    sink(routed, 1)
    sink.close()
    table = read_topic(tmp_path, "t")
    got = sorted(zip(table.column("key").to_pylist(), table.column("value").to_pylist(),
                     table.column("timestamp").to_pylist(), strict=True))  # fmt: skip
    want = sorted((f"k{i}".encode(), f"v{i}".encode(),
                   datetime.fromtimestamp((1_700_000_000_000 + i) / 1000, UTC)) for i in range(40))
    assert got[::2] == want and got[1::2] == want  # each row once in each of the two batches
    assert verify_paths([tmp_path]) == []


@pytest.mark.parametrize(
    ("select", "match"),
    [
        (["CAST(id AS STRING) AS key"], "missing required column 'value'"),
        (["CAST(id AS STRING) AS value", "id AS key"], "column 'key' has type bigint"),
        (["CAST(id AS STRING) AS value", "id AS vaule"], "unexpected column 'vaule'"),
        (["CAST(id AS STRING) AS value", "'x' AS partition"], "column 'partition' has type"),
        (["CAST(id AS STRING) AS value", "array('a') AS headers"], "column 'headers'"),
    ],
)
def test_schema_errors_name_the_column(
    spark: Any, tmp_path: Path, select: list[str], match: str
) -> None:
    sink = KafkaLogSink(tmp_path, topic="t", partitions=2)
    with pytest.raises(SinkSchemaError, match=match) as info:
        sink(spark.range(3).selectExpr(*select), 0)
    assert "fix:" in str(info.value)
    assert end_offsets(tmp_path) == {}  # nothing written, not even partition directories
    cast = re.search(r"CAST it \(e\.g\. CAST\((\w+) AS (.+)\)\)", str(info.value))
    if cast is not None:  # the type it suggests is one Spark parses and the sink takes
        column, type_name = cast.groups()
        fixed = spark.sql(f"SELECT 'v' AS value, CAST(NULL AS {type_name}) AS {column}")
        check_schema(fixed.schema, fixed_topic=True)


def test_partition_out_of_range_fails_before_anything_is_written(
    spark: Any, tmp_path: Path
) -> None:
    sink = KafkaLogSink(tmp_path, topic="t", partitions=2)
    df = spark.range(20).selectExpr(
        "CAST(id AS STRING) AS value", "CAST(id % 3 AS INT) AS partition"
    )
    with pytest.raises(Exception, match=r"column 'partition' row \d+: partition 2 is outside"):
        sink(df, 0)
    assert end_offsets(tmp_path) == {}  # not even the new topic's empty partitions
    assert state(tmp_path, "t")["inflight"] is None
    sink(spark.range(5).selectExpr("CAST(id AS STRING) AS value"), 0)  # the sink still works
    assert read_topic(tmp_path, "t").num_rows == 5


def test_topic_errors(spark: Any, tmp_path: Path) -> None:
    df = spark.range(3).selectExpr("CAST(id AS STRING) AS value")
    KafkaLogSink(tmp_path, topic="t", partitions=2)(df, 0)
    with pytest.raises(SinkSchemaError, match=r"has 2 partitions .* not 3; fix: pass partitions=2"):
        KafkaLogSink(tmp_path, topic="t", partitions=3)(df, 1)
    KafkaLogSink(tmp_path, topic="t")(df, 1)  # count read from disk
    with pytest.raises(SinkSchemaError, match=r"does not exist .* fix: pass partitions=N"):
        KafkaLogSink(tmp_path, topic="new")(df, 0)
    with pytest.raises(SinkSchemaError, match="no 'topic' column"):
        KafkaLogSink(tmp_path, sink_id="r", partitions=2)(df, 0)
    with pytest.raises(SinkSchemaError, match="needs sink_id"):
        KafkaLogSink(tmp_path, partitions=2)
    for bad in ("orders/eu", "..", "x" * 250, "a b"):  # Kafka's rule, not the sink id's
        with pytest.raises(SinkSchemaError, match=f"illegal Kafka topic name '{bad}'"):
            KafkaLogSink(tmp_path, topic=bad, partitions=1)
    for bad in ("bad name/x", "tópico", "."):  # the same in a 'topic' column: it was a bare
        routed = df.selectExpr("value", f"'{bad}' AS topic")  # ValueError naming no fix
        with pytest.raises(SinkSchemaError, match=f"'topic' column names an illegal Kafka topic "
                                                  f"'{bad}'.*fix: filter"):  # fmt: skip
            KafkaLogSink(tmp_path / "routed", sink_id="routed", partitions=1)(routed, 0)
    # a routed sink's partitions= is the count of the topics it creates: another topic of the
    # log dir ("t", two partitions) refused every batch, although it wrote none to it
    KafkaLogSink(tmp_path, sink_id="r", partitions=1)(df.selectExpr("value", "'u' AS topic"), 0)
    assert read_topic(tmp_path, "u").num_rows == 3 and not (tmp_path / "u-1").exists()
    for internal in ("__consumer_offsets", "__transaction_state", "__cluster_metadata"):
        with pytest.raises(SinkSchemaError, match=f"cannot append to internal topic {internal}"):
            KafkaLogSink(tmp_path, topic=internal, partitions=1)
    with pytest.raises(SinkSchemaError, match=r"'\.hidden': the sink id \(the topic by default\) "
                       r"may not start with '\.'; fix: pass sink_id="):  # fmt: skip
        KafkaLogSink(tmp_path, topic=".hidden", partitions=1)
    KafkaLogSink(tmp_path, topic=".hidden", partitions=1, sink_id="hidden")(df, 0)  # legal
    (tmp_path / "a-file").write_text("x")
    for where in (tmp_path / "a-file", tmp_path / "a-file" / "logs"):
        with pytest.raises(SinkSchemaError, match=f"log dir {where} is not a directory"):
            KafkaLogSink(where, topic="t", partitions=1)(df, 0)
    assert read_topic(tmp_path, "t").num_rows == 6
    assert read_topic(tmp_path, ".hidden").num_rows == 3


def test_failed_batch_is_aborted_and_the_next_one_commits(spark: Any, tmp_path: Path) -> None:
    """A record too large for the topic fails one partition's encoding after other partitions
    may have been appended: the sink aborts them, so read_committed shows nothing of it."""
    sink = KafkaLogSink(tmp_path, topic="t", partitions=4, config={"max.message.bytes": "4000"})
    big = spark.range(40).selectExpr(
        "CASE WHEN id = 39 THEN repeat('x', 9000) ELSE CAST(id AS STRING) END AS value",
        "CAST(id AS INT) % 4 AS partition",
    )
    with pytest.raises(Exception, match=r"RecordTooLarge|more than a batch may take"):
        sink(big, 0)
    assert read_topic(tmp_path, "t").num_rows == 0
    assert state(tmp_path, "t")["inflight"] is None
    assert TopicConfigStore(tmp_path).get("t").max_message_bytes == 4000
    sink(spark.range(8).selectExpr("CAST(id AS STRING) AS value"), 0)
    assert read_topic(tmp_path, "t").num_rows == 8
    assert verify_paths([tmp_path]) == []


def test_another_query_on_the_same_sink_id_is_refused(spark: Any, tmp_path: Path) -> None:
    sc = spark.sparkContext
    df = spark.range(3).selectExpr("CAST(id AS STRING) AS value")
    sink = KafkaLogSink(tmp_path, topic="t", partitions=1)
    try:
        sc.setLocalProperty(QUERY_ID_PROPERTY, "query-one")
        sink(df, 0)
        sc.setLocalProperty(QUERY_ID_PROPERTY, "query-two")
        with pytest.raises(SinkSchemaError, match="reuse the original checkpointLocation"):
            sink(df, 0)
        # a new instance for the other query (a restarted driver with a new checkpoint) is
        # refused before it starts: it fenced the running query and saved its settings
        other = KafkaLogSink(tmp_path, topic="t", partitions=1, config={"retention.ms": "1000"})
        with pytest.raises(SinkSchemaError, match="reuse the original checkpointLocation"):
            other(df, 0)
        assert TopicConfigStore(tmp_path).get("t").retention_ms != 1000
        sc.setLocalProperty(QUERY_ID_PROPERTY, "query-one")
        sink(df, 1)  # not fenced
    finally:
        sc.setLocalProperty(QUERY_ID_PROPERTY, None)
    assert read_topic(tmp_path, "t").num_rows == 6


def test_streaming_query_through_foreach_batch(spark: Any, tmp_path: Path) -> None:
    """The documented usage, as is: ``writeStream.foreachBatch(sink)``."""
    sink = KafkaLogSink(tmp_path / "logs", topic="events", partitions=2, compression="zstd")
    stream = (
        spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 25)
        .option("numPartitions", 1).option("startTimestamp", 0).load()
        .selectExpr("CAST(value AS STRING) AS value", "CAST(value % 5 AS STRING) AS key")
    )  # fmt: skip
    query = (
        stream.writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "chk"))
        .start()
    )
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            path = tmp_path / "logs" / "kafkatier-sink.events.json"
            if path.exists() and state(tmp_path / "logs", "events")["last_committed_batch"] >= 2:
                break
            time.sleep(0.2)
    finally:
        query.stop()
    # The sink closes itself once the listener bus tells it the query stopped, which may be
    # while the log dir is read below; close() waits for that close (or does it) first.
    sink.close()
    done = state(tmp_path / "logs", "events")
    assert done["last_committed_batch"] >= 2 and done["query_id"] == str(query.id)
    values = sorted(int(v) for v in read_topic(tmp_path / "logs", "events")["value"].to_pylist())
    assert values[: 3 * 25] == list(range(3 * 25))
    assert values == list(range(len(values)))
    assert verify_paths([tmp_path / "logs"]) == []


def test_fetched_and_staged_batches_write_the_same_log(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """staging=False (the pieces travel through the driver JVM, as on a cluster without a shared
    filesystem) and staging files (local mode's default) give the same records, batch for batch."""
    df = mixed_rows(spark, 700)
    fetching = KafkaLogSink(tmp_path / "fetched", topic="t", partitions=4, staging=False)
    fetching(df, 0)
    fetching.close()  # staging files are kept until the partitions are durable, then removed
    assert wal_files(tmp_path / "fetched") == []
    staged = KafkaLogSink(tmp_path / "staged", topic="t", partitions=4)

    def no_fetch(encoded: Any) -> Any:
        raise AssertionError("local mode stages by default, it does not fetch")

    monkeypatch.setattr("kafkatier.sink.pieces._fetched", no_fetch)
    staged(df, 0)
    for name in ("fetched", "staged"):
        assert verify_paths([tmp_path / name]) == []
    fetched, written = read_topic(tmp_path / "fetched", "t"), read_topic(tmp_path / "staged", "t")
    assert fetched.drop_columns(["timestamp"]) == written.drop_columns(["timestamp"])
    assert fetched.num_rows == 700
    assert staged._load_buffers.kept_bytes > 0  # the batch's loads, kept for the next batch
    staged.close()
    assert wal_files(tmp_path / "staged") == []
    assert staged._load_buffers.kept_bytes == 0  # a closed sink keeps none


def wal_files(log_dir: Path) -> list[str]:
    """The staging files in a log dir, without their batch prefix."""
    return sorted(p.name.split(".", 4)[-1] for p in log_dir.glob("kafkatier-sink.*.wal.*"))


def test_a_new_instance_removes_staging_leftovers(spark: Any, tmp_path: Path) -> None:
    sink = KafkaLogSink(tmp_path / "logs", topic="t", partitions=2, staging=tmp_path / "scratch")
    root = sink_staging_root(tmp_path / "scratch", sink.log_dir, "t")
    assert root.parent == tmp_path / "scratch" / "kafkatier-staging"
    leftover = root / "3-deadbeef" / "task-0-9.kbatches"  # a killed driver's
    leftover.parent.mkdir(parents=True)
    leftover.write_bytes(b"partial")
    in_log_dir = sink.log_dir / "kafkatier-sink.t.wal.3-deadbeef.task-0-9.kbatches"
    sink.log_dir.mkdir()
    in_log_dir.write_bytes(b"partial")
    sink(spark.range(30).selectExpr("CAST(id AS STRING) AS value"), 0)
    assert not leftover.exists() and not in_log_dir.exists()
    assert read_topic(tmp_path / "logs", "t").num_rows == 30
    sink.close()
    assert list(root.iterdir()) == []


def test_partitions_are_flushed_once_every_few_batches(spark: Any, tmp_path: Path) -> None:
    """Each batch is readable as soon as its call returns, but its partitions are flushed only
    with the batches after it (``sink.flushes``): until then the bookkeeping file keeps its
    write-ahead record and its staging files stay. The eighth batch waiting begins a flush,
    which the next batch finishes; closing flushes the rest."""
    sink = KafkaLogSink(tmp_path, topic="t", partitions=3)
    waiting: list[list[int]] = []
    for batch_id in range(flushes.MOST_BATCHES + 2):
        sink(spark.range(10).selectExpr(f"CAST(CONCAT('{batch_id}-', id) AS STRING) AS value"),
             batch_id)  # fmt: skip
        assert read_topic(tmp_path, "t").num_rows == 10 * (batch_id + 1)
        body = state(tmp_path, "t")
        waiting.append([wal["batch_id"] for wal in body["deferred"]] + [body["wal"]["batch_id"]])
        staged = {int(p.name.split(".")[3].split("-")[0]) for p in tmp_path.glob("*.t.wal.*")}
        if batch_id == flushes.MOST_BATCHES - 1:  # its flush's thread removes them meanwhile
            assert staged <= set(waiting[-1])
        else:
            assert staged == set(waiting[-1])
    first = list(range(flushes.MOST_BATCHES))
    assert waiting[: flushes.MOST_BATCHES] == [first[: n + 1] for n in first]
    assert waiting[flushes.MOST_BATCHES :] == [[8], [8, 9]]  # batch 8's finished the flush
    sink.close()
    assert wal_files(tmp_path) == []
    assert read_topic(tmp_path, "t").num_rows == 10 * (flushes.MOST_BATCHES + 2)


@pytest.mark.parametrize("staging", [None, "stage"])
def test_relative_paths_resolve_against_the_drivers_working_directory(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, staging: str | None
) -> None:
    """``KafkaLogSink("logs", staging="stage")`` writes under the driver's working directory at
    construction, as Spark's file sinks resolve a relative path, even where Spark's Python
    workers (which stage the pieces) run in another directory, and after the driver's own
    working directory moves on."""
    monkeypatch.chdir(tmp_path)
    sink = KafkaLogSink("logs", topic="t", partitions=2, staging=staging)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    sink(spark.range(30).selectExpr("CAST(id AS STRING) AS value"), 0)
    assert read_topic(tmp_path / "logs", "t").num_rows == 30
    assert verify_paths([tmp_path / "logs"]) == []
    assert list(elsewhere.iterdir()) == []
    if staging is not None:
        assert sink_staging_root(tmp_path / "stage", sink.log_dir, "t").is_dir()


def _data_batches_per_partition(log_dir: Path) -> dict[int, int]:
    with LogDirectory(log_dir) as logs:
        return {log.partition: sum(not b.is_control for s in log.segments for b in s.batches())
                for log in logs}  # fmt: skip


@pytest.mark.parametrize(("max_tasks", "most", "encoder"),
                         [(None, 2, "jvm"), (3, 3, "jvm"), (0, 8, "jvm"), (None, 2, "python")])
def test_a_batch_of_many_input_partitions_is_encoded_in_few_tasks(
    spark: Any, tmp_path: Path, max_tasks: int | None, most: int, encoder: str
) -> None:
    """Each encode task writes a record batch per Kafka partition it has rows for: eight input
    partitions (a Kafka source's eight) into 16 partitions made eight batches a partition.
    By default the job runs in as many tasks as Spark runs at once (two here), as the rows
    come (input order kept within each partition); ``max_tasks=0`` leaves the input as it is."""
    assert spark.sparkContext.defaultParallelism == 2
    df = spark.range(0, 4000, 1, 8).selectExpr(
        "CAST(CONCAT('v', id) AS BINARY) AS value", "CAST(CONCAT('k', id % 499) AS BINARY) AS key"
    )  # every task has rows for every partition
    sink = KafkaLogSink(tmp_path, topic="t", partitions=16, max_tasks=max_tasks, encoder=encoder)
    sink(df, 0)
    sink.close()
    assert verify_paths([tmp_path]) == []
    assert set(_data_batches_per_partition(tmp_path).values()) == {most}
    table = read_topic(tmp_path, "t")
    ids = [int(v[1:]) for v in table.column("value").to_pylist()]
    assert sorted(ids) == list(range(4000))  # every row once
    for partition in range(16):
        mine = [int(r["value"][1:]) for r in table.to_pylist() if r["partition"] == partition]
        assert mine == sorted(mine)


def test_a_small_batch_into_many_partitions_is_encoded_in_one_task(
    spark: Any, tmp_path: Path
) -> None:
    """A micro-batch whose size (Spark's estimate) brings each of many partitions less than a
    producer's ``batch.size`` per task is encoded in one task: one record batch a partition,
    where two tasks (the cores) would write two; an explicit ``max_tasks`` still rules."""
    df = spark.range(0, 4000, 1, 8).selectExpr(
        "CAST(CONCAT('v', id) AS BINARY) AS value", "CAST(CONCAT('k', id % 499) AS BINARY) AS key"
    )
    for max_tasks, most in ((None, 1), (2, 2)):
        log_dir = tmp_path / str(max_tasks)
        sink = KafkaLogSink(log_dir, topic="t", partitions=512, max_tasks=max_tasks)
        sink(df, 0)
        sink.close()
        assert max(_data_batches_per_partition(log_dir).values()) == most
        assert read_topic(log_dir, "t").num_rows == 4000


@pytest.mark.parametrize(("size", "partitions", "tasks"), [
    (0, 8, 1),  # an empty or unknown-small batch: one task
    (5_000 * 116, 1_024, 1),  # 5,000 rows into 1,024 partitions: 0.6 MB against 16 MiB
    (5_000 * 116, 8, 5),  # the same into 8: limited by the cores elsewhere
    (200_000 * 116, 1_024, 2),  # 23 MB: two tasks' worth
    (16 * 1024 * 64, 64, 1),  # exactly batch.size a partition
    (16 * 1024 * 64 + 1, 64, 2),
    (1 << 62, 1, 1 << 48),  # no bound from the estimate (defaultSizeInBytes)
])  # fmt: skip
def test_tasks_are_worth_a_producer_batch_a_partition(
    size: int, partitions: int, tasks: int
) -> None:
    assert tasks_for_size(size, partitions) == tasks


@pytest.mark.parametrize(("size", "tasks", "partitions", "room"), [
    (None, 2, 1_024, 0),  # no estimate (Spark Connect): the encoder's default
    (200_000 * 124, 0, 1_024, 0),  # tasks as the rows come: unknown
    (200_000 * 124, 2, 1_024, 12_109 + 3_027 + 1_024),  # a share and a quarter more
    (5_000 * 124, 1, 1_024, 605 + 151 + 1_024),
    (1 << 62, 1, 8, OPEN_BATCH_MOST),  # defaultSizeInBytes: no bound from the estimate
])  # fmt: skip
def test_open_batches_start_near_their_share_of_the_batch(
    size: int | None, tasks: int, partitions: int, room: int
) -> None:
    assert open_batch_bytes(size, tasks, partitions) == room


def test_max_tasks_below_zero_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SinkSchemaError, match="max_tasks must be 0"):
        KafkaLogSink(tmp_path, topic="t", partitions=1, max_tasks=-1)


@pytest.mark.parametrize(("conf", "default", "limit"), [
    ({}, 2, 2),  # static: the cores Spark runs at once
    ({"spark.dynamicAllocation.enabled": "false", "spark.executor.cores": "4"}, 8, 8),
    ({"spark.dynamicAllocation.enabled": "true"}, 2, 0),  # maxExecutors unbounded: no limit
    ({"spark.dynamicAllocation.enabled": "TRUE", "spark.dynamicAllocation.maxExecutors": "10",
      "spark.executor.cores": "4"}, 2, 40),  # what the cluster may grow to
    ({"spark.dynamicAllocation.enabled": "true", "spark.dynamicAllocation.maxExecutors": "1"},
     6, 6),  # never below what runs now
])  # fmt: skip
def test_the_task_limit_never_keeps_a_cluster_from_growing(
    conf: dict[str, str], default: int, limit: int
) -> None:
    assert task_limit(conf, default) == limit


def test_staged_pieces_group_by_partition_in_task_order_as_each_task_wrote_them() -> None:
    """The executors' rows come task after task, each task's partitions in its own order (a
    batch closed early comes first); the driver's groups: one per partition, sorted, its
    pieces in task order and, within a task, in the order the task wrote them (a partition of
    another topic with the same number is another group)."""
    rows = [  # task, topic, partition, records, path, position, length
        (1, "b", 3, 2, "t1", 0, 10), (1, "a", 3, 1, "t1", 10, 5), (1, "a", 3, 4, "t1", 15, 7),
        (0, "a", 3, 3, "t0", 0, 9), (0, "b", 3, 5, "t0", 9, 11), (0, "a", 3, 6, "t0", 20, 8),
        (2, "a", 0, 1, "t2", 0, 4),
    ]  # fmt: skip
    table = pa.table([list(c) for c in zip(*rows, strict=True)], names=list(_SPAN_FIELDS))
    encoded = _by_partition(table)
    groups = encoded.groups
    assert (encoded.paths, encoded.size) == ({"t0", "t1", "t2"}, 54)
    assert [(g.topic, g.partition, g.records) for g in groups] == [
        ("a", 0, 1), ("a", 3, 14), ("b", 3, 7)
    ]
    assert groups[1].spans == [("t0", 0, 9), ("t0", 20, 8), ("t1", 10, 5), ("t1", 15, 7)]
    assert groups[2].spans == [("t0", 9, 11), ("t1", 0, 10)]
    assert _by_partition(table.slice(0, 0)) == ([], frozenset(), 0)
    with pytest.raises(CorruptRecordError, match="columns"):
        _by_partition(table.select(["topic", "task"]))


def _packed_task(rows: list[tuple[int, str, int, int, str, int, int]]) -> bytes:
    """One task's rows as ``PieceRows.java`` packs them, written out by hand here: the names
    (topics and paths, each once, in first-use order), then a 40-byte row a piece."""
    names: list[str] = []
    body = b""
    for task, topic, partition, records, path, position, length in rows:
        for name in (topic, path):
            if name not in names:
                names.append(name)
        body += struct.pack("<iiiiqqq", task, names.index(topic), partition, names.index(path),
                            records, position, length)  # fmt: skip
    head = struct.pack("<i", len(names))
    for name in names:
        head += struct.pack("<i", len(name.encode())) + name.encode()
    return head + struct.pack("<i", len(rows)) + body


def test_packed_pieces_unpack_to_the_rows_the_jvm_encoder_wrote() -> None:
    """The JVM encoder's staged hand-over (``PieceRows.java``, one packed array per task after
    their count) read back as the columns of the rows, names in UTF-8 included; no task, or
    tasks without pieces, give no rows."""
    tasks = [
        [(1, "b", 0, 2, "/s/t1", 0, 10), (1, "tópico", 3, 1, "/s/t1", 10, 5)],
        [],
        [(0, "tópico", 3, 3, "/s/t0", 0, 9), (0, "b", 7, 5_000_000_000, "/s/t0", 9, 1 << 33)],
    ]  # fmt: skip
    packed = struct.pack("<i", len(tasks))
    for task in tasks:
        one = _packed_task(task)
        packed += struct.pack("<i", len(one)) + one
    table = unpack_pieces(packed)
    assert table.schema.names == list(_SPAN_FIELDS)
    assert [tuple(r.values()) for r in table.to_pylist()] == [r for t in tasks for r in t]
    assert unpack_pieces(struct.pack("<i", 0)).num_rows == 0
    with pytest.raises(CorruptRecordError, match="pieces are malformed"):
        unpack_pieces(packed[:-7])


def test_an_empty_micro_batch_writes_nothing_and_costs_no_decision(
    spark: Any, tmp_path: Path
) -> None:
    """A micro-batch without rows (a filter that keeps none, a stateful query's no-data batch)
    leaves the partitions and the bookkeeping file as they were: no transaction, no commit
    decision to fsync, no flush of the filesystem begun; the batches around it commit as usual, and
    Spark's replay of it writes nothing either."""
    sink = KafkaLogSink(tmp_path, topic="t", partitions=4)
    rows = spark.range(0, 40, 1, 2).selectExpr("CAST(CONCAT('v', id) AS BINARY) AS value")
    empty = rows.where("length(value) < 0")
    sink(rows, 0)
    books = sink._held.books  # batch 0's index and producer entries, set beside the next job
    waiting = [wal.batch_id for wal in sink._held.flushes.deferred]  # its flush: deferred

    def on_disk() -> dict[Path, bytes]:
        files = [tmp_path / "kafkatier-sink.t.json", *tmp_path.glob("t-*/*.log")]
        return {p.relative_to(tmp_path): p.read_bytes() for p in files}

    before = on_disk()
    sink(empty, 1)
    sink(empty, 1)  # Spark's replay of it
    # Batch 0's books were set beside the empty batch's encode job; nothing waits for it.
    assert books is not None and sink._held.books is None
    assert waiting == [wal.batch_id for wal in sink._held.flushes.deferred] == [0]
    assert on_disk() == before
    assert state(tmp_path, "t")["last_committed_batch"] == 0
    sink(rows, 2)
    sink.close()
    assert verify_paths([tmp_path]) == []
    assert read_topic(tmp_path, "t").num_rows == 80
    assert sum(end_offsets(tmp_path).values()) == 80 + 2 * 4  # two transactions, four markers each


def test_the_collector_is_off_for_a_whole_batch(spark: Any, tmp_path: Path) -> None:
    """Python's cyclic collector stays off for the whole of a micro-batch
    (``storage.collector.paused``): with many partitions every collection in it would traverse
    the batch's objects, a few per partition, and sometimes every log's (checked to fail with
    the pause around the check and the appends only: two collections in this batch)."""
    sink = KafkaLogSink(tmp_path, topic="t", partitions=512)
    df = spark.range(0, 20_000, 1, 2).selectExpr(
        "CAST(CONCAT('k', id) AS BINARY) AS key", "CAST(CONCAT('v', id) AS BINARY) AS value"
    )
    sink(df, 0)  # creates the topic
    inside: list[int] = []  # collections begun within the batch (its allocations before the
    # pause, the call's own, may meet one the test's allocations made due)

    def watch(phase: str, info: dict[str, int]) -> None:
        frame = sys._getframe(1)
        while frame is not None and frame.f_code is not KafkaLogSink._batch.__code__:
            frame = frame.f_back
        if phase == "start" and frame is not None:
            inside.append(info["generation"])

    gc.callbacks.append(watch)
    try:
        sink(df, 1)
    finally:
        gc.callbacks.remove(watch)
    assert gc.isenabled()
    assert inside == []
    sink.close()
    assert read_topic(tmp_path, "t").num_rows == 40_000


def test_a_topic_with_the_longest_valid_name_is_written_and_read(
    spark: Any, tmp_path: Path
) -> None:
    """249 characters (Kafka's limit): its partitions are staged under a cut name, as Kafka
    cuts its own ``-delete`` names, its settings file is named by a hash, and the sink's and
    the reader's paths stay within a file name's 255 bytes."""
    topic = "s" * 249
    TopicConfigStore(tmp_path).update(topic, {"cleanup.policy": "compact"}, source="test")
    frame = spark.createDataFrame([(f"k{i}".encode(), b"v") for i in range(50)],
                                  "key binary, value binary")  # fmt: skip
    KafkaLogSink(tmp_path, topic=topic, partitions=3)(frame, 0)
    KafkaLogSink(tmp_path, topic=topic)(frame, 1)
    assert verify_paths([tmp_path]) == []
    register_data_source(spark)
    read = spark.read.format("kafkatier").option("path", str(tmp_path)).option("subscribe", topic)
    assert read.load().count() == 100
    with LogDirectory(tmp_path) as logs:
        assert logs.partition_count(topic) == 3 and logs.config_for(topic).is_compacted


def test_partitions_switch_between_the_one_call_and_the_full_path(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A partition's state carried from one batch's appends to the next
    (``commit_fields.Carried``) is forgotten when a batch appends to it the full way (here: a
    batch too large to keep its parsed batches, ``append.KEPT_BYTES`` lowered for the test),
    so the batch after that starts from the partition as it is: every batch lands whole, at the
    offsets and sequences after the one before, and kafka-python reads every batch's CRC."""
    monkeypatch.setattr(append_module, "KEPT_BYTES", 64 * 1024)
    sink = KafkaLogSink(tmp_path, topic="t", partitions=3)
    sizes = [30, 30, 3_000, 30, 30, 3_000, 30, 30]  # 3,000 rows of 100 bytes: the full path
    carried, start = [], 0
    for batch_id, rows in enumerate(sizes):
        sink(spark.range(start, start + rows, 1, 2).selectExpr(
            "CAST(id AS STRING) AS key", "CONCAT(CAST(id AS STRING), REPEAT('v', 94)) AS value"
        ), batch_id)  # fmt: skip
        start += rows
        carried.append(len(sink._held.carried))
    assert carried == [0, 3, 0, 3, 3, 0, 3, 3]  # the first batch fills empty segments: full way
    sink.close()
    keys = read_topic(tmp_path, "t").column("key").to_pylist()
    assert sorted(int(key) for key in keys) == list(range(start))
    for directory in sorted(tmp_path.glob("t-*")):
        offset, sequence = 0, 0
        for batch in read_partition(directory):  # CRCs checked by kafka-python
            assert batch.base_offset == offset, (directory, batch)
            offset = batch.last_offset + 1
            if not batch.control:
                assert batch.last_seq - len(batch.records) + 1 == sequence, (directory, batch)
                sequence = batch.last_seq + 1
        assert batch.control and offset > 40  # each partition got some of the large batches
    assert verify_paths([tmp_path]) == []


def test_a_sink_whose_bookkeeping_file_was_deleted_goes_on_above_the_partitions_epoch(
    spark: Any, tmp_path: Path
) -> None:
    """The bookkeeping file deleted by hand (to start another query over the topic: the file
    names the old query): the new instance started at epoch 0 below the partitions' epoch 1, its
    batch was decided, refused by the partitions and then skipped on the retry as committed,
    its rows lost. The epoch now goes on from the partitions'."""
    def rows(first: int) -> Any:
        return spark.range(first, first + 10).selectExpr("CAST(id AS STRING) AS value")

    for instance in range(2):  # two instances: epoch 1 in the partitions
        sink = KafkaLogSink(tmp_path, topic="t", partitions=2)
        sink(rows(10 * instance), instance)
        sink.close()
    (tmp_path / "kafkatier-sink.t.json").unlink()
    again = KafkaLogSink(tmp_path, topic="t", partitions=2)
    again(rows(20), 0)
    again.close()
    values = sorted(int(v) for v in read_topic(tmp_path, "t").column("value").to_pylist())
    assert values == list(range(30))
    assert verify_paths([tmp_path]) == []


@pytest.mark.parametrize(("codec", "level"), [("gzip", 10), ("gzip", 0), ("lz4", 18),
                                              ("zstd", 23), ("zstd", -200000)])  # fmt: skip
def test_a_compression_level_outside_kafkas_range_is_refused_when_the_sink_is_made(
    tmp_path: Path, codec: str, level: int
) -> None:
    """The JVM encoder wrote some of these silently and failed on others mid-job with a bare
    IllegalArgumentException (the Python one refused them in a worker): Kafka's ranges for
    compression.<codec>.level, checked once, naming the setting."""
    with pytest.raises(ConfigError, match=f"compression.{codec}.level: out of range"):
        KafkaLogSink(tmp_path, topic="t", compression=codec, compression_level=level)
    KafkaLogSink(tmp_path, topic="t", compression=codec, compression_level=1)
