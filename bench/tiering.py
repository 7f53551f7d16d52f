"""Benchmark: tiering upload and restore throughput against plain boto3, and roll-to-FINISHED.

    python bench/tiering.py [--segments N] [--segment-mb M] [--rounds K] [--json]

Starts a SeaweedFS ``weed mini`` S3 server on 127.0.0.1 (the test server, tiering/weed.py),
writes a tiered topic of N closed segments of about M MiB each with kafkatier's log engine, then
runs K rounds; each round times, back to back and in alternating order (the machine is shared
and noisy, so both sides of a round see the same conditions):

(a) upload: one sidecar pass (``Tierer.run_once``: orphan sweep, manifest commits, multipart
    upload with per-part ETag checks, SHA-256, retention) against a loop of boto3
    ``upload_file`` over the very same files (every ``.log``, ``.index``, ``.timeindex``,
    ``.txnindex`` and producer snapshot the pass uploads), same part size and concurrency;
(b) restore: ``restore_topic`` (download, SHA-256 check, rename into place, checkpoints) against
    a loop of boto3 ``download_file`` of the same objects, same part size and concurrency;
(c) latency: the time from a segment roll (of an M MiB segment) to its manifest entry being
    COPY_SEGMENT_FINISHED, with the sidecar loop watching the log dir (inotify); Kafka's copier
    runs every 30 s by default (remote.log.manager.task.interval.ms).

Reported: per round the two throughputs and their ratio (kafkatier / boto3), then the median
and the best over the rounds of each throughput and of the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
from boto3.s3.transfer import TransferConfig

from kafkatier.storage.log_dir import LogDirectory
from kafkatier.storage.records import Record, build_batch
from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.local import LocalPartition
from kafkatier.tiering.manifest import ManifestStore
from kafkatier.tiering.restore import restore_topic
from kafkatier.tiering.sidecar import Sidecar
from kafkatier.tiering.tierer import Tierer
from kafkatier.tiering.weed import weed_server

MIB = 1 << 20
PART = 8 * MIB
CONCURRENCY = 4
RESTORE_THREADS = int(os.environ.get("KT_RESTORE_THREADS", "4"))
TRANSFER = TransferConfig(multipart_threshold=PART, multipart_chunksize=PART,
                          max_concurrency=CONCURRENCY)  # fmt: skip


def write_topic(logs: Path, segments: int, segment_mb: int) -> None:
    """``segments`` closed segments of ~``segment_mb`` MiB (1 MiB batches of random bytes)."""
    value = os.urandom(MIB - 200)
    with LogDirectory(logs) as log_dir:
        log_dir.topic_configs.update("bench", {
            "remote.storage.enable": "true", "segment.bytes": str(segment_mb * MIB),
            "retention.ms": "-1"}, "bench")  # fmt: skip
        log = log_dir.get_or_create("bench", 0)
        for i in range(segments * segment_mb + 1):
            log.append(build_batch([Record(0, int(time.time() * 1000), b"k%d" % i, value, ())]))


def _config(logs: Path, url: str, endpoint: str) -> TieringConfig:
    return TieringConfig(log_dirs=(logs,), remote_url=url, endpoint_url=endpoint,
                         region="us-east-1", multipart_threshold=PART, multipart_part=PART,
                         threads=CONCURRENCY, interval_ms=600_000)  # fmt: skip


def _client(endpoint: str) -> Any:
    return boto3.session.Session().client("s3", endpoint_url=endpoint, region_name="us-east-1")


def tiered_files(logs: Path) -> list[Path]:
    """Every file a sidecar pass uploads: the candidates' segment files and snapshots."""
    with LocalPartition(logs, "bench", 0) as part:
        return [p for c in part.candidates() for p in c.files().values()]


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _both(ours: Callable[[], object], plain: Callable[[], object], run: int) -> tuple[float, float]:
    """Both timings of a round, boto3 first in even rounds and second in odd ones."""
    if run % 2:
        t_ours = _timed(ours)
        return t_ours, _timed(plain)
    t_plain = _timed(plain)
    return _timed(ours), t_plain


def bench_upload(logs: Path, endpoint: str, bucket: str, run: int) -> tuple[float, float, int]:
    files = tiered_files(logs)
    size = sum(p.stat().st_size for p in files)
    client = _client(endpoint)
    client.head_bucket(Bucket=bucket)  # connect outside the timing, as for ours
    tierer = Tierer(_config(logs, f"s3://{bucket}/tier-{run}", endpoint))
    tierer.store.head("warm-up")  # create the client outside the timing, as for boto3's

    def plain() -> None:
        for p in files:
            client.upload_file(str(p), bucket, f"plain-{run}/{p.name}", Config=TRANSFER)

    def ours() -> None:
        result = tierer.run_once()
        assert result.failures == 0 and result.total("uploaded_bytes") == size, result

    t_ours, t_plain = _both(ours, plain, run)
    return t_ours, t_plain, size


def bench_restore(tmp: Path, endpoint: str, bucket: str, run: int) -> tuple[float, float, int]:
    store = _config(tmp, f"s3://{bucket}/tier-{run}", endpoint).open_store()
    store.head("warm-up")  # create the client outside the timing, as for boto3's
    client = _client(endpoint)
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=bucket, Prefix=f"plain-{run}/")
            ["Contents"]]  # fmt: skip
    size = sum(o["Size"] for o in client.list_objects_v2(Bucket=bucket, Prefix=f"plain-{run}/")
               ["Contents"])  # fmt: skip
    out = tmp / f"plain-restore-{run}"
    out.mkdir()

    def plain() -> None:
        for key in keys:
            client.download_file(bucket, key, str(out / key.rsplit("/", 1)[1]), Config=TRANSFER)

    def ours() -> None:
        [result] = restore_topic(store, "bench", tmp / f"restore-{run}", threads=RESTORE_THREADS)
        assert result.bytes_downloaded == size, (result, size)

    t_ours, t_plain = _both(ours, plain, run)
    shutil.rmtree(out)
    shutil.rmtree(tmp / f"restore-{run}")
    for prefix in (f"plain-{run}/", f"tier-{run}/"):  # keep the server's disk small
        for o in client.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", []):
            client.delete_object(Bucket=bucket, Key=o["Key"])
    return t_ours, t_plain, size


def bench_latency(tmp: Path, endpoint: str, bucket: str, segment_mb: int, run: int) -> float:
    logs = tmp / f"lat-{run}"
    write_topic(logs, 1, segment_mb)
    config = _config(logs, f"s3://{bucket}/lat-{run}", endpoint)
    sidecar = Sidecar(config)
    thread = threading.Thread(target=sidecar.run, daemon=True)
    thread.start()
    manifests = ManifestStore(config.open_store())
    while len(manifests.load("bench", 0)[0].finished()) < 1:
        time.sleep(0.01)
    value = os.urandom(MIB - 200)
    with LogDirectory(logs) as log_dir:  # fill a second segment; the roll is at its end
        log = log_dir.get_or_create("bench", 0)
        for i in range(segment_mb):
            log.append(build_batch([Record(0, int(time.time() * 1000), b"x%d" % i, value, ())]))
        rolled = time.perf_counter()
        log.roll()
        log_dir.flush()
    while len(manifests.load("bench", 0)[0].finished()) < 2:
        time.sleep(0.01)
    latency = time.perf_counter() - rolled
    sidecar.stop()
    thread.join(timeout=60)
    return latency


def _summary(name: str, runs: list[tuple[float, float, int]]) -> dict[str, Any]:
    ours = [size / t / MIB for t, _, size in runs]
    plain = [size / p / MIB for _, p, size in runs]
    ratios = [o / p for o, p in zip(ours, plain, strict=True)]
    return {
        f"{name}_mib_s": {"median": statistics.median(ours), "best": max(ours)},
        f"boto3_{name}_mib_s": {"median": statistics.median(plain), "best": max(plain)},
        f"{name}_vs_boto3": {"median": statistics.median(ratios), "best": max(ratios),
                             "best_vs_best": max(ours) / max(plain),
                             "per_round": [round(r, 3) for r in ratios]},
    }  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--segments", type=int, default=4)
    parser.add_argument("--segment-mb", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    ups, downs, lats = [], [], []
    with tempfile.TemporaryDirectory(prefix="kt-bench-") as tmp_name:
        tmp = Path(tmp_name)
        with weed_server(tmp / "weed", bucket="bench") as server:
            os.environ.update(server.env)
            write_topic(tmp / "logs", args.segments, args.segment_mb)
            for r in range(args.rounds):
                ups.append(bench_upload(tmp / "logs", server.endpoint, "bench", r))
                downs.append(bench_restore(tmp, server.endpoint, "bench", r))
                _print_round(r, ups[-1], downs[-1], args.json)
            for r in range(min(args.rounds, 3)):
                lats.append(bench_latency(tmp, server.endpoint, "bench", args.segment_mb, r))
    report: dict[str, Any] = {"segments": args.segments, "segment_mb": args.segment_mb,
                              "rounds": args.rounds, "bytes_per_round": ups[0][2],
                              **_summary("upload", ups), **_summary("restore", downs),
                              "roll_to_finished_s": {"median": statistics.median(lats),
                                                     "best": min(lats)}}  # fmt: skip
    if args.json:
        print(json.dumps(report))
    else:
        for key, value in report.items():
            if isinstance(value, dict):
                value = "  ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}"
                                  for k, v in value.items())  # fmt: skip
            print(f"{key:24} {value}")
    return 0


def _print_round(r: int, up: tuple[float, float, int], down: tuple[float, float, int],
                 quiet: bool) -> None:
    if quiet:
        return
    print(f"round {r}: upload {up[2] / up[0] / MIB:7.1f} MiB/s vs boto3 {up[2] / up[1] / MIB:7.1f}"
          f" ({up[1] / up[0]:.2f}); restore {down[2] / down[0] / MIB:7.1f} MiB/s vs boto3 "
          f"{down[2] / down[1] / MIB:7.1f} ({down[1] / down[0]:.2f})", flush=True)


if __name__ == "__main__":
    sys.exit(main())
