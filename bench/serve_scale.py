"""Benchmark: what each partition costs ``kafkatier serve``'s Fetch, over 8 to thousands.

    python bench/serve_scale.py [--partitions 8,64,256,1024] [--records 100000]
                                [--requests 7] [--rounds 3] [--baseline DIR]

For each partition count N: one topic of ``--records`` records (bench/scale_read.py's rows:
16-byte keys, 100-byte values; ``kafkatier produce --compression lz4``) in N partitions; a
``kafkatier serve`` of it (and, with ``--baseline DIR``, a second one of the sources in DIR,
as bench/serve.py starts it); and over one socket per server, Fetch v12 requests naming every
partition, as a consumer assigned the whole topic sends them:

* *from start*: each partition from offset 0 (``max.partition.fetch.bytes`` 1 MiB, the
  response up to 64 MiB): a consumer's first fetch from the earliest offset;
* *at end*: each partition at its high watermark, ``max.wait.ms`` 0: the poll of a consumer
  tailing the topic when nothing new came;
* *one at end*: the same for partition 0 alone, a consumer assigned one partition: what the
  other partitions cost it (nothing, once the server keeps its listing of the log dir), and
  the server's CPU in a long poll of it (*one long poll CPU*);
* *long poll*: the same with ``max.wait.ms`` 500 (librdkafka's ``fetch.wait.max.ms``, the Java
  client's ``fetch.max.wait.ms``), which the server holds until the wait ends: timed, and the
  server's CPU seconds during it (``/proc``), what one idle consumer costs the server.

Each is timed from the request's first byte sent to the response's last byte received (the
response is not decoded), ``--requests`` times per round (long polls: 3); ``--rounds`` rounds,
the servers' order alternating. Printed: the command, then per N and server the median time of
each kind, in ms and in microseconds per partition, the long poll's server CPU, and the
baseline's times over this one's.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale_read import rows

from serve import KAFKATIER, Server, _recv, cpu_seconds, fetch_request, rounds, serve

TOPIC = "scale"
ONE = "one at end"


def write_topic(root: Path, source: Path, partitions: int) -> Path:
    logs = root / f"logs-{partitions}"
    subprocess.run([str(KAFKATIER), "produce", str(logs), "--topic", TOPIC, "--input",
                    str(source), "--partitions", str(partitions), "--compression", "lz4"],
                   check=True, stdout=subprocess.DEVNULL)  # fmt: skip
    return logs


def timed(sock: socket.socket, request: bytes) -> float:
    start = time.perf_counter()
    sock.sendall(request)
    size = int.from_bytes(_recv(sock, 4), "big")
    _recv(sock, size)
    return time.perf_counter() - start


def bounds(logs: Path, partitions: int) -> tuple[dict[int, int], dict[int, int]]:
    """Each partition's log start and log end offset (the high watermark serve reports)."""
    from kafkatier.storage.log.readonly import ReadOnlyPartition

    start, end = {}, {}
    for p in range(partitions):
        with ReadOnlyPartition(logs, TOPIC, p) as part:
            start[p], end[p] = part.log_start_offset, part.log_end_offset()
    return start, end


def measure(
    pid: int, port: int, start: dict[int, int], end: dict[int, int], requests: int
) -> dict[str, float]:
    """Median seconds of each kind of request (module docstring) on one connection, and the
    server's median CPU seconds in a long poll."""
    kinds = {"from start": start, "at end": end, ONE: {0: end[0]}}
    polls = ("long poll", "long poll CPU", "one long poll CPU")
    times: dict[str, list[float]] = {k: [] for k in [*kinds, *polls]}
    with socket.create_connection(("127.0.0.1", port)) as sock:
        for i in range(requests + 1):
            for kind, offsets in kinds.items():
                took = timed(sock, fetch_request(TOPIC, offsets, i, max_bytes=64 << 20))
                if i:  # the first of each warms the server's caches
                    times[kind].append(took)
        for i in range(3):
            before = cpu_seconds(pid)
            poll = fetch_request(TOPIC, end, 100 + i, max_wait_ms=500, max_bytes=64 << 20)
            times["long poll"].append(timed(sock, poll))
            times["long poll CPU"].append(cpu_seconds(pid) - before)
            before = cpu_seconds(pid)
            timed(sock, fetch_request(TOPIC, {0: end[0]}, 200 + i, max_wait_ms=500))
            times["one long poll CPU"].append(cpu_seconds(pid) - before)
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--partitions", default="8,64,256,1024")
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", type=Path, default=None)
    args = parser.parse_args()
    print("command: python bench/serve_scale.py " + " ".join(sys.argv[1:]), flush=True)
    counts = [int(n) for n in args.partitions.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        source = root / "in.parquet"
        pq.write_table(rows(args.records), source)
        for n in counts:
            report(n, partition_count(root, source, n, args))
    return 0


def partition_count(
    root: Path, source: Path, n: int, args: argparse.Namespace
) -> dict[str, list[dict[str, float]]]:
    """Each server's figures of each round (``measure``) for a topic of ``n`` partitions."""
    logs = write_topic(root, source, n)
    start, end = bounds(logs, n)
    servers: list[Server] = [("this", *serve(logs, root))]
    if args.baseline is not None:
        servers.append(("baseline", *serve(logs, root, args.baseline)))
    by_pid: dict[int, list[dict[str, float]]] = {proc.pid: [] for _, proc, _ in servers}
    rounds(servers, args.rounds, lambda _label, pid, port, _n: by_pid[pid].append(
        measure(pid, port, start, end, args.requests)))  # fmt: skip
    return {name: by_pid[proc.pid] for name, proc, _ in servers}


def report(n: int, got: dict[str, list[dict[str, float]]]) -> None:
    medians = {name: {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
               for name, rounds in got.items()}  # fmt: skip
    for name, kinds in medians.items():
        line = ", ".join(f"{k} {s * 1e3:.2f} ms" + ("" if k == ONE else
                                                     f" ({s * 1e6 / n:.0f} us a partition)")
                         for k, s in kinds.items() if not k.endswith("CPU"))  # fmt: skip
        print(f"{n} partitions, {name}: {line}; server CPU in a long poll "
              f"{kinds['long poll CPU'] * 1e3:.0f} ms, in one of partition 0 alone "
              f"{kinds['one long poll CPU'] * 1e3:.0f} ms", flush=True)  # fmt: skip
    if "baseline" in medians:
        ratio = ", ".join(f"{k} {medians['baseline'][k] / max(s, 1e-9):.2f}x"
                          for k, s in medians["this"].items())  # fmt: skip
        print(f"{n} partitions, baseline over this: {ratio}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
