"""``kafkatier serve`` throughput from the remote tier: one confluent-kafka (librdkafka)
consumer, and a raw fetch loop that leaves records compressed, read a whole lz4 topic whose
every segment exists only in S3, next to plain boto3 downloading the same ``.log`` objects in
the same run (the ceiling the issue names: 80% of it is the goal), with the server's CPU
seconds per GB of segment bytes served.

Usage: ``.venv/bin/python bench/serve_remote.py [--mib 64] [--partitions 4] [--rounds 3]
[--segment-mib 4] [--baseline DIR] [--get-latency-ms MS]`` (prints the command, the figures and
the ratios). ``--baseline DIR`` serves the same topic from a second server of another copy of
the sources (as bench/serve.py's) and alternates the two, so a change to the server is judged
side by side. ``--get-latency-ms``: every GET a server sends waits that long first, as for
S3's time to first byte (tens of milliseconds; the embedded server answers in about one): a
``sitecustomize.py`` the bench writes, on the servers' ``PYTHONPATH``, wraps
``S3Store.get_bytes`` in their processes (boto3's download is not delayed).

Set-up, untimed: the embedded SeaweedFS server (``weed mini``) on 127.0.0.1; ``kafkatier
produce`` writes the topic (bench/serve.py's records, ``remote.storage.enable=true``,
``segment.bytes`` of ``--segment-mib``, ``local.retention.ms=0``); every partition is rolled so
that no record stays in an active segment; one sidecar pass uploads the segments and local
retention deletes them. ``kafkatier serve`` then serves the log dir with the store configured:
every offset comes from S3, through the remote indexes (fetched once a segment) and a ranged
GET of the ``.log`` object for each fetch. Each round, with boto3 first or last in turn: boto3
(one client, ``--partitions`` threads, every ``.log`` object's body read into memory),
confluent-kafka from offset 0 to the end, the raw fetch loop.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kafkatier.storage.log.directory import LogDirectory
from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.sidecar.tierer import Tierer
from kafkatier.tiering.store.weed import weed_server
from serve import (
    Server,
    both_clients,
    options,
    rounds,
    serve,
    write_topic,
)

BUCKET = "bench-serve"
PREFIX = "remote"


def tiered_topic(
    root: Path, endpoint: str, mib: int, partitions: int, segment_mib: int
) -> tuple[Path, Path]:
    """The topic written, rolled, uploaded and deleted locally (module docstring); returns the
    log dir and the properties file that points a command at it and the store."""
    configs = ("remote.storage.enable=true", f"segment.bytes={segment_mib << 20}",
               "local.retention.ms=0", "retention.ms=-1")  # fmt: skip
    logs = write_topic(root, mib, partitions, configs)
    with LogDirectory(logs) as log_dir:
        for log in log_dir:
            log.roll()
    props = root / "tier.properties"
    props.write_text(f"log.dirs={logs}\nremote.storage.url=s3://{BUCKET}/{PREFIX}\n"
                     f"remote.storage.s3.endpoint.url={endpoint}\n"
                     "remote.storage.s3.region=us-east-1\n")  # fmt: skip
    result = Tierer(TieringConfig.load(props)).run_once()
    assert result.failures == 0, [p.error for p in result.partitions if p.error]
    left = sum(f.stat().st_size for f in logs.glob("*/*.log"))
    assert left == 0, f"{left} bytes of records are still local"
    return logs, props


def store_lines(props: Path) -> str:
    """The remote store's lines of ``props``, for serve's properties file."""
    return "".join(line + "\n" for line in props.read_text().splitlines()
                   if line.startswith("remote."))  # fmt: skip


def boto3_download(endpoint: str, threads: int) -> tuple[float, int]:
    """Seconds to read every ``.log`` object's body under the prefix; their total size."""
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    client.head_bucket(Bucket=BUCKET)  # connected outside the timing
    start = time.perf_counter()
    keys = [o["Key"] for page in client.get_paginator("list_objects_v2").paginate(
        Bucket=BUCKET, Prefix=PREFIX + "/") for o in page.get("Contents", [])
        if o["Key"].endswith("/log")]  # fmt: skip

    def body(key: str) -> int:
        return len(client.get_object(Bucket=BUCKET, Key=key)["Body"].read())

    with ThreadPoolExecutor(threads) as pool:
        size = sum(pool.map(body, keys))
    return time.perf_counter() - start, size


def main() -> None:
    parser = options(mib=64)
    parser.add_argument("--segment-mib", type=int, default=4)
    parser.add_argument("--get-latency-ms", type=float, default=0.0)
    args = parser.parse_args()
    print("command:", " ".join([sys.executable, *sys.argv]), flush=True)
    with tempfile.TemporaryDirectory() as tmp, weed_server(Path(tmp) / "s3", BUCKET) as s3:
        os.environ.update(s3.env)
        root = Path(tmp)
        logs, props = tiered_topic(root, s3.endpoint, args.mib, args.partitions,
                                   args.segment_mib)  # fmt: skip
        path = latency_path(root, args.get_latency_ms)
        servers: list[Server] = [("this", *serve(logs, root, extra=store_lines(props),
                                                 path=path))]  # fmt: skip
        if args.baseline is not None:
            servers.append(("baseline", *serve(logs, root, args.baseline, store_lines(props),
                                               path)))  # fmt: skip
        rounds(servers, args.rounds,
               lambda label, pid, port, n: measure(label, s3.endpoint, pid, port,
                                                   args.partitions, boto3_first=n % 2 == 0))


LATENCY = """import sys, time
if "serve" in sys.argv:  # the kafkatier serve processes only (bench/serve_remote.py)
    from kafkatier.tiering.store import s3store

    _get = s3store.S3Store.get_bytes

    def _late(self, *args, **kwargs):
        time.sleep({seconds})
        return _get(self, *args, **kwargs)

    s3store.S3Store.get_bytes = _late
"""


def latency_path(root: Path, ms: float) -> tuple[Path, ...]:
    """The directory of the ``sitecustomize.py`` that delays each GET (none without one)."""
    if not ms:
        return ()
    where = root / "latency"
    where.mkdir()
    (where / "sitecustomize.py").write_text(LATENCY.format(seconds=ms / 1000))
    return (where,)


def measure(
    label: str, endpoint: str, pid: int, port: int, partitions: int, *, boto3_first: bool
) -> None:
    """One round: boto3, confluent-kafka and the raw fetch loop (boto3 first or last)."""
    if boto3_first:
        plain, size = boto3_download(endpoint, partitions)
    got = both_clients(pid, port, partitions)
    if not boto3_first:
        plain, size = boto3_download(endpoint, partitions)
    print(f"{label}: {size / 1e6:.0f} MB of lz4 segments in S3, {got.records} records: "
          f"boto3 {size / plain / 1e6:.0f} MB/s; {got.figures(size)}; confluent/boto3 "
          f"{plain / got.confluent:.1%}, raw/boto3 {plain / got.raw:.1%}", flush=True)


if __name__ == "__main__":
    main()
