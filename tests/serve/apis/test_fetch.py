"""Unmodified clients consume over ``kafkatier serve`` and see exactly what the independent
reader (kafka-python's MemoryRecords over the segment files) sees: offsets, keys, values,
headers, timestamps; read_committed skips aborted transactions and stops at the open one."""

from __future__ import annotations

import base64
import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from serve_clients import (
    JAVA_MISSING,
    KCAT,
    SARAMA_MISSING,
    aiokafka_rows,
    confluent_rows,
    fetch_one,
    java_command,
    java_rows,
    kafka_python_rows,
    kcat_offsets,
    kcat_rows,
    raw_socket,
    record_row,
    sarama_rows,
)
from test_datasource import Written, write_sample
from test_datasource import kafka_python_rows as disk_rows
from topics import CODECS, PARTITIONS, produce_codecs

from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.log import Log
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record

Consume = Callable[[int, dict[str, int], bool], list[Any]]
CLIENTS: dict[str, Consume] = {
    "kafka-python": kafka_python_rows,
    "confluent-kafka": confluent_rows,
    "aiokafka": aiokafka_rows,
    "kcat": kcat_rows,
    "sarama": sarama_rows,
    "java": java_rows,
}
OFFSETS_ONLY: dict[str, Consume] = {"kcat": kcat_offsets}
"""Clients compared by offsets alone where values are binary (kcat's JSON is text)."""
NO_TIMESTAMP_TYPE = {"sarama"}
"""Clients that do not say whether a timestamp is the producer's or the broker's."""


def _client(name: str) -> Consume:
    if name == "kcat" and KCAT is None:
        pytest.skip("kcat is not installed (apt-get install kcat)")
    if name == "sarama" and SARAMA_MISSING:
        pytest.skip(SARAMA_MISSING)
    if name == "java" and JAVA_MISSING:
        pytest.skip(JAVA_MISSING)
    return CLIENTS[name]


def _comparable(client: str, rows: list[Any]) -> list[Any]:
    """``rows`` as ``client`` can tell them: offsets alone, or without the timestamp type."""
    if client in OFFSETS_ONLY:
        return [r[:3] for r in rows]
    if client in NO_TIMESTAMP_TYPE:
        return [(*r[:6], *r[7:]) for r in rows]
    return list(rows)


@pytest.fixture(scope="module")
def codecs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    log_dir = tmp_path_factory.mktemp("codecs") / "logs"
    produce_codecs(log_dir)
    return log_dir


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Written:
    return write_sample(tmp_path_factory.mktemp("txn") / "logs")


@pytest.mark.parametrize("client", CLIENTS)
def test_every_codec_reads_as_on_disk(client: str, codecs_dir: Path, serve: Any) -> None:
    consume = _client(client)
    expected = disk_rows(codecs_dir, "codec-.*")
    assert len(expected) == 240 * len(CODECS)
    assert {r[:2] for r in expected} == {(f"codec-{c}", p) for c in CODECS for p in range(3)}
    with serve(codecs_dir) as port:
        topics = {f"codec-{codec}": PARTITIONS for codec in CODECS}
        got = consume(port, topics, False)
        assert _comparable(client, got) == _comparable(client, expected)


@pytest.mark.parametrize("client", CLIENTS)
def test_read_committed_skips_aborted_data(client: str, sample: Written, serve: Any) -> None:
    _client(client)
    consume = OFFSETS_ONLY.get(client, CLIENTS[client])

    def project(rows: list[Any]) -> list[Any]:
        return _comparable(client, rows)

    with serve(sample.path) as port:
        on_disk = disk_rows(sample.path, "events|other")
        committed = sample.visible(committed=True)
        assert {r[0] for r in committed} == {"events", "other"}
        assert len(committed) < len(on_disk)  # there is aborted or open data to skip
        topics = {"events": 3, "other": 1}
        assert project(consume(port, topics, False)) == project(on_disk)
        assert project(consume(port, topics, True)) == project(committed)


def test_offsets_for_times(codecs_dir: Path, serve: Any) -> None:
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CTP
    from kafka import KafkaConsumer, TopicPartition

    rows = disk_rows(codecs_dir, "codec-lz4")
    stamps = [rows[0][5] - 5, rows[40][5], rows[41][5] - 1, rows[-1][5] + 1]
    with serve(codecs_dir) as port:
        kp = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", group_id=None)
        cc = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": "t",
                       "enable.auto.commit": False})  # assign() only: nothing to commit
        try:
            for ts in stamps:
                for p in range(PARTITIONS):
                    later = [r for r in rows if r[1] == p and r[5] >= ts]
                    want = min(later, key=lambda r: r[2]) if later else None
                    found = kp.offsets_for_times({TopicPartition("codec-lz4", p): ts})
                    got = found[TopicPartition("codec-lz4", p)]
                    if want is None:
                        assert got is None
                    else:
                        assert (got.offset, got.timestamp) == (want[2], want[5])
                    [tp] = cc.offsets_for_times([CTP("codec-lz4", p, ts)], timeout=10)
                    assert tp.offset == (want[2] if want else -1)
            # consuming from a timestamp: seek to its offset, read to the end
            ts = stamps[2]
            tps = {TopicPartition("codec-lz4", p): None for p in range(PARTITIONS)}
            found = kp.offsets_for_times(dict.fromkeys(tps, ts))
            kp.assign(list(tps))
            for tp, at in found.items():
                kp.seek(tp, at.offset)
            ends = kp.end_offsets(list(tps))
            got_rows = []
            while any(kp.position(tp) < ends[tp] for tp in tps):
                for records in kp.poll(timeout_ms=500).values():
                    got_rows.extend(r[:3] for r in map(record_row, records))
            assert sorted(got_rows) == [r[:3] for r in rows if r[5] >= ts]
        finally:
            kp.close()
            cc.close()


@contextlib.contextmanager
def tail_partition(log_dir: Path, first: bytes) -> Iterator[Log]:
    """Partition "tail" 0 of a new log dir holding one record (offset 0), open for appends."""
    with LogDirectory(log_dir) as ld:
        log = ld.get_or_create("tail", 0)
        log.append(build_batch([Record(0, 1000, b"k", first)]))
        log.flush()
        yield log


def test_a_tailing_consumer_sees_appends_within_its_poll(tmp_path: Path, serve: Any) -> None:
    """Long polling: the fetch waits (fetch.wait.max.ms 10 s) and returns as soon as records
    land, so the consumer sees them well before the wait would have ended."""
    from confluent_kafka import Consumer, TopicPartition

    log_dir = tmp_path / "logs"
    with tail_partition(log_dir, b"first") as log, serve(log_dir) as port:
        consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": "t",
                             "enable.auto.commit": False, "fetch.wait.max.ms": 10_000,
                             "fetch.min.bytes": 1})  # fmt: skip
        consumer.assign([TopicPartition("tail", 0, 1)])
        try:
            assert consumer.poll(1.0) is None  # nothing after offset 0 yet: waiting
            appended = threading.Event()

            def later() -> None:
                time.sleep(0.5)
                log.append(build_batch([Record(1, 2000, b"k", b"second")]))
                log.flush()
                appended.set()

            writer = threading.Thread(target=later)
            writer.start()
            start = time.monotonic()
            msg = None
            while msg is None and time.monotonic() - start < 8:
                msg = consumer.poll(0.2)
            took = time.monotonic() - start
            writer.join(30)  # the record is served once written, maybe before its flush returns
            assert appended.is_set() and msg is not None and not msg.error(), msg and msg.error()
            assert (msg.offset(), msg.value()) == (1, b"second")
            assert took < 5, f"the append took {took:.1f} s to reach the consumer"
        finally:
            consumer.close()


def test_an_idle_long_poll_reads_each_partition_once(
    tmp_path: Path, serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fetch at the end waits its max.wait.ms; when nothing lands meanwhile it answers with
    what it read before the wait, so each partition is read once, not again at the deadline
    (with thousands of partitions a read of all of them costs a large part of a second). Where
    the kernel reports folder changes (inotify), the wait does not look at the partition
    either: it sleeps until a change (looking every 50 ms cost an idle consumer of 1,024
    partitions a tenth of a core)."""

    from kafkatier.serve import partition_view
    from kafkatier.storage.log.dir_watch import DirectoryWatch

    reads: list[int] = []
    real = partition_view.fetch
    monkeypatch.setattr(partition_view, "fetch",
                        lambda *args: reads.append(args[3]) or real(*args))  # fmt: skip
    looks: list[int] = []
    real_token = partition_view.change_token
    monkeypatch.setattr(partition_view, "change_token",
                        lambda *args: looks.append(args[2]) or real_token(*args))  # fmt: skip
    with (
        tail_partition(tmp_path / "logs", b"first"),
        serve(tmp_path / "logs") as port,
        raw_socket(port) as sock,
    ):
        start = time.monotonic()
        got = fetch_one(sock, "tail", 1, max_wait_ms=400)
        took = time.monotonic() - start
    assert (got.error_code, got.high_watermark, got.records or b"") == (0, 1, b"")
    assert took >= 0.4  # it waited for records
    assert reads == [1]  # read once, at the offset asked for
    if DirectoryWatch.open() is not None:
        assert looks == [0]  # once, before the read: nothing while it waited


def test_the_java_consumer_tails_appends(tmp_path: Path, serve: Any) -> None:
    """Apache Kafka's Java consumer following a partition while records are appended (its
    fetches wait fetch.max.wait.ms, 500 ms, for records to land): each append reaches it."""
    import subprocess

    if JAVA_MISSING:
        pytest.skip(JAVA_MISSING)
    log_dir = tmp_path / "logs"
    with tail_partition(log_dir, b"v0") as log, serve(log_dir) as port:
        java = subprocess.Popen(
            java_command("JavaConsume", port, "-topics", "tail:1", "-count", "4"),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            for i in range(1, 4):
                time.sleep(0.7)
                log.append(build_batch([Record(0, 1000 + i, b"k", f"v{i}".encode())]))
                log.flush()
            out, err = java.communicate(timeout=60)
        finally:
            java.kill()
    assert java.returncode == 0, err
    got = [json.loads(line) for line in out.splitlines()]
    assert [(m["offset"], base64.b64decode(m["value"])) for m in got] == [
        (i, f"v{i}".encode()) for i in range(4)
    ]


def test_an_unreadable_partition_is_its_own_error(tmp_path: Path, serve: Any) -> None:
    """A partition whose segment cannot be read (here a directory where its ``.log`` should be;
    an unreadable file or an I/O error is the same) gets KAFKA_STORAGE_ERROR, and the other
    partitions of the same fetches are served: the error closed the client's connection before,
    so the healthy partition never got a record."""
    from kafka import KafkaConsumer, TopicPartition

    log_dir = tmp_path / "logs"
    with LogDirectory(log_dir) as ld:
        for p in (0, 1):
            ld.get_or_create("t", p).append(build_batch(
                [Record(i, 1_700_000_000_000, b"k%d" % i, b"p%d-%d" % (p, i)) for i in range(5)]))
    broken = log_dir / "t-1" / "00000000000000000000.log"
    broken.unlink()
    broken.mkdir()
    with serve(log_dir) as port:
        c = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", group_id=None,
                          enable_auto_commit=False, auto_offset_reset="earliest")  # fmt: skip
        try:
            c.assign([TopicPartition("t", 0), TopicPartition("t", 1)])
            for p in (0, 1):
                c.seek(TopicPartition("t", p), 0)
            got: list[bytes] = []
            deadline = time.monotonic() + 20
            while len(got) < 5 and time.monotonic() < deadline:
                for records in c.poll(timeout_ms=500).values():
                    got += [r.value for r in records]
        finally:
            c.close()
    assert got == [b"p0-%d" % i for i in range(5)]
