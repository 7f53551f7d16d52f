"""``kafkatier serve`` consumer groups: what a synchronous offset commit costs (an append to
``__consumer_offsets`` and its fsync before the answer), next to an OffsetFetch on the same
connection in the same run (a round trip with no disk write: the floor), and how long a group of
two confluent-kafka consumers takes from subscribe() to a settled 2/2 assignment.

Usage: ``.venv/bin/python bench/serve_groups.py [--commits 200] [--rounds 3]`` (a
``kafkatier serve`` process on a fresh temp dir; prints the command and the figures). The commit
latency is dominated by the filesystem's fsync: compare it with the floor on the same disk.
"""

from __future__ import annotations

import argparse
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KAFKATIER = Path(sys.executable).with_name("kafkatier")
TOPIC = "bench-groups"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(root: Path) -> tuple[subprocess.Popen[bytes], int]:
    from kafkatier.storage.log.directory import LogDirectory

    logs = root / "logs"
    with LogDirectory(logs) as ld:
        ld.create_partitions(TOPIC, 4)
    port = free_port()
    config = root / "serve.properties"
    config.write_text(f"log.dirs={logs}\nlisteners=PLAINTEXT://127.0.0.1:{port}\n"
                      "group.initial.rebalance.delay.ms=0\n")  # fmt: skip
    proc = subprocess.Popen([str(KAFKATIER), "serve", "--config", str(config)])
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, port
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit("the server did not start") from None
            time.sleep(0.1)


def consumer(port: int, group: str) -> object:
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": group,
                     "enable.auto.commit": False, "heartbeat.interval.ms": 200})  # fmt: skip


def commit_and_fetch_ms(port: int, commits: int) -> tuple[list[float], list[float]]:
    """Per-call milliseconds of synchronous commits and of committed() (OffsetFetch)."""
    from confluent_kafka import TopicPartition

    c = consumer(port, "bench-commit")
    tps = [TopicPartition(TOPIC, p) for p in range(4)]
    commit, fetch = [], []
    try:
        c.committed(tps, timeout=10)  # coordinator found, connection up
        for i in range(commits):
            start = time.perf_counter()
            c.commit(offsets=[TopicPartition(TOPIC, p, i) for p in range(4)], asynchronous=False)
            commit.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            c.committed(tps, timeout=10)
            fetch.append((time.perf_counter() - start) * 1000)
    finally:
        c.close()
    return commit, fetch


def settle_s(port: int, group: str) -> float:
    """Seconds from two subscribe() calls to both holding 2 partitions."""
    a, b = consumer(port, group), consumer(port, group)
    start = time.perf_counter()
    try:
        a.subscribe([TOPIC])
        b.subscribe([TOPIC])
        while not (len(a.assignment()) == 2 and len(b.assignment()) == 2):
            if time.perf_counter() - start > 60:
                raise SystemExit("the group did not settle in 60 s")
            a.poll(0.05)
            b.poll(0.05)
        return time.perf_counter() - start
    finally:
        a.close()
        b.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print("$", " ".join([".venv/bin/python", "bench/serve_groups.py", *sys.argv[1:]]))
    with tempfile.TemporaryDirectory() as tmp:
        proc, port = start(Path(tmp))
        try:
            for r in range(args.rounds):
                commit, fetch = commit_and_fetch_ms(port, args.commits)
                settle = settle_s(port, f"bench-settle-{r}")
                print(f"round {r + 1}: commit (4 partitions, fsync) median "
                      f"{statistics.median(commit):.2f} ms, p90 "
                      f"{statistics.quantiles(commit, n=10)[-1]:.2f} ms; OffsetFetch median "
                      f"{statistics.median(fetch):.2f} ms; two members settled 2/2 in "
                      f"{settle:.2f} s")  # fmt: skip
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)


if __name__ == "__main__":
    main()
