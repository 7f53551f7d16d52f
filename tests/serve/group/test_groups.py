"""Consumer groups over ``kafkatier serve`` with unmodified clients (classic protocol): two
members split a 4-partition topic and the one that stays takes over the partitions of the one
that leaves, resuming from its commits; committed offsets survive a restart of the server (a
consumer of another client resumes: no record twice, none missed, as the segment files hold
them) and are on disk in Kafka's ``__consumer_offsets`` format; kcat -G consumes and commits;
a group with no commits has offset -1 (and a server nobody commits to writes nothing); a member
that vanishes without leaving is expelled when its session times out; a static member restarts
without a rebalance."""

from __future__ import annotations

import selectors
import struct
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from group_clients import (
    ALL,
    GROUPS,
    MEMBERS,
    PARTITIONS,
    PER_PARTITION,
    TOPIC,
    ConfluentMember,
    poll_until,
    write_topic,
)
from kafka.record import MemoryRecords
from serve_clients import (
    JAVA_MISSING,
    KCAT,
    SARAMA_MISSING,
    java_command,
    java_rows,
    sarama_rows,
)
from test_datasource import kafka_python_rows as disk_rows


def admin(port: int) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})


def described(port: int, group: str) -> Any:
    client = admin(port)  # kept alive until the result is in
    return client.describe_consumer_groups([group])[group].result(timeout=10)


@pytest.mark.parametrize("client", MEMBERS)
def test_two_members_split_then_one_takes_over(client: str, tmp_path: Path, serve: Any) -> None:
    """The topic is empty until the split is settled, so what each member reads is exactly
    the records of the partitions it was given; after the takeover, the staying member reads
    only the records appended since (its own partitions and the leaver's resume from their
    commits)."""
    from confluent_kafka import ConsumerGroupState

    logs = tmp_path / "logs"
    write_topic(logs, count=0)
    make = MEMBERS[client]
    with serve(logs, **GROUPS) as port:
        a = make(port, "split", [TOPIC])
        b = None
        try:
            poll_until([a], lambda _: a.assignment() == ALL, "the first member to get all")
            b = make(port, "split", [TOPIC])
            pair = [a, b]
            poll_until(pair, lambda _: all(len(m.assignment()) == 2 for m in pair), "a 2/2 split")
            mine = [a.assignment(), b.assignment()]
            assert mine[0] | mine[1] == ALL and not mine[0] & mine[1]
            write_topic(logs)
            on_disk = disk_rows(logs, TOPIC)
            got = poll_until(pair, lambda rows: len(rows[0]) + len(rows[1]) >= len(on_disk),
                             "the records")  # fmt: skip
            assert [sorted(got[i]) for i in (0, 1)] == [
                [r for r in on_disk if r[:2] in part] for part in mine
            ]  # each exactly its own partitions
            a.commit()
            b.commit()
            b.close()
            b = None
            meanwhile = poll_until([a], lambda _: a.assignment() == ALL, "the takeover")
            assert meanwhile == {0: []}  # nothing new yet, and nothing read twice
            group = described(port, "split")
            assert group.state == ConsumerGroupState.STABLE and len(group.members) == 1
            write_topic(logs, PER_PARTITION, 1)
            after = poll_until([a], lambda rows: len(rows[0]) >= PARTITIONS, "the appends")[0]
            after.extend(a.poll())
            assert sorted(after) == [r for r in disk_rows(logs, TOPIC) if r[2] == PER_PARTITION]
        finally:
            for member in (a, b):
                if member is not None:
                    member.close()


def committed_on_disk(offsets_dir: Path) -> dict[tuple[str, str, int], int]:
    """The latest committed offset per (group, topic, partition), decoded here from the
    ``__consumer_offsets`` segments with kafka-python's record reader and Kafka's schemas
    (key: version int16, group, topic strings, partition int32; value v3: version int16,
    offset int64, leader epoch int32, metadata string, commit timestamp int64)."""
    found: dict[tuple[str, str, int], int] = {}
    for segment in sorted(offsets_dir.glob("__consumer_offsets-*/*.log")):
        memory = MemoryRecords(segment.read_bytes())
        while memory.has_next():
            for record in memory.next_batch():
                key, at = record.key, 2
                assert struct.unpack_from(">h", key)[0] == 1
                fields: list[Any] = []
                for _ in range(2):
                    (size,) = struct.unpack_from(">h", key, at)
                    fields.append(key[at + 2 : at + 2 + size].decode())
                    at += 2 + size
                (partition,) = struct.unpack_from(">i", key, at)
                version, offset = struct.unpack_from(">hq", record.value)
                assert version == 3
                found[(fields[0], fields[1], partition)] = offset
    return found


@pytest.mark.parametrize(("first", "second"), [("kafka-python", "confluent-kafka"),
                                               ("confluent-kafka", "aiokafka"),
                                               ("aiokafka", "java"),
                                               ("java", "kafka-python")])  # fmt: skip
def test_committed_offsets_survive_a_restart(
    first: str, second: str, tmp_path: Path, serve: Any
) -> None:
    logs = tmp_path / "logs"
    write_topic(logs)
    on_disk = disk_rows(logs, TOPIC)
    with serve(logs, **GROUPS) as port:
        member = MEMBERS[first](port, "resume", [TOPIC])
        try:
            before = poll_until([member], lambda rows: len(rows[0]) >= 40, "records", most=7)[0]
            member.commit()
        finally:
            member.close()
    ends: dict[tuple[str, int], int] = {}
    for row in before:
        ends[row[:2]] = max(ends.get(row[:2], 0), row[2] + 1)
    offsets_dir = logs / ".kafkatier-serve"
    committed = committed_on_disk(offsets_dir)  # a partition not read yet may have 0
    assert {k: v for k, v in committed.items() if v} == {
        ("resume", t, p): o for (t, p), o in ends.items()
    }
    with serve(logs, **GROUPS) as port:  # a new server process state, the same dirs
        client = admin(port)
        listed = client.list_consumer_groups().result(timeout=10).valid
        assert [(g.group_id, g.state.name) for g in listed] == [("resume", "EMPTY")]
        member = MEMBERS[second](port, "resume", [TOPIC])
        try:
            rest = len(on_disk) - len(before)
            after = poll_until([member], lambda rows: len(rows[0]) >= rest, "the rest")[0]
            after.extend(member.poll())
        finally:
            member.close()
    assert before and after
    assert sorted(before + after) == on_disk  # none twice, none missed


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed (apt-get install kcat)")
def test_kcat_consumes_in_a_group_and_commits(tmp_path: Path, serve: Any) -> None:
    logs = tmp_path / "logs"
    write_topic(logs)
    on_disk = disk_rows(logs, TOPIC)

    def kcat(port: int) -> list[tuple[int, int, str]]:
        assert KCAT is not None
        out = subprocess.run(
            [KCAT, "-b", f"127.0.0.1:{port}", "-G", "kc", "-X", "auto.offset.reset=earliest",
             "-e", "-q", "-f", "%p %o %s\\n", TOPIC],
            capture_output=True, timeout=30, check=True, text=True,
        )  # fmt: skip
        return sorted((int(p), int(o), v) for p, o, v in map(str.split, out.stdout.splitlines()))

    with serve(logs, **GROUPS) as port:
        assert kcat(port) == [(r[1], r[2], r[4].decode()) for r in on_disk]
        assert kcat(port) == []  # the first run committed its positions when it closed
    assert committed_on_disk(logs / ".kafkatier-serve") == {
        ("kc", TOPIC, p): PER_PARTITION for p in range(PARTITIONS)
    }


@pytest.mark.skipif(SARAMA_MISSING is not None, reason=SARAMA_MISSING or "")
def test_sarama_consumes_in_a_group_and_commits(tmp_path: Path, serve: Any) -> None:
    """Go's sarama 1.22, a member of a group with the oldest group versions served (JoinGroup
    v1, SyncGroup v0, Heartbeat v0): every record once, its commits durable, a second run of
    the group reads nothing."""
    logs = tmp_path / "logs"
    write_topic(logs)
    on_disk = [(*r[:6], *r[7:]) for r in disk_rows(logs, TOPIC)]  # sarama has no ts type
    with serve(logs, **GROUPS) as port:
        got = sarama_rows(port, {TOPIC: PARTITIONS}, False, group="sg")
        assert [(*r[:6], *r[7:]) for r in got] == on_disk
        assert sarama_rows(port, {TOPIC: PARTITIONS}, False, group="sg") == []
    assert committed_on_disk(logs / ".kafkatier-serve") == {
        ("sg", TOPIC, p): PER_PARTITION for p in range(PARTITIONS)
    }


@pytest.mark.skipif(JAVA_MISSING is not None, reason=JAVA_MISSING or "")
def test_the_java_consumer_consumes_in_a_group_and_commits(tmp_path: Path, serve: Any) -> None:
    """Apache Kafka's Java client (kafka-clients 4.3, the classic group protocol), a member of
    a group: every record once, its commits durable across a server restart, where a second run
    of the group reads nothing."""
    logs = tmp_path / "logs"
    write_topic(logs)
    on_disk = disk_rows(logs, TOPIC)
    with serve(logs, **GROUPS) as port:
        assert java_rows(port, {TOPIC: PARTITIONS}, False, group="jg") == on_disk
    assert committed_on_disk(logs / ".kafkatier-serve") == {
        ("jg", TOPIC, p): PER_PARTITION for p in range(PARTITIONS)
    }
    with serve(logs, **GROUPS) as port:
        assert java_rows(port, {TOPIC: PARTITIONS}, False, group="jg") == []


@pytest.mark.skipif(JAVA_MISSING is not None, reason=JAVA_MISSING or "")
def test_two_java_consumers_split_a_group_then_one_takes_over(
    tmp_path: Path, serve: Any
) -> None:
    """Two members of Apache Kafka's Java client join one group within the initial rebalance
    delay and split its partitions (each reads its share and commits); records appended later
    are read by one new member alone, from the group's commits: every record exactly once."""
    logs = tmp_path / "logs"
    write_topic(logs)
    first = disk_rows(logs, TOPIC)
    delay = {**GROUPS, "group__initial__rebalance__delay__ms": "3000"}
    with serve(logs, **delay) as port, ThreadPoolExecutor(2) as pool:
        members = [pool.submit(java_rows, port, {TOPIC: PARTITIONS}, False, group="j2")
                   for _ in range(2)]  # fmt: skip
        shares = [m.result() for m in members]
    assert sorted(shares[0] + shares[1]) == first
    held = [{r[1] for r in share} for share in shares]
    assert held[0] and held[1] and not held[0] & held[1]  # split, not one member alone
    write_topic(logs, first=PER_PARTITION)  # more records, at the next offsets
    later = [r for r in disk_rows(logs, TOPIC) if r not in first]
    assert len(later) == len(first)
    with serve(logs, **GROUPS) as port:
        assert java_rows(port, {TOPIC: PARTITIONS}, False, group="j2") == later


@pytest.mark.skipif(JAVA_MISSING is not None, reason=JAVA_MISSING or "")
def test_the_java_admin_client_sees_topics_offsets_and_groups(tmp_path: Path, serve: Any) -> None:
    """What Kafka's own tools (kafka-topics.sh, kafka-configs.sh, kafka-consumer-groups.sh)
    and the web UIs ask through Apache Kafka's Admin client (tests/serve/clients/JavaAdmin.java):
    the cluster, topics, a topic's id and configs, its offsets (earliest, latest, max
    timestamp), the groups, a group's state and its committed offsets."""
    import json

    from kafkatier.tiering.metadata.identity import topic_id_of

    logs = tmp_path / "logs"
    write_topic(logs)
    with serve(logs, **GROUPS) as port:
        java_rows(port, {TOPIC: PARTITIONS}, False, group="ag")  # commits, then leaves
        out = subprocess.run(java_command("JavaAdmin", port, "-topic", TOPIC, "-group", "ag"),
                             capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout)
    every = {str(p): PER_PARTITION for p in range(PARTITIONS)}
    assert found["cluster"][1] == [0] and found["cluster"][0]
    assert (found["topics"], found["partitions"]) == ([TOPIC], PARTITIONS)
    assert found["topicId"] == topic_id_of(logs / f"{TOPIC}-0")
    assert found["configs"] == ["delete", "1073741824"]  # Kafka's defaults
    assert found["earliest"] == dict.fromkeys(every, 0) and found["latest"] == every
    assert found["maxTimestamp"] == dict.fromkeys(every, PER_PARTITION - 1)
    assert (found["groups"], found["group"]) == (["ag"], ["Empty", 0])
    assert found["committed"] == every


def test_an_unknown_group_has_offset_minus_one(tmp_path: Path, serve: Any) -> None:
    from confluent_kafka import OFFSET_INVALID, Consumer
    from confluent_kafka import TopicPartition as CTP
    from kafka import KafkaConsumer, TopicPartition

    write_topic(tmp_path)
    with serve(tmp_path, **GROUPS) as port:
        kp = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", group_id="nobody")
        cc = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": "nobody"})
        try:
            assert kp.committed(TopicPartition(TOPIC, 0)) is None  # kafka-python's -1
            [found] = cc.committed([CTP(TOPIC, 1)], timeout=10)
            assert found.offset == OFFSET_INVALID and found.error is None
        finally:
            kp.close()
            cc.close()
    assert not (tmp_path / ".kafkatier-serve").exists()  # created by the first commit only


@pytest.mark.parametrize("restart", [False, True])
def test_a_topic_created_again_has_no_committed_offsets(
    tmp_path: Path, serve: Any, restart: bool
) -> None:
    """A group's commits on a topic deleted (its directories removed) and created again under
    its name: the new topic's offsets are not the old one's, and resuming at them skipped its
    first records (offsets keyed by name alone). Kafka deletes a deleted topic's commits; here
    a commit of another incarnation is none (-1), while serve runs or after a restart, and the
    group's next commit on the new topic is its own."""
    import shutil

    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    write_topic(tmp_path)
    tp = TopicPartition(TOPIC, 0)

    def consumer(port: int) -> KafkaConsumer:
        return KafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", group_id="again",
                             enable_auto_commit=False)  # fmt: skip

    with serve(tmp_path, **GROUPS) as port:
        c = consumer(port)
        try:
            c.commit({tp: OffsetAndMetadata(7, "", -1)})
            assert c.committed(tp) == 7
            if not restart:
                for p in range(PARTITIONS):
                    shutil.rmtree(tmp_path / f"{TOPIC}-{p}")
                write_topic(tmp_path, count=5)
                time.sleep(1.1)  # past the catalog's racy window
                assert c.committed(tp) is None
        finally:
            c.close()
    if restart:
        for p in range(PARTITIONS):
            shutil.rmtree(tmp_path / f"{TOPIC}-{p}")
        write_topic(tmp_path, count=5)
    with serve(tmp_path, **GROUPS) as port:
        c = consumer(port)
        try:
            assert c.committed(tp) is None
            c.commit({tp: OffsetAndMetadata(2, "", -1)})
            assert c.committed(tp) == 2
        finally:
            c.close()


VANISHING = """
import sys, time
from kafka import KafkaConsumer
c = KafkaConsumer("g", bootstrap_servers=sys.argv[1], group_id="expire", session_timeout_ms=1000,
                  heartbeat_interval_ms=200, enable_auto_commit=False)
while len(c.assignment()) != 2:
    c.poll(timeout_ms=200)
print("assigned", flush=True)
time.sleep(600)
"""


def test_a_session_timeout_expels_a_vanished_member(tmp_path: Path, serve: Any) -> None:
    """A member killed without LeaveGroup (SIGKILL) stops heartbeating; after its
    session.timeout.ms (1 s) the coordinator removes it and the other member gets all."""
    write_topic(tmp_path)
    with serve(tmp_path, **GROUPS) as port:
        a = ConfluentMember(port, "expire", [TOPIC])
        proc = subprocess.Popen([sys.executable, "-c", VANISHING, f"127.0.0.1:{port}"],
                                stdout=subprocess.PIPE, text=True)  # fmt: skip
        try:
            poll_until([a], lambda _: len(a.assignment()) == 2, "a 2/2 split")
            assert proc.stdout is not None
            with selectors.DefaultSelector() as waiting:  # select() takes no descriptor >= 1024
                waiting.register(proc.stdout, selectors.EVENT_READ)
                assert waiting.select(20), "the vanishing member never got its assignment"
            assert proc.stdout.readline() == "assigned\n"
            assert len(described(port, "expire").members) == 2
            proc.kill()
            proc.wait(10)
            killed = time.monotonic()
            poll_until([a], lambda _: a.assignment() == ALL, "the vanished member's expiry")
            took = time.monotonic() - killed
            assert took >= 0.7, f"expelled after {took:.2f} s, before its 1 s session ended"
            assert len(described(port, "expire").members) == 1
        finally:
            proc.kill()
            proc.wait(10)
            a.close()


def test_a_static_member_restarts_without_a_rebalance(tmp_path: Path, serve: Any) -> None:
    """KIP-345 with librdkafka: two members with ``group.instance.id``; one closes (a static
    member sends no LeaveGroup) and a new process of the same instance id joins within the
    session: it gets the same partitions back and the other member is never revoked."""
    from confluent_kafka import Consumer

    events: dict[str, list[str]] = {"a": [], "b": [], "a2": []}

    def member(name: str, instance: str) -> Any:
        consumer = Consumer({
            "bootstrap.servers": f"127.0.0.1:{port}", "group.id": "static",
            "group.instance.id": instance, "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 200, "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        })  # fmt: skip
        consumer.subscribe(
            [TOPIC],
            on_assign=lambda _c, parts: events[name].append(f"assign {len(parts)}"),
            on_revoke=lambda _c, parts: events[name].append(f"revoke {len(parts)}"),
        )
        return consumer

    def parts(consumer: Any) -> set[tuple[str, int]]:
        return {(tp.topic, tp.partition) for tp in consumer.assignment()}

    def poll_all(consumers: list[Any], done: Any, what: str) -> None:
        deadline = time.monotonic() + 20
        while not done():
            assert time.monotonic() < deadline, f"timed out waiting for {what}: {events}"
            for c in consumers:
                c.poll(0.1)

    write_topic(tmp_path)
    with serve(tmp_path, **GROUPS) as port:
        a, b = member("a", "a"), member("b", "b")
        a2 = None
        try:
            poll_all([a, b], lambda: len(parts(a)) == len(parts(b)) == PARTITIONS // 2,
                     "a 2/2 split")  # fmt: skip
            before, b_before, b_events = parts(a), parts(b), list(events["b"])
            old_ids = {m.group_instance_id: m.member_id for m in described(port, "static").members}
            a.close()  # static: no LeaveGroup
            a2 = member("a2", "a")
            poll_all([a2, b], lambda: parts(a2) == before, "the restarted member's partitions")
            for _ in range(10):  # a while longer: a rebalance would revoke b now
                b.poll(0.1)
                a2.poll(0.1)
            assert events["b"] == b_events and parts(b) == b_before  # b never rebalanced
            now = {m.group_instance_id: m.member_id for m in described(port, "static").members}
            assert set(now) == {"a", "b"} and now["b"] == old_ids["b"]
            assert now["a"] != old_ids["a"]  # the new process holds a new member id
        finally:
            b.close()
            if a2 is not None:
                a2.close()
