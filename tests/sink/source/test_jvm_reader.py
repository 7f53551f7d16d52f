"""The JVM reader (``sink/source/jvm.py``, ``sink/java/io/kafkatier/source``): which scans it
takes, that they read as the Python reader and as kafka-python read the same files (the
engine's sample with every codec and transaction fate, and real Kafka-written logs), the
columns it decodes, and its errors. test_datasource.py runs its whole suite through it too
(``register_data_source`` takes the JVM reader when it can); this file proves that it does."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder
from py4j.protocol import Py4JJavaError
from test_codec import build_with, reference_read, sample_records
from test_datasource import (
    CORPUS,
    Written,
    append,
    end_txn,
    kafka_python_rows,
    load,
    no_headers,
    rows_of,
    write_sample,
)
from test_stream import TIMEOUT_S, Collector, start
from verify_fixtures import snappy_for_kafka_python

from kafkatier.cli.main import main
from kafkatier.sink.source.datasource import register_data_source
from kafkatier.sink.source.pushdown import Narrowing
from kafkatier.storage.arrow.log import append_arrow
from kafkatier.storage.config.internal_topics import managed_topic
from kafkatier.storage.errors import ConfigError
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.wire import Codec

JVM_SCAN = "kafkatier (JVM reader)"
pytestmark = pytest.mark.skipif(
    not __import__("shutil").which("javac"), reason="the JVM reader is compiled with javac (a JDK)"
)


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Written:
    return write_sample(tmp_path_factory.mktemp("jvm") / "logs")


@pytest.fixture(scope="module")
def spark_jvm(spark: Any) -> Any:
    register_data_source(spark, reader="jvm")
    return spark


def plan_of(df: Any) -> str:
    return str(df._jdf.queryExecution().executedPlan().toString())


def test_local_scans_are_the_jvm_readers_and_read_as_python_does(
    spark_jvm: Any, sample: Written
) -> None:
    for level in ("read_committed", "read_uncommitted"):
        jvm = load(spark_jvm, sample.path, subscribe="events,other", isolationLevel=level)
        python = (spark_jvm.read.format("kafkatier_python").option("path", str(sample.path))
                  .option("subscribe", "events,other").option("isolationLevel", level)
                  .load())  # fmt: skip
        assert JVM_SCAN in plan_of(jvm)
        assert JVM_SCAN not in plan_of(python)
        expected = no_headers(sample.visible(committed=level == "read_committed"))
        assert rows_of(jvm) == rows_of(python) == expected


def test_headers_read_as_python_does(spark_jvm: Any, sample: Written) -> None:
    jvm = load(spark_jvm, sample.path, subscribe="events,other", includeHeaders="true")
    python = (spark_jvm.read.format("kafkatier_python").option("path", str(sample.path))
              .option("subscribe", "events,other").option("includeHeaders", "true")
              .load())  # fmt: skip
    assert JVM_SCAN in plan_of(jvm)
    assert rows_of(jvm) == rows_of(python) == sample.visible()
    nulls = jvm.where("headers IS NULL").count()
    assert 0 < nulls == sum(1 for r in sample.visible() if not r[7])


def test_a_field_inside_headers_reads_as_python_does(spark_jvm: Any, sample: Written) -> None:
    """Spark prunes nested fields: ``headers.key`` alone, or ``headers[0].value`` alone,
    reaches the reader as a header struct of one field, which the JVM reader filled as two
    (a failure reported as a corrupt batch)."""
    queries = [
        "SELECT offset, headers.key AS k FROM t",
        "SELECT offset, CAST(headers[0].value AS STRING) AS v FROM t",
        "SELECT count(*) AS n FROM t WHERE size(headers) > 0 AND headers[0].value IS NULL",
        "SELECT offset FROM t WHERE array_contains(headers.key, headers[0].key)",
    ]
    for query in queries:
        found = {}
        for fmt in ("kafkatier", "kafkatier_python"):
            (spark_jvm.read.format(fmt).option("path", str(sample.path))
             .option("subscribe", "events,other").option("includeHeaders", "true").load()
             .createOrReplaceTempView("t"))  # fmt: skip
            found[fmt] = sorted(map(tuple, spark_jvm.sql(query).collect()), key=repr)
        assert found["kafkatier"] == found["kafkatier_python"], query
        assert found["kafkatier"], query


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"Kafka corpus not found at {CORPUS}")
def test_legacy_logs_stay_with_the_python_reader(spark_jvm: Any) -> None:
    legacy = load(spark_jvm, CORPUS / "xpxwo100__bullShit/tmp/kafka-logs", subscribe="foo")
    assert JVM_SCAN not in plan_of(legacy)
    assert legacy.count() > 0


@pytest.mark.parametrize("level", ["read_committed", "read_uncommitted"])
def test_counts_walk_headers_and_decode_only_the_edges(
    spark_jvm: Any, sample: Written, level: str
) -> None:
    """A count reads whole batches' headers only; ranges that start inside a batch
    (startingOffsets) or are cut inside one (many small tasks), control batches and aborted
    transactions still count as the rows do. No filter on offset: Spark would then ask for
    the offsets, and the records would be decoded."""
    expected = no_headers(sample.visible(committed=level == "read_committed"))
    tps = sorted({(r[0], r[1]) for r in expected})
    for low in (0, 3, 6, 7):
        starting: dict[str, dict[str, int]] = {}
        for topic, partition in tps:
            starting.setdefault(topic, {})[str(partition)] = low
        for options in ({}, {"maxPartitionBytes": "150", "openCostInBytes": "0"}):
            df = load(spark_jvm, sample.path, subscribe="events,other", isolationLevel=level,
                      startingOffsets=json.dumps(starting), **options)  # fmt: skip
            counts = {(r["topic"], r["partition"]): r["count"]
                      for r in df.groupBy("topic", "partition").count().collect()}  # fmt: skip
            assert counts == Counter((r[0], r[1]) for r in expected if r[2] >= low), (low, options)
            assert df.count() == sum(counts.values())


def test_streaming_micro_batches_are_read_by_the_jvm_reader(
    spark_jvm: Any, sample: Written, tmp_path: Path
) -> None:
    """Offsets stay the Python source's (maxOffsetsPerTrigger, availableNow); the reading of
    each micro-batch is the JVM reader's, and every visible row comes once."""
    sink = Collector()
    options = {"subscribe": "events,other", "includeHeaders": "true", "maxOffsetsPerTrigger": "7"}
    query = start(spark_jvm, sample.path, tmp_path / "chk", sink, {"availableNow": True}, **options)
    assert query.awaitTermination(TIMEOUT_S), "availableNow query did not finish"
    assert query.exception() is None
    descriptions = {s["description"] for p in query.recentProgress for s in p["sources"]}
    assert descriptions == {"kafkatier stream (JVM reader)"}
    assert len(sink.batches) > 3
    assert sink.sorted_rows() == sample.visible()


def test_a_checkpoint_resumes_with_either_reader(spark_jvm: Any, tmp_path: Path) -> None:
    """The JVM reader's stream keeps its offsets in the driver's planner, the Python source's in
    a Python process of its own: both write the same offset JSON, so one checkpoint resumes
    with the other reader, then back, each row read once and nothing aborted or open shown."""
    w = Written(tmp_path / "logs")
    chk = tmp_path / "chk"
    seen: list[Any] = []
    with LogDirectory(w.path) as ld:
        p0, p1 = ld.get_or_create("h", 0), ld.get_or_create("h", 1)
        for turn, source in enumerate(["kafkatier_python", "kafkatier", "kafkatier_python"]):
            append(w, p0, 3 + turn, codec="lz4")
            append(w, p1, 2, pid=20 + turn)
            end_txn(w, p1, 20 + turn, commit=turn != 1)
            sink = Collector()
            reader = (spark_jvm.readStream.format(source).option("path", str(w.path))
                      .option("subscribe", "h").option("startingOffsets", "earliest")
                      .option("maxOffsetsPerTrigger", "3"))  # fmt: skip
            writer = reader.load().writeStream.foreachBatch(sink).trigger(availableNow=True)
            query = writer.option("checkpointLocation", str(chk)).start()
            assert query.awaitTermination(TIMEOUT_S), "availableNow query did not finish"
            assert query.exception() is None
            descriptions = {s["description"] for p in query.recentProgress for s in p["sources"]}
            assert ("kafkatier stream (JVM reader)" in descriptions) == (source == "kafkatier")
            new = sorted(set(no_headers(w.visible())) - set(seen))
            assert new and sink.sorted_rows() == new, source
            seen += new
    assert len(seen) == 3 + 4 + 5 + 2 + 2  # the second turn's transaction was aborted


def test_only_the_columns_asked_for_are_decoded(spark_jvm: Any, sample: Written) -> None:
    df = load(spark_jvm, sample.path, subscribe="events,other")
    expected = no_headers(sample.visible())
    keys = df.select("key")
    assert "ReadSchema" not in plan_of(keys) or "value" not in plan_of(keys).split("ReadSchema")[1]
    assert "[key#" in plan_of(keys).split("BatchScan")[1]
    assert sorted((r["key"] for r in keys.collect()), key=lambda k: (k is not None, k)) == sorted(
        (r[3] for r in expected), key=lambda k: (k is not None, k)
    )
    assert df.count() == len(expected)
    by_partition = df.groupBy("topic", "partition").count().collect()
    counts = Counter((r[0], r[1]) for r in expected)
    assert {(r["topic"], r["partition"]): r["count"] for r in by_partition} == counts


V2_CORPUS = [
    ("ArthurArutunyan04__Backend_labs/kafka-data", ".*"),  # snappy, compacted, KRaft
    ("LanXuage__dspider/data/kafka/data", "dspiderTask"),  # gzip
    ("mscaldas2012__kafka-connect-spooldir/kafka-data", "_confluent-controlcenter-.*|_schemas"),
    ("asabou__kafka-demo/data/kafka/data", ".*"),  # idempotent producers
    ("ItumelengMogase__Real-Time-Data-Pipeline-for-Patient-Admissions/kafka-data", ".*"),
]


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"Kafka corpus not found at {CORPUS}")
@pytest.mark.parametrize(("folder", "pattern"), V2_CORPUS)
def test_kafka_written_logs_read_as_kafka_python_reads_them(
    spark_jvm: Any, folder: str, pattern: str
) -> None:
    """Real brokers' logs (snappy, gzip, lz4, LogAppendTime, compaction gaps, idempotent and
    transactional batches), read_uncommitted as kafka-python's record parser reads them. A
    partition with a segment missing from the corpus is left out (both readers would differ
    from the whole log there, and the Python reader's tests cover holes), and so is KRaft's
    metadata log, which is no topic (a Kafka consumer cannot read it either)."""
    log_dir = CORPUS / folder
    holes = {line.split("\t")[0].rsplit("/", 2)[-2] for line in _missing(log_dir)
             if line.split("\t")[0].endswith(".log")}  # fmt: skip
    expected = [r for r in kafka_python_rows(log_dir, pattern)
                if f"{r[0]}-{r[1]}" not in holes and managed_topic(r[0])]  # fmt: skip
    assign: dict[str, list[int]] = {}
    for topic, partition in sorted({(r[0], r[1]) for r in expected}):
        assign.setdefault(topic, []).append(partition)
    df = load(spark_jvm, log_dir, assign=json.dumps(assign), isolationLevel="read_uncommitted",
              failOnDataLoss="false", includeHeaders="true")  # fmt: skip
    assert JVM_SCAN in plan_of(df)
    assert expected and rows_of(df) == expected


@pytest.mark.parametrize("builder", [KpBuilder, AioBuilder], ids=["kafka-python", "aiokafka"])
@pytest.mark.parametrize("codec", list(Codec))
def test_batches_client_builders_write_read_as_kafka_python_reads_them(
    spark_jvm: Any, tmp_path: Path, builder: Any, codec: Codec
) -> None:
    """Batches the clients' own builders wrote (every codec; null keys, values and header
    values; empty and absent headers) as a segment: the JVM reader's rows with headers are the
    rows kafka-python's parser reads (aiokafka's for snappy)."""
    with snappy_for_kafka_python():
        data = build_with(builder, sample_records(300), codec)
    part = tmp_path / "logs" / "client-0"
    part.mkdir(parents=True)
    (part / f"{0:020d}.log").write_bytes(data)
    df = load(spark_jvm, tmp_path / "logs", subscribe="client", includeHeaders="true")
    assert JVM_SCAN in plan_of(df)
    got = [
        (r["offset"], r["ts"], _bytes(r["key"]), _bytes(r["value"]),
         [(h["key"], _bytes(h["value"])) for h in r["headers"] or ()])
        for r in df.selectExpr("offset", "unix_millis(timestamp) AS ts", "key", "value",
                               "headers").orderBy("offset").collect()
    ]  # fmt: skip
    assert got == reference_read(data)


def _bytes(value: Any) -> bytes | None:
    return None if value is None else bytes(value)


def _missing(log_dir: Path) -> list[str]:
    notes = next(p for p in log_dir.parents if p.parent == CORPUS) / "_MISSING.txt"
    return notes.read_text().splitlines() if notes.exists() else []


def test_a_corrupt_batch_fails_the_read_naming_file_and_position(
    spark_jvm: Any, tmp_path: Path
) -> None:
    sample = write_sample(tmp_path / "logs")
    segment = sorted((sample.path / "events-0").glob("*.log"))[0]
    data = bytearray(segment.read_bytes())
    data[100] ^= 0xFF  # inside the first batch's records
    segment.write_bytes(bytes(data))
    with pytest.raises(Py4JJavaError) as info:
        load(spark_jvm, sample.path, subscribe="events").collect()
    line = next(ln for ln in str(info.value).splitlines() if "kafkatier read error" in ln)
    assert line.endswith(
        f"kafkatier read error [CorruptRecordError] record batch CRC-32C mismatch "
        f"(file={segment}, position=0)"
    )


def test_options_the_python_source_refuses_fail_as_there(spark_jvm: Any, tmp_path: Path) -> None:
    with pytest.raises(Exception, match=r"kafkatier option 'path': .* is not a directory"):
        load(spark_jvm, tmp_path / "nowhere", subscribe="events").collect()


@pytest.mark.parametrize(
    ("schema", "got"),
    [
        ("value string", "value:string"),
        ("partition long, offset int", "partition:bigint,offset:int"),
    ],
)
def test_a_schema_of_ones_own_is_refused_as_by_the_python_reader(
    spark_jvm: Any, sample: Written, schema: str, got: str
) -> None:
    """The JVM reader read ``value string`` as text from the value's bytes and failed a task
    with a NullPointerException on ``partition long``; the Python reader refused both."""
    reader = spark_jvm.read.format("kafkatier").schema(schema)
    with pytest.raises(Exception, match="the kafkatier source has a fixed schema") as raised:
        reader.option("path", str(sample.path)).option("subscribe", "events").load().collect()
    assert f"got struct<{got}>" in str(raised.value)
    same = spark_jvm.read.format("kafkatier").schema(load(spark_jvm, sample.path,
                                                          subscribe="events").schema)
    assert same.option("path", str(sample.path)).option("subscribe", "events").load().count()


def test_reader_choice_is_checked(spark: Any) -> None:
    with pytest.raises(ConfigError, match="reader='fast': expected one of auto, jvm, python"):
        register_data_source(spark, reader="fast")


def test_filters_leave_out_the_files_they_exclude(spark_jvm: Any, tmp_path: Path) -> None:
    """events-0's first batch (offsets 0-4) is corrupt: only a scan that reads it fails. Scans
    filtered to other partitions, to later offsets or to later timestamps never open it, and
    still return exactly the matching rows (Spark applies the filters again)."""
    sample = write_sample(tmp_path / "logs")
    segment = sorted((sample.path / "events-0").glob("*.log"))[0]
    data = bytearray(segment.read_bytes())
    data[100] ^= 0xFF
    segment.write_bytes(bytes(data))
    expected = no_headers(sample.visible())
    df = load(spark_jvm, sample.path, subscribe="events,other")
    with pytest.raises(Py4JJavaError, match="CRC-32C mismatch"):
        df.where("topic = 'events' AND partition = 0").collect()
    fifth = next(r[5] for r in expected if r[:3] == ("events", 0, 5))
    cases = {
        "partition = 1 AND topic = 'events'": lambda r: r[:2] == ("events", 1),
        "topic IN ('other') OR partition > 0": lambda r: r[0] == "other" or r[1] > 0,
        "partition = 0 AND offset >= 5 AND offset < 40": lambda r: r[1] == 0 and 5 <= r[2] < 40,
        "topic = 'events' AND offset IN (6, 9, 30)": lambda r: r[0] == "events" and r[2] in (
            6, 9, 30),
        f"timestamp >= timestamp_millis({fifth}) AND partition < 2": lambda r: r[5] >= fifth
        and r[1] < 2,
    }
    for condition, keep in cases.items():
        if "OR" in condition:  # not pushed (a disjunction): it reads everything and fails
            with pytest.raises(Py4JJavaError, match="CRC-32C mismatch"):
                df.where(condition).collect()
            continue
        filtered = df.where(condition)
        assert "PushedFilters: [" in plan_of(filtered), condition
        assert rows_of(filtered) == [r for r in expected if keep(r)], condition


def _f(column: str, op: str, value: Any) -> dict[str, Any]:
    return {"column": column, "op": op, "value": value}


BOTH = [("a", 0), ("b", 7)]


@pytest.mark.parametrize(
    ("filters", "admitted", "offsets", "since"),
    [
        ([], BOTH, (0, 100), None),
        ([_f("partition", "in", [7, 9])], [("b", 7)], (0, 100), None),
        ([_f("topic", "eq", "a"), _f("partition", "le", 0)], [("a", 0)], (0, 100), None),
        ([_f("topic", "gt", "a")], BOTH, (0, 100), None),  # string order narrows nothing
        ([_f("offset", "gt", 10), _f("offset", "le", 20)], BOTH, (11, 21), None),
        ([_f("offset", "in", [5, 500])], BOTH, (5, 6), None),
        ([_f("offset", "ge", 500)], BOTH, (100, 100), None),
        ([_f("offset", "lt", 0)], BOTH, (0, 0), None),
        ([_f("timestamp", "gt", 999), _f("timestamp", "lt", 5)], BOTH, (0, 100), 1000),
        ([_f("timestamp", "in", [7, 3])], BOTH, (0, 100), 3),
    ],
)
def test_narrowing(filters: Any, admitted: Any, offsets: Any, since: Any) -> None:
    narrowing = Narrowing.of(filters)
    assert [tp for tp in BOTH if narrowing.admits(tp)] == admitted
    starts, ends = narrowing.offsets(dict.fromkeys(admitted, 0), dict.fromkeys(admitted, 100))
    assert {(starts[tp], ends[tp]) for tp in admitted} == {offsets}
    assert narrowing.since_ms == since


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_a_task_holds_about_one_chunk_not_its_partition(
    spark_jvm: Any, tmp_path: Path, codec: str
) -> None:
    """12 MiB of values (random: zstd cannot shrink them) in one partition, read 1 MiB at a time
    by one task: the task's peak (read buffer, decompression buffer and column vectors,
    TaskMemory.java) stays within a chunk and a few record batches, whatever the partition's
    size."""
    n = 100_000
    rng = np.random.default_rng(7)
    values = [bytes(v) for v in rng.integers(0, 256, size=(n, 120), dtype=np.uint8)]
    with LogDirectory(tmp_path / "logs") as logs:
        table = pa.table({"key": pa.nulls(n, pa.binary()), "value": values})
        append_arrow(logs.get_or_create("big", 0), table,
                     codec=codec)  # fmt: skip
    memory = spark_jvm.sparkContext._jvm.io.kafkatier.source.TaskMemory
    memory.reset()
    df = load(spark_jvm, tmp_path / "logs", subscribe="big", readChunkBytes=str(1 << 20),
              minPartitions="1")  # fmt: skip
    total = df.selectExpr("sum(length(value)) AS n").first()["n"]
    assert total == 120 * n
    chunk = 1 << 20
    assert chunk // 2 < memory.peak() < chunk + (4 << 20) < 120 * n // 2


def test_offset_indexes_are_only_hints(spark_jvm: Any, tmp_path: Path) -> None:
    """A topic of many small segments read from offsets inside each: with its closed segments'
    offset indexes intact, missing, or pointing at the wrong batches, the executors find the
    same batches (an entry that disagrees with the batch it points at is ignored)."""
    w = Written(tmp_path / "logs")
    with LogDirectory(w.path) as ld:
        ld.topic_configs.update("t", {"segment.bytes": "400", "index.interval.bytes": "1"},
                                source="test")  # fmt: skip
        log = ld.get_or_create("t", 0)
        for _ in range(12):
            append(w, log, 3)
    indexes = sorted((w.path / "t-0").glob("*.index"))[:-1]  # closed segments
    assert len(indexes) > 4
    expected = no_headers(w.visible())

    def rows_from(start: int) -> list[Any]:
        df = load(spark_jvm, w.path, subscribe="t", startingOffsets=json.dumps({"t": {"0": start}}))
        return rows_of(df)

    starts = range(2, 36, 3)  # inside batches and at their ends (what index entries name)
    intact = {s: rows_from(s) for s in starts}
    assert intact == {s: [r for r in expected if r[2] >= s] for s in starts}
    for index in indexes:
        data = bytearray(index.read_bytes())
        for at in range(4, len(data), 8):
            data[at : at + 4] = (at * 7).to_bytes(4, "big")  # positions of no batch
        index.write_bytes(bytes(data))
    assert {s: rows_from(s) for s in starts} == intact
    for index in indexes:
        index.unlink()
    assert {s: rows_from(s) for s in starts} == intact


def test_the_active_segments_index_is_a_hint_while_it_is_written(
    spark_jvm: Any, tmp_path: Path
) -> None:
    """The active segment's offset index, preallocated and still mapped by its writer (the log
    stays open), is used: a read from deep in the segment never reaches a corrupt first batch;
    reads from offsets inside and at the ends of its batches find the same rows with its
    entries intact and with every written entry pointing at no batch."""
    w = Written(tmp_path / "logs")
    with LogDirectory(w.path) as ld:
        ld.topic_configs.update("a", {"index.interval.bytes": "1"}, source="test")
        log = ld.get_or_create("a", 0)
        for _ in range(15):
            append(w, log, 3)
        log.active_segment.write_index_entries()  # the writer keeps its last ones in memory
        index = log.active_segment.offset_index.path
        assert len(log.segments) == 1 and index.stat().st_size > 15 * 8  # preallocated
        expected = no_headers(w.visible())

        def rows_from(start: int) -> list[Any]:
            df = load(spark_jvm, w.path, subscribe="a",
                      startingOffsets=json.dumps({"a": {"0": start}}))  # fmt: skip
            return rows_of(df)

        starts = range(1, 45, 4)
        intact = {s: rows_from(s) for s in starts}
        assert intact == {s: [r for r in expected if r[2] >= s] for s in starts}
        segment = log.active_segment.log_path
        with open(segment, "r+b") as f:  # the first batch claims offsets up to 1,000 (and fails
            f.seek(23)  # its CRC): a walk of the headers from the segment's start stops there
            good = f.read(4)
            f.seek(23)
            f.write((1000).to_bytes(4, "big"))
        assert rows_from(40) == [r for r in expected if r[2] >= 40]  # the index skipped it
        with open(segment, "r+b") as f:
            f.seek(23)
            f.write(good)
        with open(index, "r+b") as f:  # in place: the writer's mapping stays valid
            written = [e for e in range(0, 15 * 8, 8)
                       if int.from_bytes(index.read_bytes()[e + 4 : e + 8], "big")]  # fmt: skip
            assert len(written) >= 10
            for at in written:
                f.seek(at + 4)
                f.write((at * 7 + 3).to_bytes(4, "big"))  # positions of no batch
        assert {s: rows_from(s) for s in starts} == intact


def test_a_start_after_the_end_is_an_error_as_with_the_python_reader(
    spark_jvm: Any, sample: Written
) -> None:
    """startingOffsets past a partition's end (or past endingOffsets) fails the query, as
    Spark's Kafka source fails it ("starting offset ... is after the ending offset"), with
    filters or without: the JVM reader's planning clamped the start to the end and read
    nothing, without a word."""
    starts = json.dumps({"other": {"0": 1000}})
    for extra in ({}, {"endingOffsets": json.dumps({"other": {"0": 5}})}):
        for source in ("kafkatier", "kafkatier_python"):
            reader = spark_jvm.read.format(source).option("path", str(sample.path))
            for name, value in {"subscribe": "other", "startingOffsets": starts, **extra}.items():
                reader = reader.option(name, value)
            for query in (reader.load(), reader.load().where("offset > 2")):
                with pytest.raises(Exception, match="starting offset 1000 is after the ending"):
                    query.count()


@pytest.mark.parametrize("fail", [True, False])
def test_segments_deleted_after_planning_are_data_loss(
    spark_jvm: Any, tmp_path: Path, fail: bool
) -> None:
    """Retention between the scan's planning and its task: the executor read on from the first
    segment left, and with failOnDataLoss=true (the default) the records gone were silently
    missing. Spark's Kafka source fails such a task; with false it reads what is left."""
    logs = tmp_path / "logs"
    for i in range(5):
        rows = tmp_path / f"in{i}.jsonl"
        rows.write_text("".join(json.dumps({"value": f"r-{i}-{j}"}) + "\n" for j in range(100)))
        assert main(["produce", str(logs), "--topic", "del", "--input", str(rows),
                     "--config", "segment.bytes=1024", "--config", "retention.ms=-1"]) == 0
    df = load(spark_jvm, logs, subscribe="del", failOnDataLoss=str(fail).lower())
    planned = df.select("offset").rdd  # the scan's ranges are fixed here: 0..500
    assert main(["clean", str(logs), "--config", "retention.bytes=1",
                 "--config", "file.delete.delay.ms=0"]) == 0  # fmt: skip
    first = min(int(p.name[:20]) for p in (logs / "del-0").glob("*.log"))
    assert 0 < first < 500
    if fail:
        with pytest.raises(Py4JJavaError, match=f"offset 0 of del-0 is gone: the log starts at "
                                                f"{first}"):  # fmt: skip
            planned.collect()
    else:
        assert [r.offset for r in planned.collect()] == list(range(first, 500))
