"""Group members of unmodified Kafka clients for the group tests: each adapter subscribes to
topics with a ``group.id`` (manual commits, earliest reset, short heartbeats; ``extra``
settings override them) and offers the same small surface: poll some records as rows, the
partitions assigned, commit what was consumed, close (leaving the group); and the topic they
read."""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from serve_clients import JAVA_MISSING, Row, java_command, java_row, record_row

from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record

HEARTBEAT_MS = 200
TOPIC, PARTITIONS, PER_PARTITION, T0 = "g", 4, 30, 1_700_000_000_000
ALL = {(TOPIC, p) for p in range(PARTITIONS)}
GROUPS = {"group__initial__rebalance__delay__ms": "0", "group__min__session__timeout__ms": "500"}
"""No initial delay (Kafka's 3 s) and short sessions allowed: tests in seconds."""


def write_topic(log_dir: Path, first: int = 0, count: int = PER_PARTITION) -> None:
    """``count`` records per partition from offset ``first``, in batches of three."""
    with LogDirectory(log_dir) as ld:
        ld.create_partitions(TOPIC, PARTITIONS)
        for p in range(PARTITIONS):
            log = ld.get(TOPIC, p)
            assert log is not None
            for start in range(first, first + count, 3):
                log.append(build_batch([
                    Record(i, T0 + i, b"k%d" % i, b"v%d-%d" % (p, i), (("h", b"%d" % p),))
                    for i in range(start, min(start + 3, first + count))
                ]))  # fmt: skip


class GroupMember(Protocol):
    def poll(self, most: int = 500) -> list[Row]: ...
    def assignment(self) -> set[tuple[str, int]]: ...
    def commit(self) -> None: ...
    def close(self) -> None: ...


class KafkaPythonMember:
    def __init__(self, port: int, group: str, topics: list[str], **extra: Any) -> None:
        from kafka import KafkaConsumer

        self.consumer = KafkaConsumer(*topics, **{
            "bootstrap_servers": f"127.0.0.1:{port}", "group_id": group,
            "enable_auto_commit": False, "auto_offset_reset": "earliest",
            "heartbeat_interval_ms": HEARTBEAT_MS, **extra,
        })  # fmt: skip
        # Metadata first: a leader that joins before its first Metadata answer assigns
        # nothing ("No partition metadata for topic") and rejoins when the answer comes, and
        # kafka-python 3.0.12 can drop that rejoin's assignment for good: if a poll's timeout
        # ends while the JoinGroup/SyncGroup task is finishing, its next poll finds nothing to
        # rejoin for (the metadata snapshots agree) and never applies the result. With no
        # initial rebalance delay (GROUPS), beside three CPU hogs, tests/serve/apis/
        # test_epochs.py's kafka-python case hung 3 runs in 46 without this, none in 40 with it.
        for topic in topics:
            self.consumer.partitions_for_topic(topic)

    def poll(self, most: int = 500) -> list[Row]:
        found = self.consumer.poll(timeout_ms=200, max_records=most)
        return [record_row(r) for records in found.values() for r in records]

    def assignment(self) -> set[tuple[str, int]]:
        return {(tp.topic, tp.partition) for tp in self.consumer.assignment()}

    def commit(self) -> None:
        self.consumer.commit()

    def close(self) -> None:
        self.consumer.close()


class ConfluentMember:
    def __init__(self, port: int, group: str, topics: list[str], **extra: Any) -> None:
        from confluent_kafka import Consumer

        self.consumer = Consumer({
            "bootstrap.servers": f"127.0.0.1:{port}", "group.id": group,
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "heartbeat.interval.ms": HEARTBEAT_MS, **extra,
        })  # fmt: skip
        self.consumer.subscribe(topics)

    def poll(self, most: int = 500) -> list[Row]:
        rows: list[Row] = []
        for msg in self.consumer.consume(num_messages=most, timeout=0.2):
            assert not msg.error(), msg.error()
            ts_type, ts = msg.timestamp()
            rows.append((msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value(), ts,
                         ts_type - 1, tuple(msg.headers() or ())))  # fmt: skip
        return rows

    def assignment(self) -> set[tuple[str, int]]:
        return {(tp.topic, tp.partition) for tp in self.consumer.assignment()}

    def commit(self) -> None:
        self.consumer.commit(asynchronous=False)

    def close(self) -> None:
        self.consumer.close()


class AioKafkaMember:
    """aiokafka's consumer on its own event loop in a thread, driven through this sync API."""

    def __init__(self, port: int, group: str, topics: list[str], **extra: Any) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.consumer = self._run(self._start(port, group, topics, extra))

    def _run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    @staticmethod
    async def _start(port: int, group: str, topics: list[str], extra: dict[str, Any]) -> Any:
        from aiokafka import AIOKafkaConsumer

        consumer = AIOKafkaConsumer(*topics, **{
            "bootstrap_servers": f"127.0.0.1:{port}", "group_id": group,
            "enable_auto_commit": False, "auto_offset_reset": "earliest",
            "heartbeat_interval_ms": HEARTBEAT_MS, **extra,
        })  # fmt: skip
        await consumer.start()
        return consumer

    def poll(self, most: int = 500) -> list[Row]:
        found = self._run(self.consumer.getmany(timeout_ms=200, max_records=most))
        return [record_row(r) for records in found.values() for r in records]

    def assignment(self) -> set[tuple[str, int]]:
        async def assigned() -> set[Any]:
            return set(self.consumer.assignment())

        return {(tp.topic, tp.partition) for tp in self._run(assigned())}

    def commit(self) -> None:
        self._run(self.consumer.commit())

    def close(self) -> None:
        try:
            self._run(self.consumer.stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()


class JavaMember:
    """Apache Kafka's Java consumer in a JVM of its own (tests/serve/clients/JavaMember.java),
    driven over its stdin; ``extra`` are consumer properties in Kafka's names. Skips the test
    where the Java client is not installed."""

    def __init__(self, port: int, group: str, topics: list[str], **extra: Any) -> None:
        import pytest

        if JAVA_MISSING:
            pytest.skip(JAVA_MISSING)
        settings = {"heartbeat.interval.ms": HEARTBEAT_MS, **extra}
        self.proc = subprocess.Popen(
            java_command("JavaMember", port, "-group", group, "-topics", ",".join(topics),
                         *[arg for k, v in settings.items() for arg in ("-X", f"{k}={v}")]),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip

    def _ask(self, command: str) -> list[str]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        lines: list[str] = []
        while (line := self.proc.stdout.readline()) != ".\n":
            assert line, f"the Java member ended (exit {self.proc.poll()}) at {command!r}"
            lines.append(line)
        return lines

    def poll(self, most: int = 500) -> list[Row]:
        return [java_row(line) for line in self._ask(f"poll {most}")]

    def assignment(self) -> set[tuple[str, int]]:
        return {(t, p) for t, p in json.loads(self._ask("assignment")[0])}

    def commit(self) -> None:
        self._ask("commit")

    def close(self) -> None:
        try:
            self._ask("close")
        finally:
            self.proc.wait(30)


MEMBERS: dict[str, Callable[..., GroupMember]] = {
    "kafka-python": KafkaPythonMember,
    "confluent-kafka": ConfluentMember,
    "aiokafka": AioKafkaMember,
    "java": JavaMember,
}


Rows = dict[int, list[Row]]


def poll_until(members: list[GroupMember], done: Callable[[Rows], bool], what: str,
               most: int = 500, seconds: float = 60) -> Rows:  # fmt: skip
    """Poll every member in turn (``most`` records a poll) until ``done(rows)``; each
    member's rows by its index in ``members``. ``seconds``: a deadline, far above the 1-3 s
    these waits take alone, for a machine busy with the suite's other worker."""
    rows: Rows = {i: [] for i in range(len(members))}
    deadline = time.monotonic() + seconds
    while not done(rows):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        for i, member in enumerate(members):
            rows[i].extend(member.poll(most))
    return rows
