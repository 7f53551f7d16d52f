"""Unmodified Kafka clients reading from ``kafkatier serve``: each helper consumes whole
partitions from the beginning (assign + seek, no group) until it reaches each partition's end
for its isolation level, and returns the records as rows comparable with the independent
readers of tests/sink/source/test_datasource.py:
(topic, partition, offset, key, value, timestamp ms, timestamp type, headers).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Row = tuple[str, int, int, bytes | None, bytes | None, int, int, tuple[tuple[str, bytes], ...]]
DEADLINE_S = 30.0
KCAT = shutil.which("kcat")


def _isolation(committed: bool) -> str:
    return "read_committed" if committed else "read_uncommitted"


Topics = dict[str, int]
"""Topic -> partition count: what a helper consumes, all of it with one consumer."""


@dataclass(frozen=True)
class ClientAuth:
    """How a client connects: the security protocol, TLS files, SASL mechanism and user; as each
    client library spells it."""

    protocol: str = "PLAINTEXT"
    ca: Path | None = None
    cert: Path | None = None
    key: Path | None = None
    mechanism: str | None = None
    user: str | None = None
    password: str | None = None

    def librdkafka(self) -> dict[str, str]:
        conf = {"security.protocol": self.protocol}
        files = {"ssl.ca.location": self.ca, "ssl.certificate.location": self.cert,
                 "ssl.key.location": self.key}  # fmt: skip
        conf.update({k: str(v) for k, v in files.items() if v is not None})
        if self.mechanism:
            conf.update({"sasl.mechanisms": self.mechanism, "sasl.username": self.user or "",
                         "sasl.password": self.password or ""})  # fmt: skip
        return conf

    def kafka_python(self) -> dict[str, Any]:
        conf: dict[str, Any] = {"security_protocol": self.protocol, "ssl_cafile": self.ca,
                                "ssl_certfile": self.cert, "ssl_keyfile": self.key}  # fmt: skip
        if self.mechanism:
            conf.update(sasl_mechanism=self.mechanism, sasl_plain_username=self.user,
                        sasl_plain_password=self.password)  # fmt: skip
        return {k: str(v) if isinstance(v, Path) else v for k, v in conf.items()}

    def aiokafka(self) -> dict[str, Any]:
        from aiokafka.helpers import create_ssl_context

        conf: dict[str, Any] = {"security_protocol": self.protocol}
        if self.protocol.endswith("SSL"):
            conf["ssl_context"] = create_ssl_context(
                cafile=self.ca and str(self.ca), certfile=self.cert and str(self.cert),
                keyfile=self.key and str(self.key))  # fmt: skip
        if self.mechanism:
            conf.update(sasl_mechanism=self.mechanism, sasl_plain_username=self.user,
                        sasl_plain_password=self.password)  # fmt: skip
        return conf

    def java(self) -> list[str]:
        """``-X`` settings of tests/serve/clients/JavaConsume.java, in Kafka's names (PEM
        files: Kafka 2.7+; the client's key and certificate inline)."""
        conf = {"security.protocol": self.protocol}
        if self.ca is not None:
            conf.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.ca)})
        if self.cert is not None and self.key is not None:
            conf.update({"ssl.keystore.type": "PEM", "ssl.keystore.key": self.key.read_text(),
                         "ssl.keystore.certificate.chain": self.cert.read_text()})  # fmt: skip
        if self.mechanism:
            module = ("plain.PlainLoginModule" if self.mechanism == "PLAIN"
                      else "scram.ScramLoginModule")  # fmt: skip
            conf.update({"sasl.mechanism": self.mechanism, "sasl.jaas.config":
                         f"org.apache.kafka.common.security.{module} required "
                         f'username="{self.user}" password="{self.password}";'})  # fmt: skip
        return [arg for k, v in conf.items() for arg in ("-X", f"{k}={v}")]

    def kcat(self) -> list[str]:
        return [arg for k, v in self.librdkafka().items() for arg in ("-X", f"{k}={v}")]


PLAINTEXT = ClientAuth()


def record_row(r: Any) -> Row:
    """A kafka-python or aiokafka ConsumerRecord as a row (they have the same fields)."""
    return (r.topic, r.partition, r.offset, r.key, r.value, r.timestamp, r.timestamp_type,
            tuple(r.headers or ()))  # fmt: skip


def kafka_python_rows(port: int, topics: Topics, committed: bool,
                      auth: ClientAuth = PLAINTEXT) -> list[Row]:  # fmt: skip
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", group_id=None,
                             enable_auto_commit=False, isolation_level=_isolation(committed),
                             **auth.kafka_python())  # fmt: skip
    try:
        tps = [TopicPartition(t, p) for t, n in topics.items() for p in range(n)]
        consumer.assign(tps)
        consumer.seek_to_beginning()
        ends = consumer.end_offsets(tps)
        rows: list[Row] = []
        deadline = time.monotonic() + DEADLINE_S
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, "kafka-python did not reach the end offsets"
            for records in consumer.poll(timeout_ms=500).values():
                rows.extend(map(record_row, records))
        return sorted(rows)
    finally:
        consumer.close()


def confluent_rows(port: int, topics: Topics, committed: bool,
                   auth: ClientAuth = PLAINTEXT) -> list[Row]:  # fmt: skip
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({
        "bootstrap.servers": f"127.0.0.1:{port}", "group.id": "serve-tests",
        "enable.auto.commit": False, "enable.partition.eof": True,
        "isolation.level": _isolation(committed), **auth.librdkafka(),
    })
    try:
        consumer.assign([TopicPartition(t, p, -2) for t, n in topics.items() for p in range(n)])
        rows: list[Row] = []
        at_end: set[tuple[str, int]] = set()
        deadline = time.monotonic() + DEADLINE_S
        while len(at_end) < sum(topics.values()):
            assert time.monotonic() < deadline, "confluent-kafka did not reach every end"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                at_end.add((msg.topic(), msg.partition()))
                continue
            ts_type, ts = msg.timestamp()
            rows.append((msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value(), ts,
                         ts_type - 1, tuple(msg.headers() or ())))  # fmt: skip
        return sorted(rows)
    finally:
        consumer.close()


def aiokafka_rows(port: int, topics: Topics, committed: bool,
                  auth: ClientAuth = PLAINTEXT) -> list[Row]:  # fmt: skip
    return asyncio.run(_aiokafka_rows(port, topics, committed, auth))


async def _aiokafka_rows(port: int, topics: Topics, committed: bool,
                         auth: ClientAuth) -> list[Row]:  # fmt: skip
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", group_id=None,
                                enable_auto_commit=False, isolation_level=_isolation(committed),
                                **auth.aiokafka())  # fmt: skip
    await consumer.start()
    try:
        tps = [TopicPartition(t, p) for t, n in topics.items() for p in range(n)]
        consumer.assign(tps)
        await consumer.seek_to_beginning()
        ends = await consumer.end_offsets(tps)
        rows: list[Row] = []
        deadline = time.monotonic() + DEADLINE_S
        while any([await consumer.position(tp) < ends[tp] for tp in tps]):
            assert time.monotonic() < deadline, "aiokafka did not reach the end offsets"
            for records in (await consumer.getmany(timeout_ms=500)).values():
                rows.extend(map(record_row, records))
        return sorted(rows)
    finally:
        await consumer.stop()


def kcat_rows(port: int, topics: Topics, committed: bool,
              auth: ClientAuth = PLAINTEXT) -> list[Row]:  # fmt: skip
    """kcat's JSON envelopes: keys, values and header values come back as text (UTF-8 data
    only)."""
    rows: list[Row] = []
    for line in _kcat(port, topics, committed, ["-J", *auth.kcat()]):
        m = json.loads(line)
        raw = m.get("headers") or []
        headers = tuple((raw[i], raw[i + 1].encode()) for i in range(0, len(raw), 2))
        log_append = int(m["tstype"] == "logappend")
        rows.append((m["topic"], m["partition"], m["offset"], _utf8(m["key"]),
                     _utf8(m["payload"]), m["ts"], log_append, headers))
    return sorted(rows)


def kcat_offsets(port: int, topics: Topics, committed: bool) -> list[tuple[str, int, int]]:
    """(topic, partition, offset) of every record kcat consumes (any bytes: no JSON)."""
    rows = [line.split(" ") for line in _kcat(port, topics, committed, ["-f", "%t %p %o\\n"])]
    return sorted((t, int(p), int(o)) for t, p, o in rows)


def _kcat(port: int, topics: Topics, committed: bool, output: list[str]) -> list[str]:
    """kcat's output lines consuming every topic from the beginning to its end (-G is a group:
    kcat's plain -C takes one topic, so one run per topic)."""
    assert KCAT is not None
    lines: list[str] = []
    for topic in topics:
        out = subprocess.run(
            [KCAT, "-b", f"127.0.0.1:{port}", "-C", "-t", topic, "-o", "beginning", "-e", "-q",
             *output, "-X", f"isolation.level={_isolation(committed)}"],
            capture_output=True, timeout=DEADLINE_S, check=True, text=True,
        )  # fmt: skip
        lines.extend(out.stdout.splitlines())
    return lines


SARAMA_SOURCE = Path(__file__).parent / "clients" / "sarama_consume.go"
SARAMA_GOPATH = Path("/usr/share/gocode")  # where Debian's golang-*-dev packages put sources
SARAMA_MISSING = (
    None if shutil.which("go") and (SARAMA_GOPATH / "src/github.com/Shopify/sarama").is_dir()
    else "sarama (Go) is not installed (apt-get install golang-go golang-github-shopify-sarama-dev)"
)  # fmt: skip


@functools.cache
def sarama_binary() -> Path:
    """tests/serve/clients/sarama_consume.go built once for each version of its source, kept
    in the temp dir under the source's hash (seconds to build with Go's cache)."""
    digest = hashlib.sha256(SARAMA_SOURCE.read_bytes()).hexdigest()[:16]
    out = Path(tempfile.gettempdir()) / f"kafkatier-sarama-{digest}"
    if not out.exists():
        env = {**os.environ, "GO111MODULE": "off", "GOPATH": str(SARAMA_GOPATH), "GOFLAGS": ""}
        partial = out.with_name(f"{out.name}.{os.getpid()}.tmp")
        subprocess.run(["go", "build", "-o", str(partial), str(SARAMA_SOURCE)], env=env,
                       check=True, capture_output=True, timeout=600)  # fmt: skip
        os.replace(partial, out)  # whole, whoever builds it first
    return out


def sarama_rows(port: int, topics: Topics, committed: bool, group: str = "") -> list[Row]:
    """sarama's records (tests/serve/clients/sarama_consume.go), read partition by partition,
    or with ``group`` as one member of that consumer group, which commits what it read when it
    leaves. sarama does not tell a producer's timestamp from a broker's, so the type is -1
    (callers compare without it)."""
    spec = ",".join(f"{t}:{n}" for t, n in topics.items())
    out = subprocess.run(
        [str(sarama_binary()), "-broker", f"127.0.0.1:{port}", "-topics", spec,
         *(["-committed"] if committed else []), *(["-group", group] if group else [])],
        capture_output=True, timeout=DEADLINE_S * 4, text=True,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    rows: list[Row] = []
    for line in out.stdout.splitlines():
        m = json.loads(line)
        headers = tuple((h["key"], _b64(h["value"]) or b"") for h in m["headers"] or ())
        rows.append((m["topic"], m["partition"], m["offset"], _b64(m["key"]), _b64(m["value"]),
                     m["timestamp"], -1, headers))  # fmt: skip
    return sorted(rows)


JAVA_SOURCES = sorted((Path(__file__).parent / "clients").glob("*.java"))
_PYSPARK_JARS = ("lz4-java-", "snappy-java-", "zstd-jni-", "slf4j-api-")
"""kafka-clients' own dependencies, taken from PySpark's jars."""


def _java_missing() -> str | None:
    from clients.kafka_clients_jar import JAR

    if not shutil.which("javac"):
        return "Apache Kafka's Java client: no javac (a JDK 17+)"
    if not JAR.is_file():
        return f"Apache Kafka's Java client is not at {JAR} (make java-client fetches it)"
    return None


JAVA_MISSING = _java_missing()


@functools.cache
def java_classpath() -> str:
    """tests/serve/clients/*.java compiled once for each version of their sources (in the temp
    dir under the sources' hash), then kafka-clients and its dependencies."""
    import pyspark
    from clients.kafka_clients_jar import JAR

    jars = sorted(Path(pyspark.__file__).parent.joinpath("jars").glob("*.jar"))
    deps = [str(j) for j in jars if j.name.startswith(_PYSPARK_JARS)]
    classpath = os.pathsep.join([str(JAR), *deps])
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in JAVA_SOURCES)).hexdigest()[:16]
    out = Path(tempfile.gettempdir()) / f"kafkatier-java-clients-{digest}"
    if not out.is_dir():
        partial = out.with_name(f"{out.name}.{os.getpid()}.tmp")
        subprocess.run(["javac", "-d", str(partial), "-cp", classpath,
                        *map(str, JAVA_SOURCES)],
                       check=True, capture_output=True, timeout=300)  # fmt: skip
        with contextlib.suppress(OSError):  # whole, whoever compiles it first
            os.replace(partial, out)
    return os.pathsep.join([str(out), classpath])


def java_command(main: str, port: int, *args: str) -> list[str]:
    """The command running tests/serve/clients/``main``.java against this server."""
    return ["java", "-cp", java_classpath(), main, "-broker", f"127.0.0.1:{port}", *args]


def java_consume(port: int, topics: Topics, committed: bool, auth: ClientAuth = PLAINTEXT,
                 group: str = "") -> subprocess.CompletedProcess[str]:  # fmt: skip
    """One run of tests/serve/clients/JavaConsume.java (its output, its exit status)."""
    spec = ",".join(f"{t}:{n}" for t, n in topics.items())
    return subprocess.run(
        java_command("JavaConsume", port, "-topics", spec, *(["-committed"] if committed else []),
                     *(["-group", group] if group else []), *auth.java()),
        capture_output=True, timeout=DEADLINE_S * 4, text=True,
    )  # fmt: skip


def java_rows(port: int, topics: Topics, committed: bool, auth: ClientAuth = PLAINTEXT,
              group: str = "") -> list[Row]:  # fmt: skip
    """Apache Kafka's Java consumer's records (tests/serve/clients/JavaConsume.java), the
    partitions assigned and read from the beginning, or with ``group`` as one member of that
    consumer group, which commits what it read when it leaves."""
    out = java_consume(port, topics, committed, auth, group)
    assert out.returncode == 0, out.stderr
    return sorted(map(java_row, out.stdout.splitlines()))


def java_row(line: str) -> Row:
    """One record line of JavaConsume.java / JavaMember.java as a row."""
    m = json.loads(line)
    headers = tuple((h["key"], _b64(h["value"])) for h in m["headers"])
    return (m["topic"], m["partition"], m["offset"], _b64(m["key"]), _b64(m["value"]),
            m["timestamp"], m["timestampType"], headers)  # fmt: skip


def _b64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def _utf8(text: str | None) -> bytes | None:
    return None if text is None else text.encode()



def fetch_one(
    sock: Any, topic: str, offset: int, max_wait_ms: int = 0, partition: int = 0
) -> Any:
    """A Fetch v12 of ``partition`` of ``topic`` from ``offset`` over ``sock`` (kafka-python's
    protocol classes, sessionless, 1 MiB), and the response's one partition."""
    from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse
    from test_connection import read_frame

    part = FetchRequest.FetchTopic.FetchPartition
    fetch = FetchRequest(version=12, replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1,
                         max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
                         topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
                             part(partition=partition, current_leader_epoch=-1,
                                  fetch_offset=offset,
                                  log_start_offset=-1, partition_max_bytes=1 << 20)])],
                         forgotten_topics_data=[], rack_id="")  # fmt: skip
    fetch.with_header(correlation_id=5)
    sock.sendall(bytes(fetch.encode(version=12, header=True, framed=True)))
    answer = FetchResponse.decode(read_frame(sock), version=12, header=True)
    return answer.responses[0].partitions[0]

def list_offset_one(sock: Any, topic: str, partition: int, timestamp: int = -2) -> Any:
    """A ListOffsets v5 of one partition (``timestamp`` -2: earliest) over ``sock``
    (kafka-python's protocol classes), and the response's one partition."""
    from kafka.protocol.consumer.offsets import ListOffsetsRequest, ListOffsetsResponse
    from test_connection import read_frame

    topic_class = ListOffsetsRequest.ListOffsetsTopic
    request = ListOffsetsRequest(version=5, replica_id=-1, isolation_level=0, topics=[
        topic_class(name=topic, partitions=[topic_class.ListOffsetsPartition(
            partition_index=partition, current_leader_epoch=-1, timestamp=timestamp,
        )])])  # fmt: skip
    request.with_header(correlation_id=6)
    sock.sendall(bytes(request.encode(version=5, header=True, framed=True)))
    answer = ListOffsetsResponse.decode(read_frame(sock), version=5, header=True)
    return answer.topics[0].partitions[0]


@contextlib.contextmanager
def raw_socket(port: int) -> Iterator[Any]:
    import socket

    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        yield sock
    finally:
        sock.close()
