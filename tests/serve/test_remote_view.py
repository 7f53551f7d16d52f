"""A tiered topic over ``kafkatier serve`` with a remote store configured: the segments local
retention deleted are served from the remote copy, so kafka-python and confluent-kafka replay
the topics from offset 0 and see exactly what the segment files held before tiering;
read_committed skips the aborted transactions of remote segments too."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from serve_clients import JAVA_MISSING, confluent_rows, java_rows, kafka_python_rows
from serve_server import scrape, server_thread, serving
from test_datasource import kafka_python_rows as disk_rows
from test_remote import tier, write_topics

from kafkatier.storage.log.readonly import ReadOnlyPartition
from kafkatier.tiering.store.object_store import FsspecStore, ObjectStore

TOPICS = {"rt": 2, "ro": 2}


JAVA = pytest.param(java_rows, marks=pytest.mark.skipif(JAVA_MISSING is not None,
                                                     reason=JAVA_MISSING or ""))  # fmt: skip


@pytest.mark.parametrize("consume", [kafka_python_rows, confluent_rows, JAVA])
def test_a_tiered_topic_replays_from_the_remote_start(tmp_path: Path, consume: Any) -> None:
    from kafka import KafkaConsumer, TopicPartition

    logs = tmp_path / "logs"
    written = write_topics(logs)
    before = disk_rows(logs, "rt|ro")
    (tmp_path / "remote").mkdir()
    store = FsspecStore(f"file://{tmp_path / 'remote'}")
    tier(logs, store)
    with ReadOnlyPartition(logs, "ro", 0) as part:
        assert part.bases[0] > 0  # offset 0 is only remote now
    assert disk_rows(logs, "rt|ro") != before
    with server_thread(logs, remote__storage__url=store.url, serve__metrics__port="0") as server:
        port = server.server.bound["PLAINTEXT"]
        assert consume(port, TOPICS, False) == before
        metrics = scrape(server.server.metrics_port or 0)
        assert metrics['kafkatier_serve_bytes_total{tier="remote"}'] > 0  # offset 0 of "ro"
        assert metrics['kafkatier_serve_bytes_total{tier="local"}'] > 0
        assert metrics['kafkatier_serve_remote_cache_total{result="load"}'] >= 1
        assert metrics['kafkatier_serve_remote_chunks_total{result="get"}'] >= 1  # chunk_cache.py
        assert metrics['kafkatier_serve_remote_chunks_total{result="read_ahead"}'] >= 1
        assert consume(port, TOPICS, True) == written.visible(committed=True)
        c = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", group_id=None)
        try:
            tps = [TopicPartition(t, p) for t in TOPICS for p in range(2)]
            assert c.beginning_offsets(tps) == dict.fromkeys(tps, 0)
        finally:
            c.close()
        assert tiered_bounds(port, logs) == {  # ListOffsets v8/v9 (KIP-405, KIP-1005)
            p: (base, base - 1) for p, base in local_starts(logs, "ro").items()
        }


def local_starts(logs: Path, topic: str) -> dict[int, int]:
    """Each partition's first local offset (every closed segment of "ro" was uploaded, then
    deleted locally: only the active one is left)."""
    found = {}
    for p in range(TOPICS[topic]):
        with ReadOnlyPartition(logs, topic, p) as part:
            found[p] = part.bases[0]
    return found


def tiered_bounds(port: int, logs: Path) -> dict[int, tuple[int, int]]:
    """(earliest-local, latest-tiered) of each partition of "ro", through kafka-python's admin
    client."""
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient, OffsetSpec

    admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}")
    try:
        tps = [TopicPartition("ro", p) for p in range(TOPICS["ro"])]
        local = admin.list_partition_offsets(dict.fromkeys(tps, OffsetSpec.EARLIEST_LOCAL))
        tiered = admin.list_partition_offsets(dict.fromkeys(tps, OffsetSpec.LATEST_TIERED))
    finally:
        admin.close()
    return {tp.partition: (local[tp].offset, tiered[tp].offset) for tp in tps}


@pytest.mark.parametrize("copy", [True, False], ids=["manifest copy", "no copy"])
def test_an_unreadable_store_leaves_the_local_segments_served(
    tmp_path: Path, serve: Any, caplog: pytest.LogCaptureFixture, copy: bool
) -> None:
    """A remote store that cannot be read (no credentials, an endpoint refusing connections):
    one warning per partition, and the local segments are served. Where the sidecar left its
    copy of the manifest in the partition directory, the log start stays the remote one and a
    fetch of an offset only the store holds gets KAFKA_STORAGE_ERROR, which clients retry (the
    log start was the local one and such a fetch out of range: consumers resetting to earliest
    skipped the remote records for good); without a copy, the local log start."""
    import logging

    from kafka import KafkaConsumer, TopicPartition
    from serve_clients import fetch_one, raw_socket

    from kafkatier.tiering.metadata.manifest_copy import COPY_NAME

    caplog.set_level(logging.WARNING, logger="kafkatier.serve")
    logs = tmp_path / "logs"
    write_topics(logs)
    (tmp_path / "remote").mkdir()
    tier(logs, FsspecStore(f"file://{tmp_path / 'remote'}"))
    assert (logs / "rt-0" / COPY_NAME).exists()  # the sidecar's
    if not copy:
        (logs / "rt-0" / COPY_NAME).unlink()
    local = [r for r in disk_rows(logs, "rt") if r[1] == 0]
    with serve(logs, remote__storage__url="s3://nowhere/x",
               remote__storage__s3__endpoint__url="http://127.0.0.1:9",
               remote__storage__s3__max__attempts="1") as port:  # fmt: skip
        c = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", group_id=None)
        try:
            tp = TopicPartition("rt", 0)
            assert c.beginning_offsets([tp]) == {tp: 0 if copy else local[0][2]}
        finally:
            c.close()
        with raw_socket(port) as sock:
            error = fetch_one(sock, "rt", 0).error_code
        assert error == (56 if copy else 1)  # KAFKA_STORAGE_ERROR, else OFFSET_OUT_OF_RANGE
        c = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", group_id=None)
        try:  # what is local is read as ever
            c.assign([tp])
            c.seek(tp, local[0][2])
            got: list[int] = []
            deadline = time.monotonic() + 30
            while len(got) < len(local) and time.monotonic() < deadline:
                got += [r.offset for r in c.poll(timeout_ms=500).get(tp, [])]
        finally:
            c.close()
        assert got == [r[2] for r in local]
    warnings = [r for r in caplog.records if "unreadable for rt-0" in r.getMessage()]
    assert 1 <= len(warnings) <= 2, caplog.text


@pytest.mark.parametrize(("consume", "backend"), [(kafka_python_rows, "file"),
                                                   (confluent_rows, "file"),
                                                   (confluent_rows, "s3"),
                                                   pytest.param(*JAVA.values, "s3",
                                                                marks=JAVA.marks)])
def test_a_topic_only_the_remote_store_holds_is_served(
    tmp_path: Path, consume: Any, backend: str, request: pytest.FixtureRequest
) -> None:
    """The log dir that wrote the topics is gone (another machine, a wiped disk): a server over
    an empty log dir and the same store (a directory, or SeaweedFS over S3) lists them under
    their own topic ids and replays every remote segment, read_committed included (a
    transaction whose marker never reached the store stays undecided there), and writes nothing
    into the log dir it serves."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaConsumer, TopicPartition

    from kafkatier.storage.checkpoint.metadata import uuid_from_str
    from kafkatier.tiering.metadata.identity import topic_id_of
    from kafkatier.tiering.metadata.manifest_store import ManifestStore

    logs = tmp_path / "logs"
    written = write_topics(logs)
    before = disk_rows(logs, "rt|ro")
    store: ObjectStore
    settings = {}
    if backend == "s3":
        store = request.getfixturevalue("s3_store")
        endpoint = request.getfixturevalue("s3_env").endpoint
        settings = {"remote__storage__s3__endpoint__url": endpoint,
                    "remote__storage__s3__region": "us-east-1"}  # fmt: skip
    else:
        (tmp_path / "remote").mkdir()
        store = FsspecStore(f"file://{tmp_path / 'remote'}")
    tier(logs, store)
    ids = {t: topic_id_of(logs / f"{t}-0") for t in TOPICS}
    manifests = ManifestStore(store)
    ends = {(t, p): manifests.find(t, p, ids[t])[1].highest_offset + 1
            for t, n in TOPICS.items() for p in range(n)}  # fmt: skip
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with serving(elsewhere, remote__storage__url=store.url, **settings) as port:
        assert consume(port, TOPICS, False) == [r for r in before if r[2] < ends[r[0], r[1]]]
        assert consume(port, TOPICS, True) == [
            r for r in written.visible(committed=True) if r[2] < ends[r[0], r[1]]
        ]
        c = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", group_id=None)
        try:
            tps = [TopicPartition(t, p) for t, p in ends]
            assert c.beginning_offsets(tps) == dict.fromkeys(tps, 0)
            assert c.end_offsets(tps) == {tp: ends[tp.topic, tp.partition] for tp in tps}
        finally:
            c.close()
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        described = admin.describe_topics(TopicCollection(list(TOPICS)))
        for topic, future in described.items():
            found = future.result(timeout=10).topic_id
            msb, lsb = found.get_most_significant_bits(), found.get_least_significant_bits()
            as_bytes = msb.to_bytes(8, "big", signed=True) + lsb.to_bytes(8, "big", signed=True)
            assert as_bytes == bytes(uuid_from_str(ids[topic]))
    assert list(elsewhere.iterdir()) == []


def test_a_consumer_moves_past_what_remote_compaction_removed(tmp_path: Path) -> None:
    """A compacted tiered topic whose remote copy, once compacted, holds nothing after its
    first records below the local segments (every later record there was a superseded value
    of five hot keys): a consumer reading from offset 0 gets those records, then goes on to
    the local ones (as Kafka moves on to the next segment) and reaches the end, instead of
    being answered nothing at the same offset for ever."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from kafka import KafkaConsumer, TopicPartition

    from kafkatier.cli.main import main
    from kafkatier.tiering.config import TieringConfig
    from kafkatier.tiering.sidecar.tierer import Tierer

    keys = [b"unique-%03d" % i for i in range(100)] + [b"hot-%d" % (i % 5) for i in range(2900)]
    values = [b"value-%05d-" % i + b"x" * 150 for i in range(3000)]
    source = tmp_path / "in.parquet"
    pq.write_table(pa.table({"key": pa.array(keys, pa.binary()),
                             "value": pa.array(values, pa.binary())}), source)  # fmt: skip
    logs = tmp_path / "logs"
    settings = ["cleanup.policy=compact", "segment.bytes=8192", "remote.storage.enable=true",
                "local.retention.bytes=16384", "min.cleanable.dirty.ratio=0.01"]  # fmt: skip
    assert main(["produce", str(logs), "--topic", "c", "--input", str(source),
                 *[a for s in settings for a in ("--config", s)]]) == 0  # fmt: skip
    store = FsspecStore(f"file://{tmp_path / 'remote'}")
    (tmp_path / "remote").mkdir()
    config = TieringConfig(log_dirs=(logs,), remote_url=store.url)
    assert Tierer(config, store).run_once().failures == 0
    with ReadOnlyPartition(logs, "c", 0) as part:
        local_start = part.bases[0]
    assert local_start > 100
    with serving(logs, remote__storage__url=store.url) as port:
        consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", group_id=None,
                                 enable_auto_commit=False)  # fmt: skip
        tp = TopicPartition("c", 0)
        try:
            consumer.assign([tp])
            consumer.seek_to_beginning()
            got: list[int] = []
            deadline = time.monotonic() + 60
            while consumer.position(tp) < 3000 and time.monotonic() < deadline:
                got += [r.offset for r in consumer.poll(timeout_ms=500).get(tp, [])]
        finally:
            consumer.close()
    assert got[:100] == list(range(100))  # the unique keys, from the remote copy
    assert got[100:] == list(range(local_start, 3000))  # then every local record


def test_delete_records_holds_at_once_over_the_remote_copy(tmp_path: Path) -> None:
    """DeleteRecords above the local log start of a tiered partition (the checkpointed log
    start moved): earliest is the new start at once and offsets below it are out of range,
    though the remote segments below it stay until the sidecar's next pass (they were served,
    and earliest stayed at the remote start, until then)."""
    from kafka import KafkaConsumer, TopicPartition

    from kafkatier.storage.cleaner.retention import delete_records
    from kafkatier.storage.log.directory import LogDirectory

    logs = tmp_path / "logs"
    write_topics(logs)
    store = FsspecStore(f"file://{tmp_path / 'remote'}")
    (tmp_path / "remote").mkdir()
    tier(logs, store)
    with LogDirectory(logs) as ld:
        log = ld.get("rt", 0)
        assert log is not None
        target = log.log_start_offset + 2
        delete_records(log, target, persist_start=ld.checkpoint)
    with serving(logs, remote__storage__url=store.url) as port:
        consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", group_id=None,
                                 auto_offset_reset="earliest")  # fmt: skip
        tp = TopicPartition("rt", 0)
        try:
            assert consumer.beginning_offsets([tp]) == {tp: target}
            consumer.assign([tp])
            consumer.seek(tp, 0)  # below the new start: reset to it (earliest)
            records: list[Any] = []
            deadline = time.monotonic() + 30
            while not records and time.monotonic() < deadline:
                records = consumer.poll(timeout_ms=500).get(tp, [])
        finally:
            consumer.close()
    assert records and records[0].offset >= target


def test_a_store_down_is_asked_once_per_window_not_once_per_partition(
    tmp_path: Path, serve: Any, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An S3 endpoint that accepts connections and drops them: after the first failure the
    server asks the store nothing for a while (every partition uses its manifest copy), so a
    ListOffsets over four tiered partitions costs one wait on the store, not four (each held a
    thread of the shared pool for the store's retries: 16-28 s a partition in an outage)."""
    import logging
    import socket
    import threading

    from kafka import KafkaConsumer, TopicPartition

    logs = tmp_path / "logs"
    write_topics(logs)
    (tmp_path / "remote").mkdir()
    tier(logs, FsspecStore(f"file://{tmp_path / 'remote'}"))
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[int] = []

    def drop() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            accepted.append(1)
            conn.close()

    threading.Thread(target=drop, daemon=True).start()
    endpoint = f"http://127.0.0.1:{listener.getsockname()[1]}"
    caplog.set_level(logging.WARNING, logger="kafkatier.serve")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "any")  # so that requests are sent at all
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "any")
    try:
        with serve(logs, remote__storage__url="s3://down/x",
                   remote__storage__s3__endpoint__url=endpoint,
                   remote__storage__s3__max__attempts="1") as port:  # fmt: skip
            c = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", group_id=None)
            try:
                tps = [TopicPartition(t, p) for t in ("rt", "ro") for p in (0, 1)]
                starts = c.beginning_offsets(tps)
            finally:
                c.close()
    finally:
        listener.close()
    assert starts == {tp: 0 for tp in tps}  # the copies' log starts: the remote ones
    asked = [r for r in caplog.records if "unreadable for" in r.getMessage()]
    assert len(asked) == 1, caplog.text  # one partition's load asked the store, not four
    assert accepted  # it was asked (and the listing of topics only the store holds)


def test_delete_records_into_the_remote_range_holds_and_stays(tmp_path: Path) -> None:
    """DeleteRecords to an offset only the remote copy still holds (below the local segments):
    it was ignored, the writer's log start being the local one. It is checkpointed at once,
    served as the log start, kept by the writer's later checkpoints, and the sidecar's next
    pass expires the remote segments wholly below it, as Kafka's RLM does."""
    from kafka import KafkaConsumer, TopicPartition

    from kafkatier.storage.cleaner.retention import delete_records
    from kafkatier.storage.log.directory import LogDirectory
    from kafkatier.storage.log.readonly import checkpointed_log_starts
    from kafkatier.tiering.config import TieringConfig
    from kafkatier.tiering.metadata.manifest_store import ManifestStore
    from kafkatier.tiering.sidecar.tierer import Tierer

    logs = tmp_path / "logs"
    write_topics(logs)
    store = FsspecStore(f"file://{tmp_path / 'remote'}")
    (tmp_path / "remote").mkdir()
    tier(logs, store)
    rp = next(p for p in ManifestStore(store).partitions(topic="rt") if p.partition == 0)
    second = ManifestStore(store).load(rp)[0].finished()[1]
    target = second.base_offset + 1  # inside the second remote segment
    with LogDirectory(logs) as ld:
        log = ld.get("rt", 0)
        assert log is not None and target < log.log_start_offset  # below the local segments
        assert delete_records(log, target, persist_start=ld.checkpoint).log_start_offset == target
    with LogDirectory(logs) as ld:  # a writer opening and checkpointing again keeps it
        ld.checkpoint()
    assert checkpointed_log_starts(logs)[("rt", 0)] == target
    with serving(logs, remote__storage__url=store.url) as port:
        consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", group_id=None)
        tp = TopicPartition("rt", 0)
        try:
            assert consumer.beginning_offsets([tp]) == {tp: target}
        finally:
            consumer.close()
    passed = Tierer(TieringConfig(log_dirs=(logs,), remote_url=store.url), store).run_once()
    assert passed.total("remote_segments_expired") >= 1  # the first remote segment went
    manifest = ManifestStore(store).load(rp)[0]
    assert manifest.log_start_offset == target
    assert manifest.finished()[0].base_offset == second.base_offset


def _produce(logs: Path, source: Path, first: int, count: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from kafkatier.cli.main import main

    values = [b"value-%05d-" % i + b"x" * 100 for i in range(first, first + count)]
    pq.write_table(pa.table({"value": pa.array(values, pa.binary())}), source)
    settings = ["segment.bytes=8192", "remote.storage.enable=true", "local.retention.bytes=8192"]
    assert main(["produce", str(logs), "--topic", "t", "--input", str(source),
                 *[a for s in settings for a in ("--config", s)]]) == 0  # fmt: skip


def test_a_kept_remote_reader_older_than_the_local_files_is_loaded_again(tmp_path: Path) -> None:
    """The sidecar uploads segments and deletes them locally between two fetches less than the
    reader's refresh apart: a fetch of an offset between the kept reader's end and the new local
    start read the local segments from their start (the records between were skipped, and a
    consumer committed past them), and ListOffsets EARLIEST of a partition first seen with
    nothing remote gave the local start. The local files now say the kept reader is behind."""
    from kafkatier.serve import partition_view
    from kafkatier.serve.partition_view import Sources
    from kafkatier.serve.remote_view import RemoteTier
    from kafkatier.storage.log.tail_cache import TailCache
    from kafkatier.storage.record.records import iter_batches
    from kafkatier.tiering.config import TieringConfig
    from kafkatier.tiering.sidecar.tierer import Tierer

    logs = tmp_path / "logs"
    (tmp_path / "remote").mkdir()
    store = FsspecStore(f"file://{tmp_path / 'remote'}")
    config = TieringConfig(log_dirs=(logs,), remote_url=store.url)
    _produce(logs, tmp_path / "a.parquet", 0, 500)
    sources = Sources(TailCache(), remote=RemoteTier(store))
    assert partition_view.bounds(logs, "t", 0, sources).log_start == 0  # nothing remote: kept
    assert Tierer(config, store).run_once().failures == 0
    assert partition_view.bounds(logs, "t", 0, sources).log_start == 0  # was the local start
    got = partition_view.fetch(logs, "t", 0, 0, 1 << 20, False, True, sources)
    assert got.remote and got.records
    first_end = sources.remote.reader(logs, "t", 0).segments[-1].end_offset  # type: ignore[union-attr]
    _produce(logs, tmp_path / "b.parquet", 500, 1500)
    assert Tierer(config, store).run_once().failures == 0
    with ReadOnlyPartition(logs, "t", 0) as part:
        local_start = part.bases[0]
    assert local_start > first_end + 1  # a gap the kept reader knows nothing of
    wanted = first_end + 1
    got = partition_view.fetch(logs, "t", 0, wanted, 1 << 20, False, True, sources)
    assert got.remote and got.records
    data = got.records.read()  # type: ignore[union-attr]
    batches = list(iter_batches(memoryview(data), 0, len(data), file="fetch"))
    assert batches[0].base_offset <= wanted <= batches[0].last_offset
