"""The sink's JVM encoder (sink/jvm.py + sink/java) against the Python encoder and independent
parsers, through a real local SparkSession: same records, same placement, valid batches for
kafka-python, the sink's errors for bad input, bounded memory, and the fallback without a JDK."""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from kafka.record.default_records import DefaultRecordBatch
from test_sink import HEADER_TYPE, end_offsets, mixed_rows, read_topic
from verify_fixtures import snappy_for_kafka_python

from kafkatier.sink import KafkaLogSink, jvm
from kafkatier.sink.encode import EncodePlan, TopicPlan
from kafkatier.sink.jvm import EncoderChoice, JvmEncoderUnavailable, jar_path
from kafkatier.sink.pieces import unpack_pieces
from kafkatier.sink.schema import SinkSchemaError, check_schema, normalize
from kafkatier.sink.source.datasource import register_data_source
from kafkatier.sink.stage import StagingPlace
from kafkatier.storage.arrow.log import append_arrow
from kafkatier.storage.errors import InvalidRecordError, LogWriteError, RecordTooLargeError
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.reader import IsolationLevel
from kafkatier.storage.partitioner import murmur2
from kafkatier.storage.record.records import iter_batches
from kafkatier.storage.verify.paths import verify_paths
from kafkatier.storage.wire import Codec

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
ROWS = 3000


def by_partition(log_dir: Path, topic: str, mixed: bool = True) -> dict[int, list[tuple[Any, ...]]]:
    """Each partition's committed records as (key, value, headers, timestamp), in offset order;
    the timestamp only where ``mixed_rows`` gave one (else it is the sink's write time)."""
    out: dict[int, list[tuple[Any, ...]]] = {}
    with LogDirectory(log_dir) as logs:
        for log in logs:
            if log.topic != topic:
                continue
            table = read_topic_log(log)
            cols = [table.column(c).to_pylist() for c in ("key", "value", "headers", "timestamp")]
            out[log.partition] = [
                (k, v, h, t if not mixed or int(v[1:]) % 2 == 0 else None)
                for k, v, h, t in zip(*cols, strict=True)
            ]
    return out


def read_topic_log(log: Any) -> pa.Table:
    from kafkatier.storage.arrow.log import read_arrow

    return read_arrow(log, isolation=IsolationLevel.READ_COMMITTED)


@pytest.mark.parametrize(("codec", "partitions"),
                         [*((codec, 4) for codec in CODECS), ("lz4", 64), ("none", 97)])
def test_jvm_and_python_encoders_write_the_same_records(
    spark: Any, tmp_path: Path, codec: str, partitions: int
) -> None:
    """Both encoders put the same keyed and explicit rows in each partition, in the input's
    order; over 16 partitions too, where the JVM encoder's open batches give their buffers
    back as they close."""
    df = mixed_rows(spark, ROWS).cache()
    written = {}
    for encoder in ("jvm", "python"):
        log_dir = tmp_path / encoder
        KafkaLogSink(log_dir, topic="t", partitions=partitions, compression=codec,
                     encoder=encoder)(df, 0)  # fmt: skip
        assert verify_paths([log_dir]) == []
        written[encoder] = by_partition(log_dir, "t")
    df.unpersist()
    # explicit and keyed rows land alike; keyless ones are spread (round robin per task)
    assert sum(len(v) for v in written["jvm"].values()) == ROWS
    assert len(written["jvm"]) == partitions
    for p in range(partitions):
        jvm_rows, py_rows = written["jvm"][p], written["python"][p]
        assert [r for r in jvm_rows if r[0] is not None] == [r for r in py_rows if r[0] is not None]
    every = sorted((r for rows in written["jvm"].values() for r in rows), key=repr)
    assert every == sorted((r for rows in written["python"].values() for r in rows), key=repr)


def test_a_file_source_is_encoded_from_its_column_batches(spark: Any, tmp_path: Path) -> None:
    """A DataFrame read from Parquet (a columnar scan Spark turns into rows) is encoded from the
    scan's column batches instead: the same records as the Python encoder writes, nested
    headers, explicit partitions, timestamps and nulls included. So is a selection of its
    columns in another order (without a ``topic`` column, which would name the topics). A plan
    that computes on the rows (a projection) keeps the row path."""
    rows = mixed_rows(spark, ROWS).selectExpr("'elsewhere' AS topic", "*")
    rows.write.parquet(str(tmp_path / "in"))
    df = spark.read.parquet(str(tmp_path / "in"))
    encoder = jvm.JvmEncoder.load(df).handle
    assert encoder.readsFrom(df._jdf) == "columns"
    assert encoder.readsFrom(df.withColumn("value", df.value.substr(1, 3))._jdf) == "plan"
    selected = df.select("timestamp", "value", "headers", "partition", "key")
    assert encoder.readsFrom(selected._jdf) == "columns"
    for kind, frame in (("whole", df), ("selected", selected)):
        written = {}
        for name in ("jvm", "python"):
            log_dir = tmp_path / kind / name
            sink = KafkaLogSink(log_dir, topic="t", partitions=4, compression="lz4", encoder=name)
            sink(frame, 0)
            assert verify_paths([log_dir]) == []
            written[name] = sorted(
                (r for rows in by_partition(log_dir, "t").values() for r in rows), key=repr
            )
        assert written["jvm"] == written["python"] and len(written["jvm"]) == ROWS, kind


@pytest.mark.parametrize("stream", ["as written", "more columns", "selected", "filtered"])
def test_a_streaming_micro_batch_is_encoded_from_what_its_plan_computes(
    spark: Any, tmp_path: Path, stream: str
) -> None:
    """``foreachBatch`` hands over a scan of the micro-batch's computed rows. Over a file
    source's columnar scan the encoder reads the scan's column batches (the micro-batch's own
    plan, found by its SQL execution), also where the sink keeps some of the micro-batch's
    columns (a ``topic`` column, which the sink's fixed topic drops, ahead of the others, so
    that they sit elsewhere in the batches) and where the stream selects the columns in another
    order before ``foreachBatch``; a plan that computes on the rows (a filter) is
    read from the RDD of its rows, not from the scan under it. Either way the records are the
    ones the Python encoder writes from the same micro-batch."""
    rows = mixed_rows(spark, ROWS)
    if stream == "more columns":
        rows = rows.selectExpr("'elsewhere' AS topic", "*")
    rows.write.parquet(str(tmp_path / "in"))
    schema = spark.read.parquet(str(tmp_path / "in")).schema
    kept = ["value", "key", "partition", "headers", "timestamp"]
    read_from: list[str] = []
    for name in ("jvm", "python"):
        sink = KafkaLogSink(tmp_path / name, topic="t", partitions=4, encoder=name)

        def each(df: Any, batch_id: int, sink: KafkaLogSink = sink) -> None:
            encoded = df.select(*kept) if stream == "more columns" else df  # as the sink keeps
            read_from.append(jvm.JvmEncoder.load(df).handle.readsFrom(encoded._jdf))
            sink(df, batch_id)

        frames = spark.readStream.schema(schema).parquet(str(tmp_path / "in"))
        if filtered := stream == "filtered":
            frames = frames.where("CAST(value AS STRING) NOT LIKE '%7'")
        if stream == "selected":
            frames = frames.select("timestamp", "value", "headers", "partition", "key")
        query = (frames.writeStream.foreachBatch(each).trigger(availableNow=True)
                 .option("checkpointLocation", str(tmp_path / f"chk-{name}")).start())  # fmt: skip
        assert query.awaitTermination(120) and query.exception() is None
    assert read_from == (["rdd", "rdd"] if filtered else ["micro-batch columns"] * 2)
    written = [sorted((r for rows in by_partition(tmp_path / name, "t").values() for r in rows),
                      key=repr) for name in ("jvm", "python")]  # fmt: skip
    assert written[0] == written[1]
    assert (len(written[0]) < ROWS) if filtered else (len(written[0]) == ROWS)


def test_a_kafkatier_stream_is_encoded_from_its_column_batches(spark: Any, tmp_path: Path) -> None:
    """A job that copies one kafkatier topic into another: a stream of the topic (the JVM
    reader's columnar scan), its key and value selected, is encoded from the reader's column
    batches, and the records are the ones the Python encoder writes from the same stream,
    keyless ones included."""
    register_data_source(spark)
    keys = [None if i % 7 == 0 else b"k%d" % i for i in range(ROWS)]
    values = [b"v%d" % i * (i % 5 + 1) for i in range(ROWS)]
    table = pa.table({"key": pa.array(keys, pa.binary()), "value": pa.array(values)})
    with LogDirectory(tmp_path / "src") as logs:
        for p in range(3):
            append_arrow(logs.get_or_create("in", p), table.slice(p * ROWS // 3, ROWS // 3))
    read_from: list[str] = []
    for name in ("jvm", "python"):
        sink = KafkaLogSink(tmp_path / name, topic="t", partitions=4, encoder=name)

        def each(df: Any, batch_id: int, sink: KafkaLogSink = sink) -> None:
            read_from.append(jvm.JvmEncoder.load(df).handle.readsFrom(df._jdf))
            sink(df, batch_id)

        stream = (spark.readStream.format("kafkatier").option("subscribe", "in")
                  .option("startingOffsets", "earliest").load(str(tmp_path / "src"))
                  .select("key", "value"))  # fmt: skip
        query = (stream.writeStream.foreachBatch(each).trigger(availableNow=True)
                 .option("checkpointLocation", str(tmp_path / f"chk-{name}")).start())  # fmt: skip
        assert query.awaitTermination(120) and query.exception() is None
    assert read_from == ["micro-batch columns"] * 2
    written = {}
    for name in ("jvm", "python"):
        with LogDirectory(tmp_path / name) as logs:
            tables = [read_topic_log(log) for log in logs if log.topic == "t"]
        written[name] = sorted(
            (repr(k), v) for t in tables for k, v in zip(t.column("key").to_pylist(),
                                                         t.column("value").to_pylist(), strict=True)
        )  # fmt: skip
    assert written["jvm"] == written["python"]
    assert written["jvm"] == sorted(zip(map(repr, keys), values, strict=True))


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_parses_every_jvm_batch(spark: Any, tmp_path: Path, codec: str) -> None:
    df = mixed_rows(spark, 500)
    KafkaLogSink(tmp_path, topic="t", partitions=4, compression=codec, encoder="jvm")(df, 0)
    values = []
    with snappy_for_kafka_python():  # kafka-python's snappy needs python-snappy: cramjam shim
        values = kafka_python_values(tmp_path, codec)
    assert sorted(values) == sorted(f"v{i}" for i in range(500))


def kafka_python_values(log_dir: Path, codec: str) -> list[str]:
    values = []
    for segment, position, raw_bytes in batches(log_dir):
        raw = DefaultRecordBatch(bytearray(raw_bytes))
        assert raw.validate_crc(), f"{segment} at {position}"
        if not raw.is_control_batch:
            assert raw.is_transactional and raw.compression_type == _codec_id(codec)
            values.extend(bytes(r.value).decode() for r in raw)
    return values


def batches(log_dir: Path) -> list[tuple[Path, int, bytes]]:
    """(segment, position, bytes) of every batch in every segment under ``log_dir``."""
    found = []
    for segment in sorted(log_dir.glob("*-*/*.log")):
        data = segment.read_bytes()
        position = 0
        for batch in iter_batches(data, file=str(segment)):
            found.append((segment, position, data[position : position + batch.size_in_bytes]))
            position += batch.size_in_bytes
    return found


def _codec_id(codec: str) -> int:
    return CODECS.index(codec) if codec != "none" else 0


def test_the_encoders_classes_stay_in_its_loader_when_the_drivers_loader_gets_the_jar(
    spark: Any,
) -> None:
    """The JVM reader adds the same jar to the driver's class loader (``sink/source/jvm.py``).
    When the encoder had a parent-first loader of its own under it, the encoder's classes not
    loaded yet came from the driver's loader once it held the jar, in another runtime package,
    and the encoder could not reach them (IllegalAccessError on its package-private classes,
    as in a session that wrote with the sink, read with the JVM reader, then wrote again);
    executors' tasks met the same split. The encoder's classes now all come from one loader."""
    sc = spark.sparkContext
    thread = sc._jvm.java.lang.Thread.currentThread()
    before = thread.getContextClassLoader()
    driver = sc._jvm.org.apache.spark.util.MutableURLClassLoader(
        sc._gateway.new_array(sc._jvm.java.net.URL, 0), before
    )
    thread.setContextClassLoader(driver)
    try:
        handle = jvm.JvmEncoder._load(sc).handle
        driver.addURL(sc._jvm.java.io.File(str(jar_path())).toURI().toURL())
        # called through reflection: py4j keeps the first copy's methods by class name
        types = sc._gateway.new_array(sc._jvm.java.lang.Class, 1)
        types[0] = sc._jvm.java.lang.Class.forName("[B")
        args = sc._gateway.new_array(sc._jvm.java.lang.Object, 1)
        args[0] = bytearray(b"k1")
        hashed = handle.getClass().getMethod("murmur2", types).invoke(handle, args)
        assert hashed == murmur2(b"k1")  # Murmur2 loaded only now, after the jar's addition
    finally:
        thread.setContextClassLoader(before)


def test_murmur2_and_placement_match_kafkas(spark: Any, tmp_path: Path) -> None:
    rng = random.Random(7)
    keys = [rng.randbytes(rng.randrange(0, 40)) for _ in range(300)]
    handle = jvm.JvmEncoder.load(spark.range(1)).handle
    assert [handle.murmur2(bytearray(k)) for k in keys] == [murmur2(k) for k in keys]
    rows = [(k, b"v") for k in keys]
    df = spark.createDataFrame(rows, "key binary, value binary")
    KafkaLogSink(tmp_path, topic="t", partitions=7, encoder="jvm")(df, 0)
    placed = {p: {r[0] for r in rs} for p, rs in by_partition(tmp_path, "t", False).items()}
    for key in keys:
        assert key in placed[(murmur2(key) & 0x7FFFFFFF) % 7]


def test_routing_string_columns_and_staging_off(spark: Any, tmp_path: Path) -> None:
    df = spark.range(200).selectExpr(
        "CONCAT('v', id) AS value",
        "CASE WHEN id % 4 = 0 THEN NULL ELSE CONCAT('k', id) END AS key",
        "CASE WHEN id % 3 = 0 THEN 'a' ELSE 'b' END AS topic",
        "CAST(id % 2 AS TINYINT) AS partition",
    )  # fmt: skip
    sink = KafkaLogSink(tmp_path, partitions=2, sink_id="r", staging=False, encoder="jvm")
    sink(df, 0)
    a = read_topic(tmp_path, "a")
    assert sorted(a.column("value").to_pylist()) == sorted(
        f"v{i}".encode() for i in range(200) if i % 3 == 0
    )
    assert all(p == int(v[1:]) % 2 for p, v in zip(
        a.column("partition").to_pylist(), (x.decode() for x in a.column("value").to_pylist()),
        strict=True))  # fmt: skip
    assert read_topic(tmp_path, "b").num_rows == 200 - a.num_rows
    assert verify_paths([tmp_path]) == []


def test_the_staged_hand_over_gives_the_pieces_the_dataframe_gives(
    spark: Any, tmp_path: Path
) -> None:
    """The staged job's pieces come back packed (``encode_staged``: no DataFrame planned, no
    Arrow collected) as the same rows the pieces' DataFrame gives (``encode``, collected as
    Arrow), each job into its own staging files: the same tasks, partitions, records, positions
    and lengths, and the same bytes there."""
    df = mixed_rows(spark, ROWS)
    rows = normalize(df, check_schema(df.schema, fixed_topic=True))
    encoder = jvm.JvmEncoder.load(rows)
    tables = {}
    for prefix in ("packed-", "arrow-"):
        plan = EncodePlan("t", {"t": TopicPlan(4, 1 << 20)}, None, Codec.LZ4, None, 7, 0,
                          1_700_000_000_000, str(tmp_path), prefix)  # fmt: skip
        tables[prefix] = (unpack_pieces(encoder.encode_staged(rows, plan, tmp_path / "pieces"))
                          if prefix == "packed-"
                          else encoder.encode(rows, plan).toArrow().drop(["data"]))  # fmt: skip
    fields = ["task", "topic", "partition", "records", "position", "length"]
    packed, arrow = (tables[p].sort_by([(f, "ascending") for f in fields]) for p in tables)
    assert packed.num_rows > 5 and packed.select(fields).equals(arrow.select(fields))
    assert not (tmp_path / "pieces").exists()  # read and removed
    for a, b in zip(packed.to_pylist(), arrow.to_pylist(), strict=True):
        assert "packed-" in a["path"] and "arrow-" in b["path"]
        spans = [Path(r["path"]).read_bytes()[r["position"] : r["position"] + r["length"]]
                 for r in (a, b)]  # fmt: skip
        assert spans[0] == spans[1]


def test_a_pieces_file_the_driver_cannot_write_is_one_clear_error(
    spark: Any, tmp_path: Path
) -> None:
    """Where the driver cannot write the packed pieces (here the file's directory is missing),
    the batch fails with the sink's LogWriteError naming the file, not a Java trace, and nothing
    is decided: the log is as it was and the staging files are gone."""
    sink = KafkaLogSink(tmp_path, topic="t", partitions=2, encoder="jvm")
    df = spark.range(0, 100, 1, 2).selectExpr("CAST(CONCAT('v', id) AS BINARY) AS value")
    sink(df, 0)
    real = StagingPlace.file
    blocked: list[Path] = []

    def file(self: StagingPlace, name: str) -> Path:
        path = real(self, name)
        if name == "pieces":
            path = path.parent / "no-such-dir" / path.name
            blocked.append(path)
        return path

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(StagingPlace, "file", file)
        with pytest.raises(LogWriteError, match=r"cannot write .*pieces") as caught:
            sink(df, 1)
    assert str(blocked[0]) in str(caught.value) and "\n" not in str(caught.value)
    assert read_topic(tmp_path, "t").num_rows == 100
    assert not [p for p in tmp_path.glob("*.wal.*") if p.is_file()], "staging files left behind"
    assert verify_paths([tmp_path]) == []


def test_a_small_open_budget_closes_batches_early_and_loses_nothing(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jvm, "OPEN_BUDGET_BYTES", 16 * 1024)
    df = spark.range(0, 20000, 1, 2).selectExpr(
        "CAST(CONCAT('k', id) AS BINARY) AS key", "CAST(repeat('x', 50) AS BINARY) AS value"
    )
    KafkaLogSink(tmp_path, topic="t", partitions=40, compression="lz4", encoder="jvm")(df, 0)
    assert sum(end_offsets(tmp_path).values()) >= 20000
    assert read_topic(tmp_path, "t").num_rows == 20000
    sizes = [len(raw) for _, _, raw in batches(tmp_path)]
    assert max(sizes) < 64 * 1024  # without the budget: one batch per partition and task
    assert verify_paths([tmp_path]) == []


@pytest.mark.parametrize(
    ("select", "error", "match"),
    [
        (["CAST(id AS STRING) AS value", "CAST(id AS INT) AS partition"], SinkSchemaError,
         r"column 'partition' row \d+: partition \d+ is outside \[0, 2\)"),
        (["CAST(id AS STRING) AS value", "CAST(-1 AS INT) AS partition"], SinkSchemaError,
         r"partition -1 is outside"),
        (["repeat('x', 2000) AS value"], RecordTooLargeError,
         r"record needs about \d+ bytes.*max\.message\.bytes and segment\.bytes"),
        (["'x' AS value", "timestamp_millis(-5) AS timestamp"], InvalidRecordError,
         r"invalid negative timestamp -5 in column 'timestamp'"),
        (["'x' AS value", "timestamp_millis(-1) AS timestamp"], InvalidRecordError,
         r"invalid negative timestamp -1 in column 'timestamp'"),  # an instant, not Kafka's -1
        (["'x' AS value", f"CAST(array(named_struct('key', NULL, 'value', NULL)) AS {HEADER_TYPE})"
          " AS headers"], InvalidRecordError, r"null header key in column 'headers'"),
    ],
)  # fmt: skip
def test_bad_rows_fail_before_anything_is_written(
    spark: Any, tmp_path: Path, select: list[str], error: type[Exception], match: str
) -> None:
    sink = KafkaLogSink(
        tmp_path, topic="t", partitions=2, encoder="jvm", config={"max.message.bytes": "1024"}
    )
    with pytest.raises(error, match=match):
        sink(spark.range(5).selectExpr(*select), 0)
    assert end_offsets(tmp_path) == {}  # not even the new topic's empty partitions
    sink(spark.range(3).selectExpr("'ok' AS value"), 0)  # the sink still works
    assert read_topic(tmp_path, "t").num_rows == 3


def test_unknown_or_null_topic_is_a_sink_error(spark: Any, tmp_path: Path) -> None:
    KafkaLogSink(tmp_path, topic="known", partitions=1)(
        spark.range(1).selectExpr("'x' AS value"), 0
    )
    sink = KafkaLogSink(tmp_path, sink_id="router", encoder="jvm")
    df = spark.range(2).selectExpr("'x' AS value", "'other' AS topic")
    with pytest.raises(SinkSchemaError, match=r"unknown topic 'other'.*partitions=N"):
        sink(df, 0)
    with pytest.raises(SinkSchemaError, match="column 'topic' is null"):
        sink(spark.range(2).selectExpr("'x' AS value", "CAST(NULL AS STRING) AS topic"), 0)


def test_without_a_jdk_auto_falls_back_and_jvm_says_why(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(jvm.CACHE_ENV, str(tmp_path / "cache"))  # nothing compiled there yet
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    monkeypatch.setattr(jvm, "_LOADED", [])
    with pytest.raises(JvmEncoderUnavailable, match=r"no javac .* encoder='python'"):
        jar_path()
    df = spark.range(10).selectExpr("CAST(id AS STRING) AS value")
    with pytest.raises(JvmEncoderUnavailable):
        EncoderChoice("jvm").for_frame(df)
    with caplog.at_level(logging.WARNING, logger="kafkatier.sink.jvm"):
        assert EncoderChoice("auto").for_frame(df) is None
    assert "encodes in Python workers" in caplog.text
    sink = KafkaLogSink(tmp_path / "logs", topic="t", partitions=2)  # auto: still writes
    sink(df, 0)
    assert read_topic(tmp_path / "logs", "t").num_rows == 10
    with pytest.raises(SinkSchemaError, match="encoder='fast'"):
        KafkaLogSink(tmp_path, topic="t", encoder="fast")


def test_without_a_jdk_each_user_of_the_jar_is_told_its_own_way_around(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The jar holds the sink's encoder and the source's reader: the message names both, and
    the fix is the caller's (a reader-only user is not told to configure a sink)."""
    monkeypatch.setenv(jvm.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    reader_fix = "register_data_source(spark, reader='python')"
    with pytest.raises(JvmEncoderUnavailable, match="the source's reader") as caught:
        jar_path(reader_fix)
    assert str(caught.value).endswith(reader_fix) and "KafkaLogSink" not in str(caught.value)


def test_the_jar_is_built_once_per_source_and_spark(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv(jvm.CACHE_ENV, str(tmp_path))
    first = jar_path()
    stamp = first.stat().st_mtime_ns
    assert jar_path() == first and first.stat().st_mtime_ns == stamp
    assert [p.name for p in first.parent.iterdir()] == [first.name]  # no scratch left behind


def test_an_unwritable_cache_is_a_clear_unavailability(tmp_path: Path, monkeypatch: Any) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv(jvm.CACHE_ENV, str(blocker))
    with pytest.raises(JvmEncoderUnavailable, match=r"KAFKATIER_CACHE_DIR at a writable"):
        jar_path()


@pytest.mark.parametrize(("codec", "partitions", "sort_buffer"),
                         [("none", 3, None), ("lz4", 3, None), ("lz4", 40, (4096, 7))])
def test_random_rows_split_into_batches_within_max_message_bytes(
    spark: Any, tmp_path: Path, codec: str, partitions: int, sort_buffer: tuple[int, int] | None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """Records of up to 1.5 KB in batches of at most 4 KiB; over 40 partitions the JVM
    encoder buffers each task's records (``SortBuffer.java``) and moves them into their batches
    every 7 records or 4 KiB and before a batch closes full: each partition's records as the
    Python encoder writes them, in the same order."""
    monkeypatch.setattr(jvm, "SORT_BUFFER", sort_buffer)
    rng = random.Random(11)
    rows = []
    for i in range(400):
        key = None if rng.random() < 0.2 else f"k{rng.randrange(30)}é"
        value = None if rng.random() < 0.05 else "v" * rng.randrange(0, 1500) + f"#{i}"
        headers = [("h", None if rng.random() < 0.3 else rng.randbytes(rng.randrange(5)))]
        rows.append((key, value, headers if rng.random() < 0.5 else None))
    schema = f"key string, value string, headers {HEADER_TYPE}"
    df = spark.createDataFrame(rows, schema).repartition(3).cache()
    config = {"max.message.bytes": "4096"}
    written = {}
    for encoder in ("jvm", "python"):
        log_dir = tmp_path / encoder
        sink = KafkaLogSink(log_dir, topic="t", partitions=partitions, compression=codec,
                            encoder=encoder, config=config)  # fmt: skip
        sink(df, 0)
        assert verify_paths([log_dir]) == []
        assert max(len(raw) for _, _, raw in batches(log_dir)) <= 4096
        written[encoder] = by_partition(log_dir, "t", mixed=False)
    df.unpersist()
    for p in range(partitions):
        keyed = [[r[:3] for r in written[e].get(p, []) if r[0] is not None]
                 for e in ("jvm", "python")]  # fmt: skip
        assert keyed[0] == keyed[1]
    everything = [
        sorted((r[:3] for rs in written[e].values() for r in rs), key=repr) for e in written
    ]
    assert everything[0] == everything[1] and len(everything[0]) == 400


def test_a_task_writing_topics_of_few_and_many_partitions_keeps_every_partitions_order(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows routed to a topic of 4 partitions (written straight into their open batches) and
    one of 40 (through ``SortBuffer.java``) in the same tasks, with a buffer of 5 records and
    an open budget of 8 KiB, so that batches close early, the largest first, while other
    partitions' records wait in the buffer: each partition holds the records the Python
    encoder puts there, in the same order."""
    monkeypatch.setattr(jvm, "SORT_BUFFER", (2048, 5))
    monkeypatch.setattr(jvm, "OPEN_BUDGET_BYTES", 8 * 1024)
    df = spark.range(0, 3000, 1, 2).selectExpr(
        "CAST(CONCAT('v', id) AS BINARY) AS value",
        "CAST(CONCAT('k', id % 97) AS BINARY) AS key",
        "CASE WHEN id % 3 = 0 THEN 'few' ELSE 'many' END AS topic",
    )  # fmt: skip
    written = {}
    for encoder in ("jvm", "python"):
        log_dir = tmp_path / encoder
        with LogDirectory(log_dir) as logs:
            for topic, count in (("few", 4), ("many", 40)):
                for partition in range(count):
                    logs.get_or_create(topic, partition)
        KafkaLogSink(log_dir, sink_id="s", compression="lz4", encoder=encoder)(df, 0)
        assert verify_paths([log_dir]) == []
        written[encoder] = {
            topic: {p: [r[:2] for r in rows] for p, rows in by_partition(log_dir, topic,
                                                                         mixed=False).items()}
            for topic in ("few", "many")
        }  # fmt: skip
    assert written["jvm"] == written["python"]
    assert sum(len(rows) for rows in written["jvm"]["many"].values()) == 2000
    assert len(written["jvm"]["many"]) == 40
