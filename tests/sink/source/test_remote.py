"""The kafkatier data source over a tiered topic, with a ``file://`` remote and no Spark: the
planner and the executor code run in this process (each task pickled and unpickled, as Spark
ships it), so the join of remote and local segments is checked fast. Expected rows are what the
same reader returned from the full local log before the sidecar moved and deleted segments,
and what the writer wrote. tests/sink/source/test_remote_s3.py runs the same through Spark
against a real S3 server."""

from __future__ import annotations

import dataclasses
import itertools
import pickle
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record import MemoryRecords
from test_datasource import T0, Row, Written, append, end_txn, legacy_wrapper
from tier_fixtures import only

from kafkatier.sink.source.offsets import ending_offsets, starting_offsets
from kafkatier.sink.source.options import parse_options
from kafkatier.sink.source.plan import read_tasks, survey, topic_partitions
from kafkatier.sink.source.read import read_task
from kafkatier.sink.source.task import ReadTask
from kafkatier.storage.checkpoint.metadata import new_topic_id
from kafkatier.storage.errors import ConfigError, OffsetOutOfRangeError
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.readonly import ReadOnlyPartition
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record
from kafkatier.storage.verify.paths import verify_paths
from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.metadata.identity import RemotePartition
from kafkatier.tiering.metadata.manifest import RemoteFile, RemoteSegment, SegmentState, object_key
from kafkatier.tiering.metadata.manifest_store import ManifestStore
from kafkatier.tiering.sidecar.tierer import Tierer
from kafkatier.tiering.store.object_store import FsspecStore, ObjectStore

TIERED = {"remote.storage.enable": "true", "segment.bytes": "700",
          "index.interval.bytes": "200", "retention.ms": "-1", "retention.bytes": "-1"}  # fmt: skip
TOPICS = {
    "rt": {**TIERED, "local.retention.bytes": "1800"},  # a few segments stay local
    "ro": {**TIERED, "local.retention.ms": "0"},  # all but the active segment go
}


def write_topics(path: Path) -> Written:
    """rt-0, rt-1, ro-0, ro-1: plain batches with and without headers in four codecs, a
    committed and an aborted transaction every few batches, some aborts written after a roll
    (the ``.txnindex`` entry in a later segment than the data) and, in rt-0, a transaction left
    open at the end (the LSO stops there, so the segments holding it stay local)."""
    w = Written(path)
    codecs = itertools.cycle(["none", "lz4", "zstd", "gzip", "snappy"])
    with LogDirectory(path) as ld:
        for topic, config in TOPICS.items():
            ld.topic_configs.update(topic, config, source="test")
        for topic, partition in (("rt", 0), ("rt", 1), ("ro", 0), ("ro", 1)):
            log = ld.get_or_create(topic, partition)
            for step in range(18 + 4 * partition):
                append(w, log, 4, codec=next(codecs), headers=step % 2 == 0)
                if step % 3 == 2:
                    pid = 100 * partition + step
                    append(w, log, 3, pid=pid, codec=next(codecs), headers=True)
                    if step % 6 == 5:
                        log.roll()
                    end_txn(w, log, pid, commit=step % 6 != 5)
            if (topic, partition) == ("rt", 0):
                append(w, log, 2, pid=999)
                append(w, log, 3)
    assert verify_paths([path]) == []
    return w


def tier(logs: Path, store: ObjectStore) -> None:
    """One sidecar pass: upload the closed segments, then apply local retention."""
    config = TieringConfig(log_dirs=(logs,), remote_url=store.url)
    result = Tierer(config, store).run_once()
    assert result.failures == 0, [p.error for p in result.partitions]
    assert result.total("local_segments_deleted") >= 8
    for topic, partition in (("rt", 0), ("rt", 1)):
        with ReadOnlyPartition(logs, topic, partition) as part:
            assert part.bases[0] > 0 and len(part.bases) > 1  # remote below, local above
    for partition in (0, 1):
        with ReadOnlyPartition(logs, "ro", partition) as part:
            assert len(part.bases) == 1 and part.bases[0] > 0  # only the active is local


def rows_of_table(table: pa.Table) -> list[Row]:
    out: list[Row] = []
    at = table.schema.get_field_index("timestamp")
    table = table.set_column(at, "timestamp", table.column(at).cast(pa.int64()))
    for r in table.to_pylist():
        headers = tuple((h["key"], h["value"]) for h in r.get("headers") or ())
        out.append((r["topic"], r["partition"], r["offset"], r["key"], r["value"],
                    r["timestamp"] // 1000, r["timestampType"], headers))  # fmt: skip
    return sorted(out)


def plan(path: Path, **options: str) -> list[ReadTask]:
    """The tasks the data source plans for a batch query (the driver's part)."""
    opts = parse_options({"path": str(path), "includeHeaders": "true", **options},
                         streaming=False)  # fmt: skip
    bounds = survey(opts, topic_partitions(opts))
    return read_tasks(opts, starting_offsets(opts, bounds), ending_offsets(opts, bounds), bounds)


def execute(tasks: list[ReadTask]) -> list[Row]:
    """The executors' part: each task pickled and unpickled, as Spark ships it."""
    batches = [b for t in tasks for b in read_task(pickle.loads(pickle.dumps(t)))]
    return rows_of_table(pa.Table.from_batches(batches)) if batches else []


def read(path: Path, **options: str) -> list[Row]:
    return execute(plan(path, **options))


class Tiered:
    def __init__(self, root: Path) -> None:
        self.logs = root / "logs"
        self.written = write_topics(self.logs)
        self.before = {c: read(self.logs, subscribe="rt,ro", isolationLevel=c)
                       for c in ("read_committed", "read_uncommitted")}  # fmt: skip
        with ReadOnlyPartition(self.logs, "rt", 0) as part:
            self.stamps = {o: part.offset_for_timestamp(o) for o in self._probe_times()}
        (root / "remote").mkdir()
        self.store = FsspecStore(f"file://{root / 'remote'}")
        remote = {"remote.storage.url": self.store.url}
        self.early = plan(self.logs, subscribe="rt,ro", **remote)
        # read_uncommitted: no .txnindex lookups, so the later segments are not open yet
        self.reading = read_task(plan(self.logs, assign='{"rt":[1]}', readChunkBytes="100",
                                      isolationLevel="read_uncommitted", **remote)[0])  # fmt: skip
        self.first = next(self.reading)  # from the first local segment
        tier(self.logs, self.store)
        self.remote = {"remote.storage.url": self.store.url}

    def _probe_times(self) -> list[int]:
        stamps = sorted(r[5] for r, _ in self.written.rows if r[:2] == ("rt", 0))
        return [stamps[0] - 1, stamps[7] + 1, stamps[len(stamps) // 3], stamps[-1] + 1]

    def remote_segments(self, topic: str, partition: int) -> list[tuple[int, int]]:
        manifest, _ = ManifestStore(self.store).load(only(self.store, topic, partition))
        return [(s.base_offset, s.end_offset) for s in manifest.contiguous()]


@pytest.fixture(scope="module")
def tiered(tmp_path_factory: pytest.TempPathFactory) -> Tiered:
    return Tiered(tmp_path_factory.mktemp("remote-file"))


def test_sample_is_what_was_written(tiered: Tiered) -> None:
    assert tiered.before["read_committed"] == tiered.written.visible(committed=True)
    assert tiered.before["read_uncommitted"] == tiered.written.visible(committed=False)


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_joined_read_equals_the_full_log(tiered: Tiered, isolation: str) -> None:
    got = read(tiered.logs, subscribe="rt,ro", isolationLevel=isolation, **tiered.remote)
    assert got == tiered.before[isolation]
    local_only = read(tiered.logs, subscribe="rt,ro", isolationLevel=isolation)
    assert len(local_only) < len(got) // 2  # most of it is remote only now


def test_tasks_planned_before_the_local_deletes_read_remotely(tiered: Tiered) -> None:
    """The join point is the local log start when a task runs, not when it was planned."""
    assert all(t.store is not None for t in tiered.early)
    assert execute(tiered.early) == tiered.before["read_committed"]


def test_a_read_losing_its_local_segments_goes_on_remotely(tiered: Tiered) -> None:
    """The sidecar deleted the segments after the task had started reading them."""
    table = pa.Table.from_batches([tiered.first, *tiered.reading])
    expected = [r for r in tiered.before["read_uncommitted"] if r[:2] == ("rt", 1)]
    assert rows_of_table(table) == expected


def test_small_chunks_and_pattern_read_the_same(tiered: Tiered) -> None:
    got = read(tiered.logs, subscribePattern="r.", readChunkBytes="100", **tiered.remote)
    assert got == tiered.before["read_committed"]


def test_offsets_landing_in_remote_segments(tiered: Tiered) -> None:
    segs = tiered.remote_segments("rt", 0)
    start, end = segs[1][0] + 2, segs[3][0] + 1  # inside remote segments
    later = tiered.remote_segments("rt", 1)[2][0] + 1  # from a remote segment into local
    got = read(tiered.logs, subscribe="rt",
               startingOffsets=f'{{"rt":{{"0":{start},"1":{later}}}}}',
               endingOffsets=f'{{"rt":{{"0":{end},"1":-1}}}}', **tiered.remote)  # fmt: skip
    bounds = {0: (start, end), 1: (later, 2**62)}
    expected = [r for r in tiered.before["read_committed"]
                if r[0] == "rt" and bounds[r[1]][0] <= r[2] < bounds[r[1]][1]]  # fmt: skip
    assert got == expected and {r[1] for r in got} == {0, 1}


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(data=st.data())
def test_any_offset_range_reads_as_the_full_log(tiered: Tiered, data: st.DataObject) -> None:
    rows = [r for r in tiered.before["read_uncommitted"] if r[:2] == ("rt", 1)]
    last = rows[-1][2] + 1
    start = data.draw(st.integers(0, last), label="start")
    end = data.draw(st.integers(start, last), label="end")
    chunk = data.draw(st.sampled_from(["60", "300", "1000000"]), label="readChunkBytes")
    committed = data.draw(st.booleans(), label="read_committed")
    isolation = "read_committed" if committed else "read_uncommitted"
    got = read(tiered.logs, assign='{"rt":[1]}', isolationLevel=isolation, readChunkBytes=chunk,
               startingOffsets=f'{{"rt":{{"1":{start}}}}}',
               endingOffsets=f'{{"rt":{{"1":{end}}}}}', **tiered.remote)  # fmt: skip
    expected = [r for r in tiered.before[isolation]
                if r[:2] == ("rt", 1) and start <= r[2] < end]  # fmt: skip
    assert got == expected


class CountingStore(FsspecStore):
    """Counts the bytes fetched from segment ``log`` objects."""

    log_bytes = 0

    def get_bytes(self, key: str, start: int = 0, end: int | None = None) -> bytes:
        data = super().get_bytes(key, start, end)
        if key.endswith("/log"):
            CountingStore.log_bytes += len(data)
        return data


def test_a_few_offsets_of_a_remote_segment_take_ranged_gets(tiered: Tiered) -> None:
    base, last = max(tiered.remote_segments("rt", 0)[:3], key=lambda s: s[1] - s[0])
    options = {"assign": '{"rt":[0]}',
               "startingOffsets": f'{{"rt":{{"0":{last - 1}}}}}',
               "endingOffsets": f'{{"rt":{{"0":{last + 1}}}}}', **tiered.remote}  # fmt: skip
    counting = CountingStore(tiered.store.url)
    CountingStore.log_bytes = 0
    tables = [pa.Table.from_batches(list(read_task(dataclasses.replace(t, store=counting))))
              for t in plan(tiered.logs, **options)]  # fmt: skip
    got = rows_of_table(pa.concat_tables(tables))
    assert got == [r for r in tiered.before["read_committed"]
                   if r[:2] == ("rt", 0) and last - 1 <= r[2] <= last]  # fmt: skip
    manifest, _ = ManifestStore(tiered.store).load(only(tiered.store, "rt", 0))
    size = next(s.files["log"].size for s in manifest.contiguous() if s.base_offset == base)
    assert 0 < CountingStore.log_bytes < size  # from the offset index's position on


def test_timestamps_landing_in_remote_segments(tiered: Tiered) -> None:
    for ts, offset in tiered.stamps.items():
        got = read(tiered.logs, assign='{"rt":[0]}', startingTimestamp=str(ts),
                   startingOffsetsByTimestampStrategy="latest", **tiered.remote)  # fmt: skip
        expected = [r for r in tiered.before["read_committed"]
                    if r[:2] == ("rt", 0) and offset is not None and r[2] >= offset]  # fmt: skip
        assert got == expected, ts
    ts = sorted(tiered.stamps)
    got = read(tiered.logs, assign='{"rt":[0]}', startingTimestamp=str(ts[1]),
               endingTimestamp=str(ts[2]), **tiered.remote)  # fmt: skip
    first, last = tiered.stamps[ts[1]], tiered.stamps[ts[2]]
    assert first is not None and last is not None and last < tiered.remote_segments("rt", 0)[-1][1]
    expected = [r for r in tiered.before["read_committed"]
                if r[:2] == ("rt", 0) and first <= r[2] < last]  # fmt: skip
    assert got == expected and got


def test_partition_only_in_the_remote_store(tiered: Tiered, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    shutil.copytree(tiered.logs, logs)
    shutil.rmtree(logs / "ro-1")
    remote_end = tiered.remote_segments("ro", 1)[-1][1] + 1
    got = read(logs, subscribe="ro", **tiered.remote)
    expected = [r for r in tiered.before["read_committed"]
                if r[0] == "ro" and (r[1] == 0 or r[2] < remote_end)]  # fmt: skip
    assert got == expected and any(r[1] == 1 for r in got)
    local = parse_options({"path": str(logs), "subscribe": "ro"}, streaming=False)
    assert topic_partitions(local) == [("ro", 0)]  # without the remote options: not there


def test_remote_log_start_and_fail_on_data_loss(tiered: Tiered, tmp_path: Path) -> None:
    remote = tmp_path / "remote"
    shutil.copytree(tiered.store.url.removeprefix("file://"), remote)
    store = FsspecStore(f"file://{remote}")
    moved = tiered.remote_segments("rt", 1)[1][0] + 1

    def move(manifest) -> bool:  # what remote retention does
        manifest.log_start_offset = moved
        return True

    ManifestStore(store).update(only(store, "rt", 1), move)
    options = {"remote.storage.url": store.url, "assign": '{"rt":[1]}'}
    expected = [r for r in tiered.before["read_committed"] if r[:2] == ("rt", 1) and r[2] >= moved]
    assert read(tiered.logs, **options) == expected  # earliest: the manifest's log start
    below = {**options, "startingOffsets": '{"rt":{"1":3}}'}
    with pytest.raises(OffsetOutOfRangeError, match="failOnDataLoss"):
        read(tiered.logs, **below)
    assert read(tiered.logs, **below, failOnDataLoss="false") == expected
    with ReadOnlyPartition(tiered.logs, "rt", 1) as part:
        moved = part.log_start_offset + 2  # past the local log start too: Kafka's log start
    ManifestStore(store).update(only(store, "rt", 1), move)
    expected = [r for r in tiered.before["read_committed"] if r[:2] == ("rt", 1) and r[2] >= moved]
    assert read(tiered.logs, **options) == expected


def test_remote_options_errors_name_the_option(tiered: Tiered, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"'remote\.storage\.url'.*not a directory"):
        read(tiered.logs, subscribe="rt", **{"remote.storage.url": f"file://{tmp_path}/none"})
    with pytest.raises(ConfigError, match=r"'remote\.storage\.url'"):
        read(tiered.logs, subscribe="rt", **{"remote.storage.url": "nosuchproto://x/y"})
    with pytest.raises(ConfigError, match=r"'kafkatier\.config'"):
        read(tiered.logs, subscribe="rt", **{"kafkatier.config": str(tmp_path / "missing")})
    with pytest.raises(ConfigError, match=r"'remote\.storage\.url'.*required"):
        parse_options({"path": "x", "subscribe": "t", "remote.storage.s3.region": "r"},
                      streaming=False)  # fmt: skip
    embedded = tmp_path / "kafkatier.properties"  # as conf/kafkatier.properties: the reader
    embedded.write_text(f"log.dirs={tiered.logs}\nremote.storage.url=s3://kafkatier/run\n"
                        "remote.storage.embedded=true\n")  # went to AWS's own S3 for it
    with pytest.raises(ConfigError, match=r"'kafkatier\.config'.*embedded=true.*endpoint\.url"):
        parse_options({"kafkatier.config": str(embedded), "subscribe": "rt"}, streaming=False)


def test_sidecar_config_file(tiered: Tiered, tmp_path: Path) -> None:
    config = tmp_path / "sidecar.properties"
    config.write_text(f"log.dirs={tiered.logs}\nremote.storage.url={tiered.store.url}\n")
    opts = parse_options({"kafkatier.config": str(config), "subscribe": "rt"}, streaming=False)
    assert opts.path == str(tiered.logs) and opts.remote is not None
    got = read(tiered.logs, subscribe="rt,ro", **{"kafkatier.config": str(config)})
    assert got == tiered.before["read_committed"]


@pytest.mark.parametrize("chunk", ["10", "1000000"])
def test_legacy_and_v2_batches_in_a_remote_segment(tmp_path: Path, chunk: str) -> None:
    """A remote segment from before Kafka 0.11 (magic 0/1 gzip wrappers) followed by v2 batches,
    as an upgraded topic has: read as kafka-python reads the same bytes."""
    data = b"".join([
        legacy_wrapper(0, 5, 1), legacy_wrapper(5, 5, 0),
        build_batch([Record(10 + i, T0 + 10 + i, b"k%d" % i, b"v" * i) for i in range(5)]),
        legacy_wrapper(15, 5, 1),
    ])  # fmt: skip
    (tmp_path / "remote").mkdir()
    store = FsspecStore(f"file://{tmp_path / 'remote'}")
    seg = RemoteSegment(0, 19, T0 + 19, len(data), SegmentState.COPY_SEGMENT_FINISHED, "a1",
                        files={"log": RemoteFile(len(data), "")})  # fmt: skip
    rp = RemotePartition.of("old", 0, new_topic_id())
    store.put_bytes(object_key(rp, seg, "log"), data)
    ManifestStore(store).update(rp, lambda m: m.segments.append(seg) is None)
    memory, theirs = MemoryRecords(data), []
    while memory.has_next():
        theirs += [(r.offset, r.key, r.value, -1 if r.timestamp is None else r.timestamp)
                   for r in memory.next_batch()]  # fmt: skip
    got = read(tmp_path / "no-local-logs", assign='{"old":[0]}', readChunkBytes=chunk,
               startingOffsets='{"old":{"0":3}}', endingOffsets='{"old":{"0":17}}',
               isolationLevel="read_uncommitted", **{"remote.storage.url": store.url})  # fmt: skip
    assert [(r[2], r[3], r[4], r[5]) for r in got] == [t for t in theirs if 3 <= t[0] < 17]
