"""``kafkatier serve`` inside ``kafkatier run``: the server in a thread of the job's process, a
consumer group tailing the events topic through it while the job writes, and, at the end, both
topics read back from the beginning through it by an unmodified Kafka client (confluent-kafka,
that is librdkafka) and compared with the Spark replay.

What the consumers prove is what a Kafka user would try first: a consumer group subscribed to
the topic while it is written (long polls, the LSO moving with each micro-batch, offsets only in
S3 once local retention took them) gets every committed record once; a reader from the beginning
gets the same records as kafkatier's own reader, per partition: count, offsets and the CRC-32 of
every key and value (summed, so memory stays one entry a partition however long the run).
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kafkatier.cli.config.loader import KafkatierConfig
from kafkatier.cli.run.verify import Check
from kafkatier.serve.thread import ServeThread
from kafkatier.tiering.config import TieringConfig

TAIL_GROUP = "kafkatier-run-tail"
CATCH_UP_SECONDS = 120.0


@dataclass
class PartitionTotals:
    """What a reader saw of one partition: records, the sum of their offsets and of the CRC-32
    of key and value (a null key counts as -1), and offsets that did not increase."""

    records: int = 0
    offsets: int = 0
    crcs: int = 0
    last_offset: int = -1
    out_of_order: int = 0

    def add(self, offset: int, key: bytes | None, value: bytes | None) -> None:
        if offset <= self.last_offset:
            self.out_of_order += 1
        self.last_offset = offset
        self.records += 1
        self.offsets += offset
        self.crcs += (-1 if key is None else zlib.crc32(key)) + zlib.crc32(value or b"")

    def key(self) -> tuple[int, int, int]:
        return (self.records, self.offsets, self.crcs)


def client_name() -> str | None:
    """The Kafka client these checks use, or None when confluent-kafka is not installed."""
    try:
        import confluent_kafka
    except ImportError:
        return None
    version, librdkafka = confluent_kafka.__version__, confluent_kafka.libversion()[0]
    return f"confluent-kafka {version} (librdkafka {librdkafka})"


def _consumer(bootstrap: str, group: str) -> Any:
    from confluent_kafka import Consumer

    return Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
        "isolation.level": "read_committed", "enable.partition.eof": False,
        "session.timeout.ms": 10_000, "client.id": "kafkatier-run",
    })  # fmt: skip


@dataclass
class TailConsumer:
    """A consumer group member subscribed to ``topic`` from the job's first batch on."""

    bootstrap: str
    topic: str
    totals: dict[int, PartitionTotals] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    caught_up: bool = False
    while_writing: int = 0  # records received before the job stopped
    _drain: threading.Event = field(default_factory=threading.Event)
    _halt: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="tail-consumer", daemon=True)
        self._thread.start()

    def finish(self, timeout: float = CATCH_UP_SECONDS) -> None:
        """Once the job has stopped: read on until every partition's position reaches its end
        (or ``timeout``), then leave the group."""
        self._drain.set()
        if self._thread is not None:
            self._thread.join(timeout + 30)

    def stream_stopped(self) -> None:
        """Note how many records it had received when the job stopped writing."""
        self.while_writing = sum(t.records for t in self.totals.values())

    def halt(self) -> None:
        """Leave the group now (the run stops early: an error, Ctrl-C)."""
        self._halt.set()
        if self._thread is not None:
            self._thread.join(30)

    def _loop(self) -> None:
        consumer = _consumer(self.bootstrap, TAIL_GROUP)
        try:
            consumer.subscribe([self.topic])
            ends: dict[int, int] | None = None  # once the job stopped: the ends do not move
            deadline = 0.0
            while not self._halt.is_set():
                msg = consumer.poll(0.2)
                if msg is not None:
                    self._take(msg)
                    continue
                if not self._drain.is_set():
                    continue
                if ends is None:
                    ends = _ends(consumer, self.topic)
                    deadline = time.monotonic() + CATCH_UP_SECONDS
                self.caught_up = _positions_reached(consumer, self.topic, ends)
                if self.caught_up or time.monotonic() > deadline:
                    break
        except Exception as exc:  # the check reports it
            self.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            consumer.close()

    def _take(self, msg: Any) -> None:
        if msg.error() is not None:
            if len(self.errors) < 5:
                self.errors.append(str(msg.error()))
            return
        totals = self.totals.setdefault(msg.partition(), PartitionTotals())
        totals.add(msg.offset(), msg.key(), msg.value())


def _ends(consumer: Any, topic: str) -> dict[int, int]:
    """The high watermark of every partition of ``topic``."""
    from confluent_kafka import TopicPartition

    count = len(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
    return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), 10)[1]
            for p in range(count)}  # fmt: skip


def read_from_beginning(bootstrap: str, topic: str) -> dict[int, PartitionTotals]:
    """Every committed record of ``topic`` through the server, by a consumer that assigns
    itself every partition from the earliest offset (no group)."""
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    consumer = _consumer(bootstrap, "kafkatier-run-read")
    totals: dict[int, PartitionTotals] = {}
    try:
        ends = _ends(consumer, topic)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        deadline = time.monotonic() + CATCH_UP_SECONDS
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                totals.setdefault(msg.partition(), PartitionTotals()).add(
                    msg.offset(), msg.key(), msg.value()
                )
            elif msg is None and _positions_reached(consumer, topic, ends):
                break
    finally:
        consumer.close()
    return totals


def _positions_reached(consumer: Any, topic: str, ends: dict[int, int]) -> bool:
    """Every partition of ``ends`` read to its end (an empty one has nothing to read; one not
    assigned to ``consumer`` has no position: not reached)."""
    from confluent_kafka import TopicPartition

    positions = consumer.position([TopicPartition(topic, p) for p in ends])
    return all(ends[tp.partition] == 0 or tp.offset >= ends[tp.partition] for tp in positions)


def try_it_lines(config: KafkatierConfig, bootstrap: str, topics: tuple[str, str]) -> list[str]:
    """What the report tells a user to type to read the topics with their own Kafka client."""
    source = config.source if not config.source.startswith("<") else "conf/kafkatier.properties"
    return [
        f"  serve: the topics were served at {bootstrap} while the job ran; to read them again:",
        f"    kafkatier serve --config {source}",
        f"    kcat -b {bootstrap} -C -t {topics[0]} -o beginning -e "
        "-X isolation.level=read_committed",
        f"    kcat -b {bootstrap} -G my-group {topics[1]}    # a consumer group, offsets committed",
    ]


def replay_totals(replayed: Any) -> dict[int, tuple[int, int, int]]:
    """:meth:`PartitionTotals.key` per partition of a Spark replay (kafkatier's own reader)."""
    from pyspark.sql import functions as F

    key_crc = F.when(F.col("key").isNull(), F.lit(-1)).otherwise(F.crc32("key"))
    value_crc = F.crc32(F.coalesce(F.col("value"), F.lit(b"")))
    rows = replayed.groupBy("partition").agg(
        F.count("*").alias("n"), F.sum("offset").alias("o"), F.sum(key_crc + value_crc).alias("c")
    ).collect()
    return {row["partition"]: (row["n"], row["o"], row["c"]) for row in rows}


def compare(name: str, seen: dict[int, PartitionTotals], want: dict[int, tuple[int, int, int]],
            where: str) -> Check:  # fmt: skip
    """The consumer's totals against the replay's: equal per partition, offsets increasing."""
    got = {p: t.key() for p, t in seen.items() if t.records}
    records = sum(t.records for t in seen.values())
    disorder = sum(t.out_of_order for t in seen.values())
    if got == {p: v for p, v in want.items() if v[0]} and not disorder:
        return Check(name, True, f"{records:,} records in {len(want)} partitions, the same as "
                                 f"the replay ({where})")  # fmt: skip
    wrong = sorted(p for p in set(got) | set(want) if got.get(p) != want.get(p))
    mine, theirs = [got.get(p) for p in wrong], [want.get(p) for p in wrong]
    return Check(name, False, f"{records:,} records; partitions {wrong} differ from the replay "
                              f"(records, offset sum, CRC sum: got {mine}, replay {theirs}); "
                              f"{disorder} offsets out of order ({where})")  # fmt: skip


def start_tail(bootstrap: str | None, topic: str) -> TailConsumer | None:
    """The consumer group member tailing ``topic``, when serve runs and a client is installed."""
    if bootstrap is None or client_name() is None:
        return None
    tail = TailConsumer(bootstrap, topic)
    tail.start()
    return tail


def served_by(bootstrap: str | None, tail: TailConsumer | None, topics: tuple[str, str],
              say: Callable[[str], None]) -> Callable[[Any, Any], list[Check]] | None:  # fmt: skip
    """The serve checks for ``run_checks`` (None when serve is off or no client installed)."""
    if bootstrap is None or client_name() is None:
        return None
    return lambda events, state: served_checks(bootstrap, tail, events, state, topics, say)


def served_checks(bootstrap: str, tail: TailConsumer | None, events: Any, state: Any,
                  topics: tuple[str, str], say: Callable[[str], None]) -> list[Check]:  # fmt: skip
    """The checks of the module docstring: the tailing group's records, then each topic read
    from the beginning (older segments only in S3 by now), against the replays."""
    client = client_name() or "no client"
    where = f"{client} at {bootstrap}"
    checks = []
    if tail is not None:
        say(f"waiting for the consumer group {TAIL_GROUP!r} tailing {topics[0]} to catch up")
        tail.finish()
        name = f"serve: a consumer group tailing {topics[0]} got every committed record once"
        if tail.errors or not tail.caught_up:
            why = "; ".join(tail.errors) or f"not at the end after {CATCH_UP_SECONDS:.0f} s"
            checks.append(Check(name, False, f"{why} ({where})"))
        else:
            during = f"{tail.while_writing:,} while the job wrote; {where}"
            checks.append(compare(name, tail.totals, replay_totals(events), during))
    for topic, replayed in zip(topics, (events, state), strict=True):
        say(f"reading {topic} from the beginning through kafkatier serve ({client})")
        name = f"serve: {topic} read from the beginning equals the replay"
        try:
            seen = read_from_beginning(bootstrap, topic)
            checks.append(compare(name, seen, replay_totals(replayed), where))
        except Exception as exc:
            checks.append(Check(name, False, f"{type(exc).__name__}: {exc} ({where})"))
    return checks



@contextlib.contextmanager
def serving(config: KafkatierConfig, tiering: TieringConfig,
            say: Callable[[str], None]) -> Iterator[str | None]:  # fmt: skip
    """``kafkatier serve`` for as long as the block runs (``run.serve.enable``): yields the
    address clients use, or None when serving is off."""
    if not config.run.serve:
        yield None
        return
    thread = ServeThread(dataclasses.replace(config.serve, tiering=tiering))
    bootstrap = thread.start()
    if bootstrap is None:
        say("kafkatier serve: every listener is secured (SSL/SASL); the checks that consume "
            "through it need a PLAINTEXT listener and are skipped")
    else:
        say(f"kafkatier serve: Kafka clients can read the topics at {bootstrap}")
    try:
        yield bootstrap
    finally:
        thread.stop()
