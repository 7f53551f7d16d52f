"""``kafkatier serve`` throughput: one confluent-kafka (librdkafka) consumer reads a whole lz4
topic from a ``kafkatier serve`` process, next to the same segment bytes read straight from the
files in the same run (the ceiling: no network, no protocol), with the server's CPU seconds per
GB of segment bytes served. Rounds alternate the two; the page cache is warm for both.

Usage: ``.venv/bin/python bench/serve.py [--mib 256] [--partitions 4] [--rounds 3]``
(prints the command, the figures and the ratio). Local segments only: the remote tier is not
measured yet.
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
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

KAFKATIER = Path(sys.executable).with_name("kafkatier")
TOPIC = "bench"
TICKS = os.sysconf("SC_CLK_TCK")


def write_topic(root: Path, mib: int, partitions: int) -> Path:
    """~``mib`` MiB of 1 KiB values (half random bytes, half repeated: lz4 halves it)."""
    rows = mib * 1024
    rng = np.random.default_rng(7)
    noise = rng.integers(0, 256, size=(rows, 512), dtype=np.uint8)
    values = [bytes(row) + b"v" * 512 for row in noise]
    keys = [b"key-%d" % i for i in range(rows)]
    source = root / "in.parquet"
    pq.write_table(pa.table({"key": keys, "value": values}), source)
    logs = root / "logs"
    subprocess.run([str(KAFKATIER), "produce", str(logs), "--topic", TOPIC, "--input",
                    str(source), "--partitions", str(partitions), "--compression", "lz4"],
                   check=True, stdout=subprocess.DEVNULL)  # fmt: skip
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
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": "bench",
                         "enable.auto.commit": False, "enable.partition.eof": True})  # fmt: skip
    start = time.perf_counter()
    consumer.assign([TopicPartition(TOPIC, p, -2) for p in range(partitions)])
    done, records = 0, 0
    while done < partitions:
        for msg in consumer.consume(10_000, 1.0):  # in batches: poll() per record is Python-bound
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                done += 1
            else:
                records += 1
    took = time.perf_counter() - start
    consumer.close()
    return took, records


def cpu_seconds(pid: int) -> float:
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def serve(logs: Path, root: Path) -> tuple[subprocess.Popen[bytes], int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = root / "serve.properties"
    config.write_text(f"log.dirs={logs}\nlisteners=PLAINTEXT://127.0.0.1:{port}\n")
    proc = subprocess.Popen([str(KAFKATIER), "serve", "--config", str(config),
                             "--log-level", "warning"])  # fmt: skip
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, port
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("kafkatier serve did not listen")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print("command:", " ".join([sys.executable, *sys.argv]))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        logs = write_topic(root, args.mib, args.partitions)
        size = segment_bytes(logs)
        proc, port = serve(logs, root)
        try:
            read_files(logs)  # warm the page cache
            for n in range(args.rounds):
                files = read_files(logs)
                before = cpu_seconds(proc.pid)
                took, records = consume(port, args.partitions)
                cpu = cpu_seconds(proc.pid) - before
                print(f"round {n + 1}: {size / 1e6:.0f} MB of lz4 segments, {records} records: "
                      f"serve + confluent-kafka {size / took / 1e6:.0f} MB/s, files "
                      f"{size / files / 1e6:.0f} MB/s, ratio {files / took:.1%}; server CPU "
                      f"{cpu / (size / 1e9):.2f} s per GB")  # fmt: skip
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)


if __name__ == "__main__":
    main()
