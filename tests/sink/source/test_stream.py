"""The kafkatier data source in streaming queries, reading logs while the storage engine (and the
sink) append to them in this process: exactly what becomes visible in read_committed is read,
once, across micro-batches, restarts on the same checkpoint and partitions that appear later."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from test_datasource import T0, Row, Written, append, end_txn, no_headers, rows_of

from kafkatier.sink.source.datasource import register_data_source
from kafkatier.sink.source.options import parse_options
from kafkatier.sink.source.stream import StreamOffsets
from kafkatier.storage.errors import CorruptRecordError, OffsetOutOfRangeError
from kafkatier.storage.log.dir_watch import DirectoryWatch
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.verify.paths import verify_paths

TIMEOUT_S = 240


@pytest.fixture(scope="module")
def spark_kt(spark: Any) -> Any:
    register_data_source(spark)
    return spark


class Collector:
    """A foreachBatch target that keeps every row and batch id it was given."""

    def __init__(self) -> None:
        self.rows: list[Row] = []
        self.batches: list[int] = []
        self._lock = threading.Lock()

    def __call__(self, df: Any, batch_id: int) -> None:
        rows = rows_of(df)
        with self._lock:
            self.rows.extend(rows)
            self.batches.append(batch_id)

    def sorted_rows(self) -> list[Row]:
        with self._lock:
            return sorted(self.rows)


def start(spark: Any, path: Path, checkpoint: Path, sink: Collector, trigger: dict[str, Any],
          **options: str) -> Any:  # fmt: skip
    reader = spark.readStream.format("kafkatier").option("path", str(path))
    for name, value in {"startingOffsets": "earliest", **options}.items():
        reader = reader.option(name, value)
    writer = reader.load().writeStream.foreachBatch(sink)
    return writer.option("checkpointLocation", str(checkpoint)).trigger(**trigger).start()


def run_available_now(spark: Any, path: Path, checkpoint: Path, **options: str) -> Collector:
    sink = Collector()
    query = start(spark, path, checkpoint, sink, {"availableNow": True}, **options)
    assert query.awaitTermination(TIMEOUT_S), "availableNow query did not finish"
    assert query.exception() is None
    return sink


def test_available_now_reads_each_visible_row_once(spark_kt: Any, tmp_path: Path) -> None:
    """Several micro-batches (maxOffsetsPerTrigger), then a restart on the same checkpoint that
    reads exactly what became visible in between: a commit of a transaction that was open and
    new appends; an open transaction's rows and an aborted one's never show."""
    w = Written(tmp_path / "logs")
    chk = tmp_path / "chk"
    with LogDirectory(w.path) as ld:
        s0, s1 = ld.get_or_create("s", 0), ld.get_or_create("s", 1)
        append(w, s0, 5, headers=True)
        append(w, s1, 3, pid=7, codec="lz4")
        end_txn(w, s1, 7, commit=True)
        append(w, s0, 2, pid=8)  # open across the first run
        append(w, s1, 4, codec="zstd")
        append(w, s1, 2, pid=9)
        end_txn(w, s1, 9, commit=False)
        first = run_available_now(spark_kt, w.path, chk, subscribe="s", maxOffsetsPerTrigger="8")
        seen = no_headers(w.visible())
        assert first.sorted_rows() == seen
        assert len(first.batches) >= 3  # 16 offsets below the LSOs, 8 per trigger
        end_txn(w, s0, 8, commit=True)
        append(w, s0, 3)
        append(w, s1, 1)
        second = run_available_now(spark_kt, w.path, chk, subscribe="s")
        new = sorted(set(no_headers(w.visible())) - set(seen))
        assert len(new) == 6 and second.sorted_rows() == new
        assert min(second.batches) > max(first.batches)
    assert verify_paths([w.path]) == []


def test_processing_time_query_follows_appends(spark_kt: Any, tmp_path: Path) -> None:
    """A running query picks up appends, holds back an open transaction (and what follows it in
    its partition) until its COMMIT, never shows aborted rows, and reads a partition created
    after it started from its beginning."""
    w = Written(tmp_path / "logs")
    sink = Collector()
    with LogDirectory(w.path) as ld:
        ld.topic_configs.update("live", {"segment.bytes": "600"}, source="test")  # rolls too
        p0 = ld.get_or_create("live", 0)
        append(w, p0, 4, codec="lz4")
        query = start(spark_kt, w.path, tmp_path / "chk", sink, {"processingTime": "1 second"},
                      subscribePattern="live", includeHeaders="true")  # fmt: skip
        try:
            query.processAllAvailable()
            assert sink.sorted_rows() == w.visible()
            append(w, p0, 3, pid=5)
            append(w, p0, 2)  # behind the open transaction: not stable yet
            append(w, p0, 2, pid=6)
            end_txn(w, p0, 6, commit=False)
            query.processAllAvailable()
            assert sink.sorted_rows() == w.visible() and len(w.visible()) == 4
            end_txn(w, p0, 5, commit=True)
            p1 = ld.get_or_create("live", 1)
            append(w, p1, 3, headers=True)
            query.processAllAvailable()
            assert sink.sorted_rows() == w.visible() and len(w.visible()) == 12
            assert len(p0.segments) > 1
        finally:
            query.stop()
    assert query.exception() is None


def test_sink_round_trip(spark_kt: Any, tmp_path: Path) -> None:
    """Rows written by KafkaLogSink in three micro-batches (one replayed) read back exactly once,
    with their keys, values, headers and timestamps, by a batch query and by a streaming query
    running while the sink appends; keyed rows share a partition."""
    sink_mod = pytest.importorskip("kafkatier.sink.sink", reason="the sink is not there yet")
    log_dir = tmp_path / "logs"
    sink = sink_mod.KafkaLogSink(log_dir, topic="rt", partitions=3, compression="lz4")
    schema = "key binary, value binary, headers array<struct<key:string,value:binary>>, " \
             "timestamp timestamp"  # fmt: skip
    inputs: list[tuple[Any, ...]] = []
    follower = Collector()
    query = None
    try:
        for batch in range(3):
            data = [(f"k{i % 5}".encode(), f"v{batch}-{i}".encode() * (i % 3 + 1),
                     [("n", str(i).encode())] if i % 2 else None,
                     pa.scalar(T0 + i, pa.timestamp("ms")).as_py()) for i in range(40)]  # fmt: skip
            inputs.extend(data)
            df = spark_kt.createDataFrame(data, schema)
            sink(df, batch)
            if batch == 0:
                sink(df, 0)  # Spark replays a batch after a failure: no second copy
                query = start(spark_kt, log_dir, tmp_path / "chk", follower,
                              {"processingTime": "1 second"}, subscribe="rt",
                              includeHeaders="true")  # fmt: skip
        assert query is not None
        query.processAllAvailable()
    finally:
        if query is not None:
            query.stop()
    df = (
        spark_kt.read.format("kafkatier").option("path", str(log_dir)).option("subscribe", "rt")
        .option("includeHeaders", "true").load()
    )  # fmt: skip
    rows = rows_of(df)
    got = sorted((r[3], r[4], r[7], r[5]) for r in rows)
    want = sorted((k, v, tuple(h or ()), T0 + i % 40) for i, (k, v, h, _) in enumerate(inputs))
    assert got == want
    assert follower.sorted_rows() == rows
    partitions_of_key: dict[bytes | None, set[int]] = {}
    for r in rows:
        partitions_of_key.setdefault(r[3], set()).add(r[1])
    assert all(len(p) == 1 for p in partitions_of_key.values())


def test_each_trigger_reads_only_the_batches_appended_since_the_last(tmp_path: Path) -> None:
    """A query's surveys keep the active segment's headers (``TailCache``): after the first, a
    trigger reads only what was appended since, so a header before it that no longer parses
    (corrupted on purpose) is not read again; a new query, walking from the start, fails on it.
    What was appended since is seen, whether committed or still open."""
    w = Written(tmp_path / "logs")
    with LogDirectory(w.path) as ld:
        log = ld.get_or_create("s", 0)
        for _ in range(20):
            append(w, log, 2)
        opts = parse_options({"path": str(w.path), "subscribe": "s", "startingOffsets": "earliest"},
                             streaming=True)  # fmt: skip
        offsets = StreamOffsets(opts)
        assert offsets.initial() == {"s": {"0": 0}}
        assert offsets.latest({"s": {"0": 0}}, None) == {"s": {"0": 40}}
        append(w, log, 3)
        append(w, log, 2, pid=4)  # open: the last stable offset stays at 43
        with open(log.active_segment.log_path, "r+b") as f:
            f.seek(8)
            f.write((1).to_bytes(4, "big"))  # the first batch's length: no batch has it
        assert offsets.latest({"s": {"0": 0}}, None) == {"s": {"0": 43}}
        end_txn(w, log, 4, commit=True)
        assert offsets.latest({"s": {"0": 0}}, 100) == {"s": {"0": 46}}
        with pytest.raises(CorruptRecordError, match="invalid batch header"):
            StreamOffsets(opts).initial()


def test_min_offsets_per_trigger_waits_for_enough_or_the_max_delay(tmp_path: Path) -> None:
    """Spark's ``minOffsetsPerTrigger`` (refused as an unknown option): the first trigger
    runs; later ones with fewer new offsets in all answer the start again (no batch) until
    there are enough or ``maxTriggerDelay`` has passed since the last batch; with
    ``maxOffsetsPerTrigger`` too, a batch is cut to it; Trigger.AvailableNow reads what
    there is."""
    import time

    w = Written(tmp_path / "logs")
    with LogDirectory(w.path) as ld:
        logs = [ld.get_or_create("s", p) for p in range(2)]
        append(w, logs[0], 4)
        opts = parse_options({"path": str(w.path), "subscribe": "s", "startingOffsets": "earliest",
                              "minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "12",
                              "maxTriggerDelay": "1s"}, streaming=True)  # fmt: skip
        assert (opts.min_offsets_per_trigger, opts.max_trigger_delay_ms) == (10, 1000)
        offsets = StreamOffsets(opts)
        start = offsets.initial()
        first = offsets.latest(start, 12)
        assert first == {"s": {"0": 4, "1": 0}}  # the first trigger runs, whatever it finds
        append(w, logs[0], 3)
        append(w, logs[1], 3)
        assert offsets.latest(first, 12) == first  # 6 new: too few, no batch
        append(w, logs[1], 9)
        enough = offsets.latest(first, 12)  # 15 new: a batch, cut to maxOffsetsPerTrigger
        assert 10 <= sum(enough["s"].values()) - sum(first["s"].values()) <= 12
        append(w, logs[0], 1)
        assert offsets.latest(enough, 12) == enough
        time.sleep(1.1)  # maxTriggerDelay passed: the few there are
        assert offsets.latest(enough, 12) == {"s": {"0": 8, "1": 12}}
        offsets.prepare_available_now()
        append(w, logs[0], 1)  # after the target: not read by AvailableNow
        assert offsets.latest({"s": {"0": 7, "1": 12}}, None) == {"s": {"0": 8, "1": 12}}
    for bad in ("soon", "5 weeks", "-1s"):
        with pytest.raises(Exception, match="maxTriggerDelay"):
            parse_options({"path": "/x", "subscribe": "s", "maxTriggerDelay": bad}, streaming=True)


@pytest.mark.skipif(DirectoryWatch.open() is None, reason="no inotify on this system")
def test_a_trigger_with_nothing_new_reads_no_partition(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A streaming query keeps each partition's bounds while its folder is unchanged (the
    kernel reports changes): a trigger with nothing new scans no partition, and one after an
    append scans that partition only and sees the records at once."""
    from kafkatier.sink.source import plan

    scanned: list[int] = []
    real = plan.scan_bounds
    monkeypatch.setattr(
        plan, "scan_bounds", lambda part, *a: scanned.append(part.partition) or real(part, *a)
    )
    w = Written(tmp_path / "logs")
    with LogDirectory(w.path) as ld:
        logs = [ld.get_or_create("s", p) for p in range(3)]
        for log in logs:
            append(w, log, 2)
        opts = parse_options({"path": str(w.path), "subscribe": "s", "startingOffsets": "earliest"},
                             streaming=True)  # fmt: skip
        offsets = StreamOffsets(opts)
        start = {"s": {"0": 0, "1": 0, "2": 0}}
        assert offsets.initial() == start
        assert sorted(scanned) == [0, 1, 2]
        scanned.clear()
        for _ in range(3):
            assert offsets.latest(start, None) == {"s": {"0": 2, "1": 2, "2": 2}}
        assert scanned == []
        append(w, logs[1], 3)
        assert offsets.latest(start, None) == {"s": {"0": 2, "1": 5, "2": 2}}
        assert scanned == [1]


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_a_partition_whose_offsets_went_back_is_data_loss(
    tmp_path: Path, fail_on_data_loss: bool
) -> None:
    """The topic deleted and created again under a running query (its offsets start over
    below the query's position): as Spark's Kafka source, an error naming the partition under
    failOnDataLoss (the default), else the query reads on from the partition's new end (the
    micro-batch over the change reads nothing of it). It went on silently, reading nothing of
    the new topic until its offsets passed the old position."""
    import shutil

    w = Written(tmp_path / "logs")
    with LogDirectory(w.path) as ld:
        append(w, ld.get_or_create("s", 0), 20)
    options = {"path": str(w.path), "subscribe": "s", "startingOffsets": "earliest",
               "failOnDataLoss": str(fail_on_data_loss).lower()}  # fmt: skip
    offsets = StreamOffsets(parse_options(options, streaming=True))
    assert offsets.latest({"s": {"0": 0}}, None) == {"s": {"0": 20}}
    shutil.rmtree(w.path / "s-0")
    with LogDirectory(w.path) as ld:
        append(w, ld.get_or_create("s", 0), 5)
    if fail_on_data_loss:
        with pytest.raises(OffsetOutOfRangeError, match="s-0: its offset was changed from 20 to 5"):
            offsets.latest({"s": {"0": 20}}, None)
        return
    assert offsets.latest({"s": {"0": 20}}, None) == {"s": {"0": 5}}
    assert offsets.plan({"s": {"0": 20}}, {"s": {"0": 5}}) == []
    with LogDirectory(w.path) as ld:
        append(w, ld.get_or_create("s", 0), 3)
    assert offsets.latest({"s": {"0": 5}}, None) == {"s": {"0": 8}}
    [(task,)] = offsets.plan({"s": {"0": 5}}, {"s": {"0": 8}})
    assert (task.start, task.end) == (5, 8)


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_a_batch_replayed_over_a_recreated_topic_is_data_loss(
    tmp_path: Path, fail_on_data_loss: bool
) -> None:
    """A restarted query replays its last planned batch (offsets 10 to 20) over a topic deleted
    and created again with 5 records: under failOnDataLoss an error naming the offsets, as
    Spark's tasks fail fetching them; else the records left. It committed the batch with none
    of them, silently."""
    import shutil

    w = Written(tmp_path / "logs")
    with LogDirectory(w.path) as ld:
        append(w, ld.get_or_create("s", 0), 20)
    shutil.rmtree(w.path / "s-0")
    with LogDirectory(w.path) as ld:
        append(w, ld.get_or_create("s", 0), 5)
    options = {"path": str(w.path), "subscribe": "s",
               "failOnDataLoss": str(fail_on_data_loss).lower()}  # fmt: skip
    restarted = StreamOffsets(parse_options(options, streaming=True))
    if fail_on_data_loss:
        with pytest.raises(OffsetOutOfRangeError, match="s-0: offsets 5 to 20 of this micro"):
            restarted.plan({"s": {"0": 10}}, {"s": {"0": 20}})
        return
    assert restarted.plan({"s": {"0": 10}}, {"s": {"0": 20}}) == []
    [(task,)] = StreamOffsets(parse_options(options, streaming=True)).plan(
        {"s": {"0": 2}}, {"s": {"0": 20}})  # fmt: skip
    assert (task.start, task.end) == (2, 5)


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_a_partition_gone_under_a_running_query_is_data_loss(
    tmp_path: Path, fail_on_data_loss: bool
) -> None:
    """A partition the query read deleted from the log dir (its topic deleted): as Spark's
    Kafka source, an error naming it under failOnDataLoss, else one warning and the query
    reads on with the partitions left (it went on without a word)."""
    import shutil

    w = Written(tmp_path / "logs")
    with LogDirectory(w.path) as ld:
        for p in range(2):
            append(w, ld.get_or_create("s", p), 4)
    options = {"path": str(w.path), "subscribe": "s", "startingOffsets": "earliest",
               "failOnDataLoss": str(fail_on_data_loss).lower()}  # fmt: skip
    offsets = StreamOffsets(parse_options(options, streaming=True))
    assert offsets.latest({"s": {"0": 0, "1": 0}}, None) == {"s": {"0": 4, "1": 4}}
    shutil.rmtree(w.path / "s-1")
    position = {"s": {"0": 4, "1": 4}}
    if fail_on_data_loss:
        with pytest.raises(OffsetOutOfRangeError, match="partitions s-1 are gone"):
            offsets.latest(position, None)
        return
    with LogDirectory(w.path) as ld:
        append(w, ld.get_or_create("s", 0), 2)
    assert offsets.latest(position, None) == {"s": {"0": 6, "1": 4}}
    assert [(t.partition, t.start, t.end) for (t,) in offsets.plan(position, {"s": {"0": 6}})] == [
        (0, 4, 6)
    ]
