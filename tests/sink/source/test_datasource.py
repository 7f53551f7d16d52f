"""The kafkatier data source in batch queries: logs written by the storage engine (several
partitions and codecs, committed, aborted and open transactions, several segments) read back
through Spark equal what was written; isolation levels, offset and timestamp options, option
errors; the bounds the reader computes from the files agree with the engine's own; the Kafka
corpus reads as kafka-python reads it."""

from __future__ import annotations

import itertools
import json
import re
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record import MemoryRecords
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from kafkatier.sink.source.datasource import kafka_schema, register_data_source
from kafkatier.sink.source.offsets import rate_limit
from kafkatier.sink.source.options import parse_options
from kafkatier.sink.source.read import read_task
from kafkatier.sink.source.task import ReadTask
from kafkatier.storage.arrow.log import append_arrow
from kafkatier.storage.errors import ConfigError, OffsetOutOfRangeError
from kafkatier.storage.log.bounds import scan_bounds
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.log import Log
from kafkatier.storage.log.reader import IsolationLevel, iter_records
from kafkatier.storage.log.readonly import ReadOnlyPartition
from kafkatier.storage.verify.paths import verify_paths

CORPUS = Path(__file__).resolve().parents[3].parent / "shared" / "kafka-corpus"
HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
T0 = 1_700_000_000_000

# (topic, partition, offset, key, value, timestamp ms, timestampType, headers)
Row = tuple[str, int, int, bytes | None, bytes | None, int, int, tuple[tuple[str, bytes], ...]]


# ----------------------------------------------------------------------------- writing logs


@dataclass
class Written:
    """What a test wrote, row by row, with each row's transaction fate."""

    path: Path
    rows: list[tuple[Row, str]] = field(default_factory=list)  # (row, plain|commit|abort|open)
    clock: Iterator[int] = field(default_factory=lambda: itertools.count(T0, 1000))
    sequences: dict[tuple[str, int, int], int] = field(default_factory=dict)
    pending: dict[tuple[str, int, int], list[int]] = field(default_factory=dict)

    def visible(self, committed: bool = True) -> list[Row]:
        """What a consumer sees: committed data below each partition's first open transaction,
        or every data record (read_uncommitted)."""
        if not committed:
            return sorted(r for r, _ in self.rows)
        first_open: dict[tuple[str, int], int] = {}
        for r, fate in self.rows:
            if fate == "open":
                tp = (r[0], r[1])
                first_open[tp] = min(first_open.get(tp, r[2]), r[2])
        return sorted(
            r
            for r, fate in self.rows
            if fate in ("plain", "commit") and r[2] < first_open.get((r[0], r[1]), 2**62)
        )


def append(
    w: Written, log: Log, n: int, *, pid: int = -1, codec: str = "none", headers: bool = False
) -> None:
    """n records (some keyless, some with headers) from ``pid`` (-1: non-transactional)."""
    stamps = [next(w.clock) for _ in range(n)]
    base = len(w.rows)
    keys = [None if (base + i) % 3 == 0 else f"k{base + i}".encode() for i in range(n)]
    values = [f"value-{log.topic}-{base + i}".encode() * (1 + i % 4) for i in range(n)]
    hdrs = [[("h", f"{i}".encode()), ("x", b"\x00\xff")] if headers and i % 2 else None
            for i in range(n)]  # fmt: skip
    table = pa.table(
        {
            "key": pa.array(keys, pa.binary()),
            "value": pa.array(values, pa.binary()),
            "timestamp": pa.array(stamps, pa.int64()),
            "headers": pa.array(hdrs, HEADERS),
        }
    )
    key = (log.topic, log.partition, pid)
    txn = dict(producer_id=pid, producer_epoch=0, base_sequence=w.sequences.get(key, 0))
    info = append_arrow(
        log, table, codec=codec, transactional=pid >= 0, **(txn if pid >= 0 else {})
    )
    if pid >= 0:
        w.sequences[key] = w.sequences.get(key, 0) + n
    for i in range(n):
        row: Row = (log.topic, log.partition, info.first_offset + i, keys[i], values[i],
                    stamps[i], 0, tuple(hdrs[i] or ()))  # fmt: skip
        w.rows.append((row, "plain" if pid < 0 else "open"))
        if pid >= 0:
            w.pending.setdefault(key, []).append(len(w.rows) - 1)


def end_txn(w: Written, log: Log, pid: int, *, commit: bool) -> None:
    log.write_txn_marker(pid, 0, commit=commit, timestamp=next(w.clock))
    for i in w.pending.pop((log.topic, log.partition, pid), []):
        w.rows[i] = (w.rows[i][0], "commit" if commit else "abort")


def write_sample(path: Path) -> Written:
    """Two topics: ``events`` (3 partitions: none, lz4, zstd; interleaved transactions; an open
    one in partition 1) and ``other`` (gzip, small segments so the data spans several)."""
    w = Written(path)
    with LogDirectory(path) as ld:
        ld.topic_configs.update("other", {"segment.bytes": "600"}, source="test")
        e0, e1, e2 = (ld.get_or_create("events", p) for p in range(3))
        other = ld.get_or_create("other", 0)
        append(w, e0, 5, headers=True)
        append(w, e0, 3, pid=10, headers=True)
        append(w, e0, 2, pid=11, codec="lz4")
        append(w, e0, 2, pid=10)
        end_txn(w, e0, 11, commit=False)
        end_txn(w, e0, 10, commit=True)
        append(w, e0, 2, pid=11)  # the producer of an aborted transaction commits later
        end_txn(w, e0, 11, commit=True)
        append(w, e0, 2, pid=10)
        end_txn(w, e0, 10, commit=False)
        append(w, e0, 4)
        append(w, e1, 6, codec="lz4", headers=True)
        append(w, e1, 3, pid=12, codec="lz4")
        end_txn(w, e1, 12, commit=True)
        append(w, e1, 2, pid=13, codec="lz4")  # left open: the LSO stops here
        append(w, e1, 3, codec="lz4")
        append(w, e2, 7, codec="zstd")
        for _ in range(4):
            append(w, other, 6, codec="gzip", headers=True)
            append(w, other, 2, pid=20, codec="gzip")
            end_txn(w, other, 20, commit=False)
        assert len(other.segments) > 2
    assert verify_paths([path]) == []  # closed cleanly; the open transaction stays open
    return w


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Written:
    return write_sample(tmp_path_factory.mktemp("source") / "logs")


@pytest.fixture(scope="module")
def spark_kt(spark: Any) -> Any:
    register_data_source(spark)
    return spark


def load(spark: Any, path: Path, **options: str) -> Any:
    reader = spark.read.format("kafkatier").option("path", str(path))
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def rows_of(df: Any) -> list[Row]:
    """Collected rows as Row tuples (no headers column: empty headers)."""
    has_headers = "headers" in df.columns
    cols = ["topic", "partition", "offset", "key", "value", "unix_millis(timestamp) AS ts",
            "timestampType"] + (["headers"] if has_headers else [])  # fmt: skip
    out: list[Row] = []
    for r in df.selectExpr(*cols).collect():
        headers = (
            tuple((h["key"], bytes(h["value"])) for h in r["headers"] or ()) if has_headers else ()
        )
        key = None if r["key"] is None else bytes(r["key"])
        value = None if r["value"] is None else bytes(r["value"])
        out.append((r["topic"], r["partition"], r["offset"], key, value, r["ts"],
                    r["timestampType"], headers))  # fmt: skip
    return sorted(out)


def no_headers(rows: list[Row]) -> list[Row]:
    return [(*r[:7], ()) for r in rows]


# ----------------------------------------------------------------------------- batch queries


def test_schema_is_spark_kafka_source_schema(spark_kt: Any, sample: Written) -> None:
    plain = load(spark_kt, sample.path, subscribe="events")
    assert plain.schema == kafka_schema(False)
    assert [f.name for f in plain.schema] == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType"
    ]  # fmt: skip
    with_headers = load(spark_kt, sample.path, subscribe="events", includeHeaders="true")
    assert with_headers.schema == kafka_schema(True)
    assert with_headers.schema["headers"].dataType.simpleString() == (
        "array<struct<key:string,value:binary>>"
    )
    by_load_path = spark_kt.read.format("kafkatier").option("subscribe", "events")
    assert by_load_path.load(str(sample.path)).schema == kafka_schema(False)


def test_read_committed_equals_input(spark_kt: Any, sample: Written) -> None:
    before = {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in sample.path.rglob("*")}
    df = load(spark_kt, sample.path, subscribe="events,other", includeHeaders="true",
              minPartitions="1")  # fmt: skip
    assert df.rdd.getNumPartitions() == 1  # four small partitions share one task (split.py)
    assert rows_of(df) == sample.visible(committed=True)
    after = {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in sample.path.rglob("*")}
    assert after == before  # a reader never writes, creates or deletes a file


def test_small_chunks_read_the_same(spark_kt: Any, sample: Written) -> None:
    df = load(spark_kt, sample.path, subscribe="events,other", readChunkBytes="200")
    assert rows_of(df) == no_headers(sample.visible(committed=True))


@pytest.mark.parametrize("committed", [True, False])
def test_ranges_cut_into_many_tasks_read_the_same(
    spark_kt: Any, sample: Written, committed: bool
) -> None:
    """Each partition cut into ranges of a few offsets, each its own task: transactions span
    the cuts (read_committed must still drop aborted data begun before a range's start)."""
    level = "read_committed" if committed else "read_uncommitted"
    df = load(spark_kt, sample.path, subscribe="events,other", isolationLevel=level,
              maxPartitionBytes="150", openCostInBytes="0")  # fmt: skip
    assert df.rdd.getNumPartitions() > 10
    assert rows_of(df) == no_headers(sample.visible(committed=committed))


def test_min_partitions_gives_at_least_that_many_tasks(spark_kt: Any, sample: Written) -> None:
    """Spark's Kafka source: ``minPartitions`` is a floor on the tasks, small partitions cut by
    offsets to reach it (with the default open cost this small topic stayed one task)."""
    df = load(spark_kt, sample.path, subscribe="events,other", minPartitions="12")
    assert df.rdd.getNumPartitions() >= 12
    assert rows_of(df) == no_headers(sample.visible(committed=True))


def test_max_records_per_partition_caps_every_task(spark_kt: Any, sample: Written) -> None:
    """Spark's Kafka source's ``maxRecordsPerPartition`` (it was refused as an unknown option):
    no task reads more offsets than that, so none returns more rows; with ``minPartitions``
    the larger of the two asks wins."""
    from pyspark.sql import functions as F

    expected = no_headers(sample.visible(committed=True))
    df = load(spark_kt, sample.path, subscribe="events,other", maxRecordsPerPartition="7")
    per_task = df.groupBy(F.spark_partition_id().alias("task")).count().collect()
    assert max(r["count"] for r in per_task) <= 7
    assert df.rdd.getNumPartitions() >= -(-len(expected) // 7)
    assert rows_of(df) == expected
    both = load(spark_kt, sample.path, subscribe="events,other", maxRecordsPerPartition="10000",
                minPartitions="9")  # fmt: skip
    assert both.rdd.getNumPartitions() >= 9
    assert rows_of(both) == expected


def test_sparks_kafka_consumer_options_are_ignored(spark_kt: Any, sample: Written) -> None:
    """A query moved from ``format("kafka")`` keeps its consumer and broker settings: they
    change nothing here (they were refused as unknown options)."""
    kafka_job = {
        "kafka.bootstrap.servers": "broker1:9092,broker2:9092", "kafka.security.protocol": "SSL",
        "kafka.group.id": "g", "groupIdPrefix": "p", "fetchOffset.numRetries": "5",
        "kafkaConsumer.pollTimeoutMs": "1000", "kafka.max.poll.records": "10",
    }  # fmt: skip
    df = load(spark_kt, sample.path, subscribe="events,other", **kafka_job)
    assert rows_of(df) == no_headers(sample.visible(committed=True))


def test_read_uncommitted_shows_aborted_and_open_data(spark_kt: Any, sample: Written) -> None:
    df = load(spark_kt, sample.path, subscribePattern="ev.*", isolationLevel="read_uncommitted")
    expected = [r for r in no_headers(sample.visible(committed=False)) if r[0] == "events"]
    assert rows_of(df) == expected
    assert len(expected) > len([r for r in sample.visible() if r[0] == "events"])


def test_sparks_kafka_isolation_level_option_is_read(spark_kt: Any, sample: Written) -> None:
    """A Spark job asks its Kafka source for transactions' isolation with the consumer setting
    ``kafka.isolation.level``: the same rows as ``isolationLevel`` (it was refused as an
    unknown option); both, differing, is an error naming it."""
    options = {"subscribePattern": "ev.*", "kafka.isolation.level": "read_uncommitted"}
    df = load(spark_kt, sample.path, **options)
    expected = [r for r in no_headers(sample.visible(committed=False)) if r[0] == "events"]
    assert rows_of(df) == expected
    with pytest.raises(Exception, match=r"kafka\.isolation\.level"):
        load(spark_kt, sample.path, isolationLevel="read_committed", **options).collect()


def test_offset_ranges(spark_kt: Any, sample: Written) -> None:
    starting = '{"events":{"0":3,"1":-2,"2":-2},"other":{"0":10}}'
    ending = '{"events":{"0":15,"1":4,"2":-1},"other":{"0":-1}}'
    df = load(spark_kt, sample.path, subscribe="events,other", startingOffsets=starting,
              endingOffsets=ending)  # fmt: skip
    bounds = {("events", 0): (3, 15), ("events", 1): (0, 4), ("events", 2): (0, 2**62),
              ("other", 0): (10, 2**62)}  # fmt: skip
    expected = [
        r
        for r in no_headers(sample.visible())
        if bounds[(r[0], r[1])][0] <= r[2] < bounds[(r[0], r[1])][1]
    ]
    assert rows_of(df) == expected


def test_assign_reads_only_the_named_partitions(spark_kt: Any, sample: Written) -> None:
    df = load(spark_kt, sample.path, assign='{"events":[2]}')
    assert rows_of(df) == [r for r in no_headers(sample.visible()) if r[:2] == ("events", 2)]


def test_timestamps(spark_kt: Any, sample: Written) -> None:
    stamps = sorted(r[5] for r in sample.visible())
    start, end = stamps[len(stamps) // 4], stamps[3 * len(stamps) // 4]
    df = load(spark_kt, sample.path, subscribe="events,other", startingTimestamp=str(start),
              endingTimestamp=str(end))  # fmt: skip
    expected = [r for r in no_headers(sample.visible()) if start <= r[5] < end]
    assert expected and rows_of(df) == expected


def test_offsets_by_timestamp_a_partition(spark_kt: Any, sample: Written) -> None:
    """Spark's ``startingOffsetsByTimestamp`` / ``endingOffsetsByTimestamp``: a timestamp for
    each partition (JSON like ``startingOffsets``), each partition read from its first record
    at or after its own start to its first at or after its own end; every partition of the
    subscription must be named, as in Spark (both were refused as unknown options)."""
    visible = no_headers(sample.visible())
    by_tp: dict[tuple[str, int], list[int]] = {}
    for r in visible:
        by_tp.setdefault((r[0], r[1]), []).append(r[5])
    bounds = {tp: (sorted(ts)[len(ts) // 3], sorted(ts)[2 * len(ts) // 3])
              for tp, ts in by_tp.items()}  # fmt: skip

    def as_json(which: int) -> str:
        spec: dict[str, dict[str, int]] = {}
        for (topic, partition), pair in bounds.items():
            spec.setdefault(topic, {})[str(partition)] = pair[which]
        return json.dumps(spec)

    topics = ",".join(sorted({t for t, _ in bounds}))
    df = load(spark_kt, sample.path, subscribe=topics, startingOffsetsByTimestamp=as_json(0),
              endingOffsetsByTimestamp=as_json(1))  # fmt: skip
    expected = [r for r in visible if bounds[(r[0], r[1])][0] <= r[5] < bounds[(r[0], r[1])][1]]
    assert expected and rows_of(df) == expected
    topic, partition = next(iter(bounds))
    missing = json.dumps({topic: {str(partition): 0}})
    if len(bounds) > 1:
        with pytest.raises(Exception, match="startingOffsetsByTimestamp"):
            load(spark_kt, sample.path, subscribe=topics,
                 startingOffsetsByTimestamp=missing).collect()  # fmt: skip


def test_starting_timestamp_after_every_record(spark_kt: Any, sample: Written) -> None:
    late = str(T0 + 10**9)
    with pytest.raises(Exception, match="startingTimestamp"):
        load(spark_kt, sample.path, subscribe="events", startingTimestamp=late).collect()
    df = load(spark_kt, sample.path, subscribe="events", startingTimestamp=late,
              startingOffsetsByTimestampStrategy="latest")  # fmt: skip
    assert df.count() == 0


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"subscribe": "events", "kafka.auto.offset.reset": "earliest"},
         r"kafka\.auto\.offset\.reset.*startingOffsets.*Spark refuses"),
        ({"subscribe": "events", "maxRecordsPerPartition": "0"}, "maxRecordsPerPartition"),
        ({}, "subscribe"),
        ({"subscribe": "events", "subscribePattern": "e.*"}, "subscribePattern"),
        ({"subscribe": "events", "startingOffsets": "latest"}, "startingOffsets"),
        ({"subscribe": "events", "endingOffsets": "earliest"}, "endingOffsets"),
        ({"subscribe": "events", "startingOffsets": "{bad"}, "startingOffsets"),
        ({"subscribe": "events", "startingOffsets": '{"events":{"0":1}}'}, "startingOffsets"),
        ({"subscribe": "events", "isolationLevel": "serializable"}, "isolationLevel"),
        ({"subscribe": "events", "includeHeaders": "yes"}, "includeHeaders"),
        ({"subscribe": "events", "endingOffsets": '{"events":{"0":999,"1":-1,"2":-1}}'},
         "endingOffsets"),
        ({"subscribe": "nosuchtopic"}, "nosuchtopic"),
        ({"assign": '{"nosuchtopic":[0]}'}, "'assign': no partitions of nosuchtopic"),
    ],
)  # fmt: skip
def test_bad_options_name_the_option(
    spark_kt: Any, sample: Written, options: dict[str, str], named: str
) -> None:
    with pytest.raises(Exception, match=named):
        load(spark_kt, sample.path, **options).collect()


# ----------------------------------------------------------------------------- no Spark


@pytest.mark.parametrize(
    ("options", "streaming", "named"),
    [
        ({"subscribe": "t"}, False, "path"),
        ({"path": "/x", "subscribe": "t", "endingOffsets": "latest"}, True, "endingOffsets"),
        ({"path": "/x", "subscribe": "t", "endingTimestamp": "5"}, True, "endingTimestamp"),
        ({"path": "/x", "subscribe": "t", "startingTimestamp": "soon"}, None, "startingTimestamp"),
        ({"path": "/x", "subscribe": "t", "maxOffsetsPerTrigger": "0"}, True,
         "maxOffsetsPerTrigger"),
        ({"path": "/x", "assign": "[1]"}, None, "assign"),
        ({"path": "/x", "subscribePattern": "("}, None, "subscribePattern"),
        ({"path": "/x", "subscribe": "t", "minOffsetsPerTrigger": "9",
          "maxOffsetsPerTrigger": "5"}, True, "minOffsetsPerTrigger"),
        ({"path": "/x", "subscribe": "t", "kafka.key.deserializer": "x"}, None,
         r"kafka\.key\.deserializer.*Spark refuses"),
        ({"path": "/x", "subscribe": "t", "kafka.enable.auto.commit": "true"}, None,
         r"kafka\.enable\.auto\.commit.*Spark refuses"),
    ],
)  # fmt: skip
def test_option_errors(options: dict[str, str], streaming: bool | None, named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        parse_options(options, streaming=streaming)


def test_consumer_options_are_named_in_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    options = {"path": "/x", "subscribe": "t", "KAFKA.BOOTSTRAP.SERVERS": "h:9092",
               "groupIdPrefix": "g", "kafka.sasl.mechanism": "PLAIN"}  # fmt: skip
    with caplog.at_level("WARNING", logger="kafkatier.sink.source.kafka_options"):
        opts = parse_options(options, streaming=True)
        parse_options(options, streaming=False)  # the same set again: no second warning
    assert opts.topics == ("t",)
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1
    assert "groupIdPrefix, kafka.bootstrap.servers, kafka.sasl.mechanism" in warned[0]


def test_option_defaults_follow_spark() -> None:
    batch = parse_options({"path": "/x", "SUBSCRIBE": "a, b"}, streaming=False)
    stream = parse_options({"path": "/x", "subscribe": "a"}, streaming=True)
    assert batch.topics == ("a", "b") and batch.committed and not batch.include_headers
    assert (batch.starting, batch.ending, stream.starting) == (-2, -1, -1)


def test_rate_limit_shares_in_proportion() -> None:
    starts = {("t", 0): 0, ("t", 1): 10, ("t", 2): 5}
    ends = {("t", 0): 100, ("t", 1): 40, ("t", 2): 5}
    limited = rate_limit(starts, ends, 26)
    assert limited == {("t", 0): 20, ("t", 1): 16, ("t", 2): 5}
    assert rate_limit(starts, ends, 1000) == ends
    assert rate_limit(starts, {("t", 0): 100, ("t", 1): 11, ("t", 2): 5}, 10)[("t", 1)] == 11


OPS = st.lists(
    st.sampled_from(["plain", "a", "b", "commit-a", "abort-a", "commit-b", "abort-b", "roll"]),
    min_size=1,
    max_size=25,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=OPS)
def test_bounds_and_reads_match_the_engine(
    tmp_path_factory: pytest.TempPathFactory, ops: list[str]
) -> None:
    """While the writer has the log open, the reader's LSO, high watermark and read_committed
    rows (from the files alone) equal the engine's in-memory LSO/HW and its consumer-side
    filtered records, whatever the mix of transactions, markers and rolls."""
    path = tmp_path_factory.mktemp("bounds")
    w = Written(path)
    pids = {"a": 1, "b": 2}
    with LogDirectory(path) as ld:
        log = ld.get_or_create("t", 0)
        for op in ops:
            if op == "roll":
                log.roll()
            elif op == "plain":
                append(w, log, 2)
            elif op in pids:
                append(w, log, 2, pid=pids[op])
            elif (log.topic, 0, pids[op[-1]]) in w.pending:
                end_txn(w, log, pids[op[-1]], commit=op.startswith("commit"))
        check_against_engine(path, log)


def check_against_engine(path: Path, log: Log) -> None:
    with ReadOnlyPartition(path, "t", 0) as part:
        bounds = scan_bounds(part, committed=True)
    assert (bounds.high_watermark, bounds.last_stable) == (
        log.high_watermark,
        log.last_stable_offset,
    )
    for committed in (True, False):
        end = bounds.latest(committed)
        task = ReadTask(str(path), "t", 0, 0, end, committed=committed,
                        aborted=bounds.aborted_in(0, end), chunk_bytes=150)  # fmt: skip
        ours = [tuple(row.values()) for b in read_task(task)
                for row in b.select(["offset", "key", "value"]).to_pylist()]  # fmt: skip
        level = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
        engine = [(r.offset, r.key, r.value) for r in iter_records(log, 0, end, level)]
        assert ours == engine


def test_aborted_txn_markers_not_yet_indexed_stay_hidden(tmp_path: Path) -> None:
    """The planner's tail scan supplies ABORT markers whose .txnindex entry is not written yet
    (a live writer appends the marker first): simulated by deleting the .txnindex."""
    w = Written(tmp_path)
    with LogDirectory(tmp_path) as ld:
        log = ld.get_or_create("t", 0)
        append(w, log, 3, pid=1)
        end_txn(w, log, 1, commit=False)
        append(w, log, 2)
        for index in (tmp_path / "t-0").glob("*.txnindex"):
            index.unlink()
        with ReadOnlyPartition(tmp_path, "t", 0) as part:
            bounds = scan_bounds(part, committed=True)
        txns = [(t.producer_id, t.first_offset, t.last_offset) for t in bounds.aborted]
        assert txns == [(1, 0, 3)]
        task = ReadTask(str(tmp_path), "t", 0, 0, bounds.last_stable, aborted=bounds.aborted)
        assert [o for b in read_task(task) for o in b.column("offset").to_pylist()] == [4, 5]
        without = replace(task, aborted=())
        offsets = [o for b in read_task(without) for o in b.column("offset").to_pylist()]
        assert offsets == [0, 1, 2, 4, 5]


# ----------------------------------------------------------------------------- the corpus

CORPUS_SAMPLE = [
    ("xpxwo100__bullShit/tmp/kafka-logs", "TEST-TOPIC|topic1|foo"),  # message format v1
    ("LanXuage__dspider/data/kafka/data", "dspiderTask"),  # gzip
    # lz4, LogAppendTime (the rekey topics) and CreateTime
    ("mscaldas2012__kafka-connect-spooldir/kafka-data", "_confluent-controlcenter-.*|_schemas"),
]


def kafka_python_rows(log_dir: Path, pattern: str) -> list[Row]:
    """Every data record of the matching topics' segments, as kafka-python reads them."""
    rows: list[Row] = []
    for part_dir in sorted(log_dir.iterdir()):
        topic, _, partition = part_dir.name.rpartition("-")
        internal = topic in ("__consumer_offsets", "__transaction_state")
        if not part_dir.is_dir() or internal or not re.search(pattern, topic):  # Spark's rule
            continue
        for segment in sorted(part_dir.glob("*.log")):
            memory = MemoryRecords(segment.read_bytes())
            while memory.has_next():
                batch = memory.next_batch()
                if getattr(batch, "is_control_batch", False):
                    continue
                for r in batch:
                    ts_type = -1 if r.timestamp_type is None else r.timestamp_type
                    headers = tuple((k, v) for k, v in getattr(r, "headers", ()))
                    ts = -1 if r.timestamp is None else r.timestamp
                    rows.append(
                        (topic, int(partition), r.offset, r.key, r.value, ts, ts_type, headers)
                    )
    return sorted(rows)


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"Kafka corpus not found at {CORPUS}")
@pytest.mark.parametrize(("folder", "pattern"), CORPUS_SAMPLE)
def test_corpus_reads_like_kafka_python(spark_kt: Any, folder: str, pattern: str) -> None:
    log_dir = CORPUS / folder
    expected = kafka_python_rows(log_dir, pattern)
    df = load(spark_kt, log_dir, subscribePattern=pattern, includeHeaders="true",
              isolationLevel="read_uncommitted")  # fmt: skip
    assert expected and rows_of(df) == expected


TXN_CORPUS = "ItumelengMogase__Real-Time-Data-Pipeline-for-Patient-Admissions/kafka-data"


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"Kafka corpus not found at {CORPUS}")
def test_corpus_transaction_is_committed_and_visible() -> None:
    """A transaction Kafka committed: the LSO reaches the log end and read_committed shows its
    data as kafka-python reads it (the COMMIT marker itself never shows)."""
    log_dir = CORPUS / TXN_CORPUS
    topic = "_confluent-ksql-default__command_topic"
    expected = [r[2:5] for r in kafka_python_rows(log_dir, re.escape(topic))]
    with ReadOnlyPartition(log_dir, topic, 0) as part:
        bounds = scan_bounds(part, committed=True)
    assert bounds.last_stable == bounds.high_watermark == expected[-1][0] + 2  # + the marker
    task = ReadTask(str(log_dir), topic, 0, bounds.log_start, bounds.last_stable)
    rows = [tuple(r.values()) for b in read_task(task)
            for r in b.select(["offset", "key", "value"]).to_pylist()]  # fmt: skip
    assert expected and rows == expected


def test_reads_during_appends_and_rolls_see_a_committed_prefix(tmp_path: Path) -> None:
    """A writer thread appends plain rows and transactions (some aborted) with tiny segments, so
    it rolls (and trims the old active segment's indexes) all the time; meanwhile every
    read_committed read of [log start, LSO) equals the final committed view below that LSO:
    no aborted row, no gap, whatever the interleaving."""
    w = Written(tmp_path)
    done = threading.Event()
    errors: list[BaseException] = []

    def write(log: Log) -> None:
        try:
            for i in range(60):
                append(w, log, 2, pid=1 + i % 2)
                append(w, log, 1)
                end_txn(w, log, 1 + i % 2, commit=i % 3 != 0)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            done.set()

    snapshots: list[tuple[int, list[int]]] = []
    with LogDirectory(tmp_path) as ld:
        ld.topic_configs.update("t", {"segment.bytes": "1000"}, source="test")
        log = ld.get_or_create("t", 0)
        writer = threading.Thread(target=write, args=(log,))
        writer.start()
        while not done.is_set() or not snapshots:
            with ReadOnlyPartition(tmp_path, "t", 0) as part:
                bounds = scan_bounds(part, committed=True)
            task = ReadTask(str(tmp_path), "t", 0, 0, bounds.last_stable, aborted=bounds.aborted)
            offsets = [o for b in read_task(task) for o in b.column("offset").to_pylist()]
            snapshots.append((bounds.last_stable, offsets))
        writer.join()
        assert not errors and len(log.segments) > 8
    final = [r[2] for r in w.visible()]
    assert len(snapshots) > 3
    for lso, offsets in snapshots:
        assert offsets == [o for o in final if o < lso]


def test_fail_on_data_loss(tmp_path: Path) -> None:
    """Offsets below the log start (segments deleted, as retention does) fail the read, unless
    failOnDataLoss=false, which reads from the log start on."""
    w = Written(tmp_path)
    with LogDirectory(tmp_path) as ld:
        ld.topic_configs.update("t", {"segment.bytes": "400"}, source="test")
        log = ld.get_or_create("t", 0)
        for _ in range(6):
            append(w, log, 2)
        bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 2
    for suffix in (".log", ".index", ".timeindex"):
        (tmp_path / "t-0" / f"{bases[0]:020d}{suffix}").unlink()
    with ReadOnlyPartition(tmp_path, "t", 0) as part:
        assert part.log_start_offset == bases[1]
    task = ReadTask(str(tmp_path), "t", 0, 0, 12)
    with pytest.raises(OffsetOutOfRangeError, match="failOnDataLoss"):
        list(read_task(task))
    lenient = replace(task, fail_on_data_loss=False)
    offsets = [o for b in read_task(lenient) for o in b.column("offset").to_pylist()]
    assert offsets == list(range(bases[1], 12))


def legacy_wrapper(first: int, count: int, magic: int) -> bytes:
    """A gzip message set as a broker stores it: v1 inner offsets relative with the wrapper
    carrying the last absolute offset, v0 inner offsets absolute (kafka-format.md §1.10)."""
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=1, batch_size=1 << 20)
    for i in range(count):
        offset = i if magic == 1 else first + i
        builder.append(offset, T0 + first + i, f"k{first + i}".encode(), b"v" * (first + i))
    raw = bytearray(builder.build())
    struct.pack_into(">q", raw, 0, first + count - 1)  # not covered by the CRC
    return bytes(raw)


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_compressed_ranges(tmp_path: Path, magic: int) -> None:
    """A range ending inside a compressed legacy wrapper still reads that wrapper's records
    (its header only gives the wrapper's last offset), as kafka-python reads them."""
    part_dir = tmp_path / "old-0"
    part_dir.mkdir()
    data = b"".join(legacy_wrapper(first, 5, magic) for first in (0, 5, 10))
    (part_dir / "00000000000000000000.log").write_bytes(data)
    memory, theirs = MemoryRecords(data), []
    while memory.has_next():
        for r in memory.next_batch():
            ts = -1 if r.timestamp is None else r.timestamp
            theirs.append((r.offset, r.key, r.value, ts, -1 if magic == 0 else 0))
    task = ReadTask(str(tmp_path), "old", 0, 2, 8, committed=False, chunk_bytes=10)
    ours = [
        (r["offset"], r["key"], r["value"], r["ts"], r["timestampType"])
        for b in read_task(task)
        for r in b.append_column("ts", pc.divide(b.column("timestamp").cast(pa.int64()), 1000))
        .select(["offset", "key", "value", "ts", "timestampType"])
        .to_pylist()
    ]
    assert ours == [t for t in theirs if 2 <= t[0] < 8]


def test_a_relative_path_reads_from_the_working_directory(
    spark_kt: Any, sample: Written, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``option("path", "logs")`` resolves against the driver's working directory (when
    ``register_data_source`` ran), as Spark's file sources resolve a relative path, not against
    the Python worker's (Spark's own directory)."""
    monkeypatch.chdir(sample.path.parent)
    register_data_source(spark_kt)  # captures the driver's working directory
    try:
        df = load(spark_kt, Path(sample.path.name), subscribe="events,other")
        assert rows_of(df) == no_headers(sample.visible(committed=True))
    finally:
        monkeypatch.undo()
        register_data_source(spark_kt)
