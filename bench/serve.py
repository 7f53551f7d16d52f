"""``kafkatier serve`` throughput: one confluent-kafka (librdkafka) consumer reads a whole lz4
topic from a ``kafkatier serve`` process (timed to its last record: see :func:`consume`), next
to the same segment bytes read straight from the files in the same run (the ceiling: no
network, no protocol), with the server's CPU seconds per GB of segment bytes served. A raw
fetch loop (kafka-python's protocol classes over a socket, records left compressed) shows what
the server delivers when the client does not decompress and build a Python object per record,
and Apache Kafka's Java consumer (tests/serve/clients/JavaConsume.java, when ``make
java-client`` has fetched kafka-clients; timed inside the JVM from its first poll to the last
record) what a consumer does that decompresses every record without Python.
Rounds alternate them; the page cache is warm for all.

Usage: ``.venv/bin/python bench/serve.py [--mib 256] [--partitions 4] [--rounds 3]
[--baseline DIR]`` (prints the command, the figures and the ratio). ``--baseline DIR`` starts a
second server from another copy of the sources (DIR holds ``kafkatier/<package>/...``, e.g.
``git archive`` of an older commit; it runs with ``PYTHONPATH=DIR``) and alternates the two in
every round: a change to the server is judged side by side. Local segments only:
bench/serve_remote.py measures the remote tier.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "tests" / "serve")]

from serve_clients import JAVA_MISSING, java_command  # noqa: E402

KAFKATIER = Path(sys.executable).with_name("kafkatier")
TOPIC = "bench"
TICKS = os.sysconf("SC_CLK_TCK")


def write_topic(root: Path, mib: int, partitions: int, configs: tuple[str, ...] = ()) -> Path:
    """~``mib`` MiB of 1 KiB values (half random bytes, half repeated: lz4 halves it), with the
    topic settings ``configs`` (``key=value``)."""
    rows = mib * 1024
    rng = np.random.default_rng(7)
    noise = rng.integers(0, 256, size=(rows, 512), dtype=np.uint8)
    values = [bytes(row) + b"v" * 512 for row in noise]
    keys = [b"key-%d" % i for i in range(rows)]
    source = root / "in.parquet"
    pq.write_table(pa.table({"key": keys, "value": values}), source)
    logs = root / "logs"
    settings = [arg for kv in configs for arg in ("--config", kv)]
    subprocess.run([str(KAFKATIER), "produce", str(logs), "--topic", TOPIC, "--input",
                    str(source), "--partitions", str(partitions), "--compression", "lz4",
                    *settings], check=True, stdout=subprocess.DEVNULL)  # fmt: skip
    return logs


def segment_bytes(logs: Path) -> int:
    return sum(f.stat().st_size for f in logs.glob(f"{TOPIC}-*/*.log"))


def read_files(logs: Path) -> float:
    start = time.perf_counter()
    for path in sorted(logs.glob(f"{TOPIC}-*/*.log")):
        with open(path, "rb") as src:
            while src.read(1 << 20):
                pass
    return time.perf_counter() - start


def consume(port: int, partitions: int) -> tuple[float, int]:
    """Seconds from the assignment to the last record, and the records. Not to each
    partition's end-of-partition event: librdkafka raises it only on a fetch that comes back
    empty, which any broker holds for ``fetch.wait.max.ms`` (500 ms) at the end of the log, so
    a whole run would count half a second of waiting as reading. The records come in batch
    calls of 10,000 with a 20 ms timeout (the last batch waits for it)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": "bench",
                         "enable.auto.commit": False, "enable.partition.eof": True})  # fmt: skip
    start = time.perf_counter()
    consumer.assign([TopicPartition(TOPIC, p, -2) for p in range(partitions)])
    done, records, last = 0, 0, start
    while done < partitions:
        # In batches (poll() per record is Python-bound), with a short timeout: librdkafka
        # holds a batch call until it has the whole batch or the timeout ends, so the last,
        # partial batch of the topic came only after the timeout (a 1 s one added up to 1 s).
        batch = consumer.consume(10_000, 0.02)
        for msg in batch:
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                done += 1
            else:
                records += 1
        if any(not msg.error() for msg in batch):
            last = time.perf_counter()
    consumer.close()
    return last - start, records


def java_consume(port: int, partitions: int, records: int) -> float:
    """Seconds the Java consumer took from its first poll to the last of ``records``."""
    import json

    out = subprocess.run(java_command("JavaConsume", port, "-topics", f"{TOPIC}:{partitions}",
                                      "-count", str(records), "-quiet"),
                         capture_output=True, text=True, check=True)  # fmt: skip
    found = json.loads(out.stdout.splitlines()[-1])
    assert found["records"] == records, found
    return float(found["seconds"])


def fetch_request(
    topic: str, offsets: dict[int, int], correlation: int, *, max_wait_ms: int = 0,
    max_bytes: int = 50 << 20,
) -> bytes:  # fmt: skip
    """A framed Fetch v12 request (kafka-python's protocol classes) of ``topic``'s partitions
    from their offsets (partition -> fetch offset), at most 1 MiB a partition."""
    from kafka.protocol.consumer.fetch import FetchRequest

    part = FetchRequest.FetchTopic.FetchPartition
    wanted = FetchRequest.FetchTopic(topic=topic, partitions=[
        part(partition=p, current_leader_epoch=-1, fetch_offset=o, log_start_offset=-1,
             partition_max_bytes=1 << 20)
        for p, o in offsets.items()
    ])  # fmt: skip
    request = FetchRequest(version=12, replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1,
                           max_bytes=max_bytes, isolation_level=0, session_id=0,
                           session_epoch=-1, topics=[wanted], forgotten_topics_data=[],
                           rack_id="")  # fmt: skip
    request.with_header(correlation_id=correlation)
    return bytes(request.encode(version=12, header=True, framed=True))


def raw_fetch(port: int, partitions: int) -> float:
    """Fetch v12 requests for every unfinished partition until each reaches its high
    watermark; the next offset is the last batch's last offset + 1 (headers only)."""
    from kafka.protocol.consumer.fetch import FetchResponse

    start = time.perf_counter()
    offsets = dict.fromkeys(range(partitions), 0)
    done: set[int] = set()
    with socket.create_connection(("127.0.0.1", port)) as sock:
        correlation = 0
        while len(done) < partitions:
            correlation += 1
            unfinished = {p: o for p, o in offsets.items() if p not in done}
            sock.sendall(fetch_request(TOPIC, unfinished, correlation))
            size = int.from_bytes(_recv(sock, 4), "big")
            response = FetchResponse.decode(_recv(sock, size), version=12, header=True)
            for data in response.responses[0].partitions:
                p = data.partition_index
                offsets[p] = _next_offset(data.records, offsets[p])
                if offsets[p] >= data.high_watermark:
                    done.add(p)
    return time.perf_counter() - start


def _recv(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise ConnectionError("server closed the connection")
        buf += chunk
    return bytes(buf)


def _next_offset(records: bytes | None, offset: int) -> int:
    """One past the last batch's last offset (v2 headers: baseOffset, then lastOffsetDelta)."""
    pos = 0
    data = records or b""
    while pos + 27 <= len(data):
        base = int.from_bytes(data[pos : pos + 8], "big")
        length = int.from_bytes(data[pos + 8 : pos + 12], "big")
        if pos + 12 + length > len(data):
            break
        offset = base + int.from_bytes(data[pos + 23 : pos + 27], "big") + 1
        pos += 12 + length
    return offset


def cpu_seconds(pid: int) -> float:
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def serve(
    logs: Path, root: Path, sources: Path | None = None, extra: str = "",
    path: tuple[Path, ...] = (),
) -> tuple[subprocess.Popen[bytes], int]:  # fmt: skip
    """A ``kafkatier serve`` process (of the sources in ``sources``, if given; ``extra``:
    more lines of its properties file; ``path``: more of its ``PYTHONPATH``) and its port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = root / f"serve-{port}.properties"
    config.write_text(f"log.dirs={logs}\nlisteners=PLAINTEXT://127.0.0.1:{port}\n"
                      f"offsets.log.dir={root / f'offsets-{port}'}\n{extra}")  # fmt: skip
    entries = [str(d) for d in ((sources,) if sources is not None else ()) + path]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(entries)) if entries else None
    proc = subprocess.Popen([str(KAFKATIER), "serve", "--config", str(config),
                             "--log-level", "warning"], env=env)  # fmt: skip
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, port
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("kafkatier serve did not listen")


def options(mib: int) -> argparse.ArgumentParser:
    """The options of both serve benchmarks (this one and bench/serve_remote.py)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=mib)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", type=Path, default=None,
                        help="another copy of the sources to serve beside this one")
    return parser


Server = tuple[str, "subprocess.Popen[bytes]", int]


def rounds(servers: list[Server], count: int, one: Callable[[str, int, int, int], None]) -> None:
    """``one(label, pid, port, round)`` for each server in each round, which goes first
    alternating; every server stopped at the end."""
    try:
        for n in range(count):
            for name, proc, port in servers if n % 2 == 0 else servers[::-1]:
                one(f"round {n + 1}, {name}", proc.pid, port, n)
    finally:
        for _, proc, _ in servers:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)


def main() -> None:
    args = options(mib=256).parse_args()
    print("command:", " ".join([sys.executable, *sys.argv]))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        logs = write_topic(root, args.mib, args.partitions)
        size = segment_bytes(logs)
        servers: list[Server] = [("this", *serve(logs, root))]
        if args.baseline is not None:
            servers.append(("baseline", *serve(logs, root, args.baseline)))
        read_files(logs)  # warm the page cache
        rounds(servers, args.rounds,
               lambda label, pid, port, _: measure(label, logs, size, pid, port, args.partitions))


@dataclass(frozen=True)
class Clients:
    """One round of the clients against one server: seconds, records, server CPU seconds."""

    confluent: float
    records: int
    confluent_cpu: float
    raw: float
    raw_cpu: float
    java: float | None
    java_cpu: float

    def figures(self, size: int) -> str:
        """MB/s and the server's CPU per GB of ``size`` bytes, for each client."""
        gb = size / 1e9
        java = ("" if self.java is None else f", Java {size / self.java / 1e6:.0f} MB/s (server "
                f"CPU {self.java_cpu / gb:.2f} s/GB)")  # fmt: skip
        return (f"confluent-kafka {size / self.confluent / 1e6:.0f} MB/s (server CPU "
                f"{self.confluent_cpu / gb:.2f} s/GB), raw fetch {size / self.raw / 1e6:.0f} "
                f"MB/s (server CPU {self.raw_cpu / gb:.2f} s/GB){java}")  # fmt: skip


def both_clients(pid: int, port: int, partitions: int) -> Clients:
    """confluent-kafka, the raw fetch loop and the Java consumer (when installed), each with
    the server's CPU seconds."""
    before = cpu_seconds(pid)
    took, records = consume(port, partitions)
    middle = cpu_seconds(pid)
    raw = raw_fetch(port, partitions)
    after = cpu_seconds(pid)
    java = None if JAVA_MISSING else java_consume(port, partitions, records)
    return Clients(took, records, middle - before, raw, after - middle, java,
                   cpu_seconds(pid) - after)  # fmt: skip


def measure(label: str, logs: Path, size: int, pid: int, port: int, partitions: int) -> None:
    """One round against one server: the files, confluent-kafka, the raw fetch loop."""
    files = read_files(logs)
    got = both_clients(pid, port, partitions)
    print(f"{label}: {size / 1e6:.0f} MB of lz4 segments, {got.records} records: "
          f"{got.figures(size)}, files {size / files / 1e6:.0f} MB/s; confluent/files "
          f"{files / got.confluent:.1%}, raw/files {files / got.raw:.1%}"
          + ("" if got.java is None else f", Java/files {files / got.java:.1%}"), flush=True)


if __name__ == "__main__":
    main()
