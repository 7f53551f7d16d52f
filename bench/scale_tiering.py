"""Benchmark: what each partition costs the tiering side (sidecar passes, status, restore).

    python bench/scale_tiering.py [--partitions 8,64,256,1024,4096] [--timeout 900]

Starts one SeaweedFS ``weed mini`` S3 server on 127.0.0.1 (the test server, tiering/store/weed.py)
with a small counting HTTP proxy in front of it (its own process); every S3 client below, the
sidecar's, the CLI's and boto3's, talks to the proxy. For each partition count N (a fresh bucket
prefix ``nN`` each), kafkatier's log engine writes one topic of N partitions with
``remote.storage.enable=true`` and 200 records a partition (two batches of 100 records, ~11.7 KiB
each, with ``segment.bytes`` such that the second rolls): one closed segment and the active
segment per partition, written untimed and closed cleanly (recovery points checkpointed, so the
N closed segments are eligible for upload). Then, timed and with the S3 requests each step sent:

(a) first pass: one sidecar pass, in process (``Tierer(config).run_once()``, the
    configuration's default 4 partitions in parallel), which uploads the N closed segments and,
    as the first pass of a process, locates and sweeps each partition;
(b) idle: a second and a third ``run_once()`` of the same ``Tierer``, with nothing to do (a
    partition written within the last second is examined once more: quiet.py's racy window);
(b2) upload pass: one more batch a partition rolls one new closed segment each (untimed), then a
    ``run_once()`` of the same ``Tierer`` uploads them, as a long-running sidecar does; then a
    fourth idle pass;
(c) ``kafkatier status --config F``, the whole subprocess, which reads the manifest copies the
    sidecar's passes kept in the partition directories, and ``status --refresh``, which reads
    every manifest from the store instead;
(d) ``kafkatier restore --config F --topic scale --to DIR`` (its default threads), the whole
    subprocess, against plain boto3 downloading every object under the topic's remote prefix
    (one client, a ThreadPoolExecutor of 16 ``get_object`` calls, the listing included, the
    client created outside the timing), and their ratio. The CLI's start-up (``kafkatier
    [status|restore] --help``) is timed once on its own, as it is part of every subprocess
    figure; the detail lines give each subprocess's CPU seconds too (what it costs, however
    busy the machine).

Requests are counted on the server side of the network: the proxy classifies each request by its
method, query and headers (GET, HEAD, LIST, PUT, DELETE, COPY and the multipart kinds), and
SeaweedFS's own Prometheus counter ``SeaweedFS_s3_request_total`` (on ``weed mini``'s
``-metricsPort``; it counts a HEAD as a GET, hence the proxy) checks the total of every step.
Figures are each step's difference of the counters. Steps run on a shared 2-core machine with
the server and the proxy beside them, so times are indicative; request counts are exact.
Subprocess steps that exceed ``--timeout`` seconds are killed and shown as such.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config
from s3_counting import Counters, start_proxy, weed_metrics_port

from kafkatier.storage.checkpoint.checkpoint_file import (
    RECOVERY_POINT_CHECKPOINT,
    OffsetCheckpointFile,
)
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record
from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.sidecar.tierer import Tierer
from kafkatier.tiering.store.weed import weed_server

TOPIC = "scale"
BUCKET = "bench"
BATCH_RECORDS = 100  # two batches a partition: 200 records, one closed + one active segment
SEGMENT_BYTES = 16384  # one ~11.7 KiB batch fits, two do not: the second batch rolls
DOWNLOAD_THREADS = 16
KAFKATIER = [sys.executable, "-m", "kafkatier.cli.main"]
COUNTS_PATH = "/__counts__"
T0 = 1_700_000_000_000


def _batch(start: int) -> Any:
    return build_batch([Record(i, T0 + start + i, b"k%08d" % (start + i), b"v" * 100, ())
                        for i in range(BATCH_RECORDS)])  # fmt: skip


def write_topic(logs: Path, n: int) -> None:
    """N partitions of one closed and one active segment, closed cleanly."""
    append_all(logs, n, [0, BATCH_RECORDS], {
        "remote.storage.enable": "true", "segment.bytes": str(SEGMENT_BYTES),
        "retention.ms": "-1"})  # fmt: skip


def roll_all(logs: Path, n: int) -> None:
    """One more batch a partition, which rolls: one new closed segment each, closed cleanly."""
    append_all(logs, n, [2 * BATCH_RECORDS])


def append_all(
    logs: Path, n: int, starts: list[int], config: dict[str, str] | None = None
) -> None:
    """A batch at each of ``starts`` into every partition. Each log is closed as soon as it is
    written (a log holds ~5 descriptors: 4096 open ones would pass the limit); partition 0
    stays open so the others get its topic id, and the recovery points of all are checkpointed
    at the end (``LogDirectory.close`` only knows the logs still open)."""
    points: dict[tuple[str, int], int] = {}
    with LogDirectory(logs) as log_dir:
        if config:
            log_dir.topic_configs.update(TOPIC, config, "bench")
        for p in range(n):
            log = log_dir.get_or_create(TOPIC, p)
            for start in starts:
                log.append(_batch(start))
            if p > 0:
                log.close()
                points[(TOPIC, p)] = log.recovery_point
                del log_dir.logs[(TOPIC, p)]
    checkpoint = OffsetCheckpointFile(logs / RECOVERY_POINT_CHECKPOINT)
    checkpoint.write({**checkpoint.read(), **points})


@dataclass
class Step:
    seconds: float
    kinds: Counter[str] = field(default_factory=Counter)
    weed_total: int = 0
    timed_out: bool = False
    child_cpu: float = 0.0  # user + system CPU seconds of the subprocess (CLI steps)

    @property
    def requests(self) -> int:
        return sum(self.kinds.values())


def measure(counters: Counters, run: Callable[[], Any]) -> tuple[Step, Any]:
    """Wall time and requests of ``run()``; a run returning "timeout" is marked as such."""
    kinds0, total0 = counters.read()
    cpu0 = _children_cpu()
    began = time.perf_counter()
    value = run()
    seconds = time.perf_counter() - began
    kinds1, total1 = counters.read()
    kinds1.subtract(kinds0)
    step = Step(seconds, +kinds1, total1 - total0, value == "timeout", _children_cpu() - cpu0)
    return step, value


def _children_cpu() -> float:
    """CPU seconds of the finished subprocesses: a CLI step's cost whatever else the shared
    machine runs (its wall time also waits for CPUs others hold)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _cli(args: list[str], timeout: float) -> str:
    """Run the ``kafkatier`` CLI; "timeout" if killed at ``timeout`` seconds."""
    try:
        done = subprocess.run([*KAFKATIER, *args], capture_output=True, text=True,
                              timeout=timeout)  # fmt: skip
    except subprocess.TimeoutExpired:
        return "timeout"
    if done.returncode != 0:
        raise RuntimeError(f"kafkatier {args[0]} failed ({done.returncode}): {done.stderr[-2000:]}")
    return "ok"


def _client(endpoint: str) -> Any:
    config = Config(max_pool_connections=DOWNLOAD_THREADS, retries={"mode": "standard"})
    return boto3.session.Session().client("s3", endpoint_url=endpoint, region_name="us-east-1",
                                          config=config)  # fmt: skip


def boto3_download(client: Any, prefix: str, out: Path) -> tuple[int, int]:
    """Every object under ``prefix``, listed and then fetched 16 at a time; (objects, bytes)."""
    keys = [o["Key"] for page in client.get_paginator("list_objects_v2").paginate(
        Bucket=BUCKET, Prefix=prefix) for o in page.get("Contents", [])]  # fmt: skip

    def fetch(key: str) -> int:
        data = client.get_object(Bucket=BUCKET, Key=key)["Body"].read()
        path = out / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return len(data)

    with ThreadPoolExecutor(max_workers=DOWNLOAD_THREADS) as pool:
        return len(keys), sum(pool.map(fetch, keys))


def write_properties(path: Path, logs: Path, prefix: str, endpoint: str) -> Path:
    path.write_text(f"log.dirs={logs}\nremote.storage.url=s3://{BUCKET}/{prefix}\n"
                    f"remote.storage.s3.endpoint.url={endpoint}\n"
                    "remote.storage.s3.region=us-east-1\n")  # fmt: skip
    return path


def sidecar_passes(
    config: TieringConfig, counters: Counters, n: int, logs: Path
) -> dict[str, Step]:
    """Passes of one ``Tierer``: its first (an upload), two idle ones, then an upload of one
    new segment a partition (``roll_all``) as a long-running sidecar sees it, and one more
    idle pass."""
    tierer = Tierer(config)
    tierer.store.head("warm-up")  # the client is created outside the timing
    steps: dict[str, Step] = {}
    for name in ("upload", "idle 2", "idle 3", "upload 2", "idle 4"):
        if name == "upload 2":
            roll_all(logs, n)
        steps[name], result = measure(counters, tierer.run_once)
        assert result.failures == 0, [p.error for p in result.partitions if p.error][:3]
        uploaded = result.total("uploaded_segments")
        assert uploaded == (n if name.startswith("upload") else 0), (name, uploaded)
    return steps


def bench_n(tmp: Path, counters: Counters, n: int, timeout: float) -> dict[str, Step]:
    """Every step for N partitions (module docstring); prints them as they end."""
    logs, prefix, restored, plain = (tmp / f"logs-{n}", f"n{n}", tmp / f"restore-{n}",
                                     tmp / f"plain-{n}")  # fmt: skip
    write_topic(logs, n)
    props = write_properties(tmp / f"n{n}.properties", logs, prefix, counters.proxy_url)
    steps = sidecar_passes(TieringConfig.load(props), counters, n, logs)
    status = ["status", "--config", str(props)]
    steps["status"], _ = measure(counters, lambda: _cli(status, timeout))
    steps["refresh"], _ = measure(counters, lambda: _cli([*status, "--refresh"], timeout))
    restore = ["restore", "--config", str(props), "--topic", TOPIC, "--to", str(restored),
               "--quiet"]  # fmt: skip
    steps["restore"], _ = measure(counters, lambda: _cli(restore, timeout))
    if not steps["restore"].timed_out:
        got = len(list(restored.glob(f"{TOPIC}-*")))
        assert got == n, f"restore: {got} partitions of {n}"
    client = _client(counters.proxy_url)
    client.head_bucket(Bucket=BUCKET)  # connect outside the timing
    steps["boto3"], (objects, size) = measure(
        counters, lambda: boto3_download(client, f"{prefix}/{TOPIC}-", plain)
    )
    print_detail(n, steps, objects, size)
    for path in (logs, restored, plain):
        shutil.rmtree(path, ignore_errors=True)
    return steps


def _kinds(step: Step, per: int) -> str:
    return ", ".join(f"{k} {v / per:.3g}" for k, v in sorted(step.kinds.items(), key=lambda kv:
                                                              (-kv[1], kv[0])))  # fmt: skip


def _seconds(step: Step, timeout: float) -> str:
    return f">{timeout:g} s (killed)" if step.timed_out else f"{step.seconds:.2f} s"


def print_detail(n: int, steps: dict[str, Step], objects: int, size: int) -> None:
    print(f"N={n}: boto3 fetched {objects} objects, {size / 1024:.0f} KiB", flush=True)
    for name, step in steps.items():
        check = "" if step.weed_total == step.requests else f" (SeaweedFS: {step.weed_total})"
        cpu = f" ({step.child_cpu:.2f} s CPU)" if step.child_cpu else ""
        print(
            f"  {name:8} {step.seconds:8.2f} s{cpu} {step.requests:7d} requests{check}; "
            f"per partition: {_kinds(step, n) or 'none'}",
            flush=True,
        )


def print_table(results: dict[int, dict[str, Step]], timeout: float) -> None:
    head = (f"{'N':>5} | {'first pass s (req/seg)':>23} | {'idle pass s (req)':>18} | "
            f"{'upload pass s (req/seg)':>23} | {'status s (req)':>16} | "
            f"{'status --refresh s (req)':>24} | {'restore s (req)':>18} | "
            f"{'boto3 dl s (req)':>17} | restore/boto3")  # fmt: skip
    print(head)
    print("-" * len(head))
    for n, s in results.items():
        up, idle, st, rf, rs, b3 = (s[k] for k in ("upload", "idle 3", "status", "refresh",
                                                   "restore", "boto3"))  # fmt: skip
        up2 = s.get("upload 2", Step(float("nan")))
        ratio = "-" if rs.timed_out else f"{rs.seconds / b3.seconds:.1f}x"
        print(f"{n:>5} | {up.seconds:>8.2f} ({up.requests / n:>5.1f}/seg) | "
              f"{idle.seconds:>8.2f} ({idle.requests:>6}) | "
              f"{up2.seconds:>8.2f} ({up2.requests / n:>5.1f}/seg) | "
              f"{_seconds(st, timeout):>9} ({st.requests:>4}) | "
              f"{_seconds(rf, timeout):>17} ({rf.requests:>4}) | "
              f"{_seconds(rs, timeout):>9} ({rs.requests:>6}) | "
              f"{b3.seconds:>7.2f} ({b3.requests:>6}) | {ratio:>6}")  # fmt: skip
    print("\nrequests per partition by kind:")
    for n, s in results.items():
        for name in ("upload", "idle 2", "idle 3", "upload 2", "idle 4", "status", "refresh",
                     "restore", "boto3"):  # fmt: skip
            if name in s:
                print(f"{n:>5} {name:8} {s[name].requests / n:6.2f}  "
                      f"{_kinds(s[name], n) or 'none'}")  # fmt: skip


def cli_startup(*command: str) -> float:
    """The best of three ``kafkatier [COMMAND] --help``: what a subprocess figure includes (a
    command imports its own module only; ``--help`` alone imports them all)."""
    times = []
    for _ in range(3):
        began = time.perf_counter()
        subprocess.run([*KAFKATIER, *command, "--help"], capture_output=True, check=True)
        times.append(time.perf_counter() - began)
    return min(times)


def run(counts: list[int], timeout: float) -> dict[int, dict[str, Step]]:
    results: dict[int, dict[str, Step]] = {}
    with tempfile.TemporaryDirectory(prefix="kt-scale-tiering-") as tmp_name:
        tmp = Path(tmp_name)
        with weed_server(tmp / "weed", bucket=BUCKET) as server:
            os.environ.update(server.env)
            pid, metrics_port = weed_metrics_port(tmp / "weed")
            proxy, url = start_proxy(int(server.endpoint.rsplit(":", 1)[1]))
            try:
                counters = Counters(url, f"http://127.0.0.1:{metrics_port}/metrics")
                print(
                    f"weed mini pid {pid} at {server.endpoint}, counting proxy at {url}; "
                    f"CLI start-up: kafkatier --help {cli_startup():.2f} s, kafkatier status "
                    f"--help {cli_startup('status'):.2f} s, kafkatier restore --help "
                    f"{cli_startup('restore'):.2f} s",
                    flush=True,
                )
                for n in counts:
                    results[n] = bench_n(tmp, counters, n, timeout)
            finally:
                proxy.terminate()
                proxy.join(10)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", default="8,64,256,1024,4096")
    parser.add_argument(
        "--timeout",
        type=float,
        default=900,
        help="seconds a status or restore subprocess may take [900]",
    )
    args = parser.parse_args()
    counts = [int(x) for x in args.partitions.split(",")]
    print(f"command: python bench/scale_tiering.py --partitions {args.partitions} "
          f"--timeout {args.timeout:g}", flush=True)  # fmt: skip
    began = time.perf_counter()
    results = run(counts, args.timeout)
    print()
    print_table(results, args.timeout)
    print(f"\nwhole run: {time.perf_counter() - began:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
