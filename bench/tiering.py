"""Benchmark: tiering upload and restore throughput against plain boto3, and roll-to-FINISHED.

    python bench/tiering.py [--segments N] [--segment-mb M] [--repeat K] [--json]

Starts a SeaweedFS ``weed mini`` S3 server on 127.0.0.1 (the test server, tiering/weed.py),
writes a tiered topic of N closed segments of about M MiB each with kafkatier's log engine, then
reports, best of K runs (the machine is shared and noisy):

(a) upload: one sidecar pass (``Tierer.run_once``: manifest commits, multipart upload, S3-ETag
    verification, SHA-256) against boto3 ``upload_file`` of the same files, same part size and
    concurrency;
(b) restore: ``restore_topic`` (download, SHA-256 check, rename into place, checkpoints) against
    boto3 ``download_file`` of the same objects;
(c) latency: the time from a segment roll (of an M MiB segment) to its manifest entry being
    COPY_SEGMENT_FINISHED, with the sidecar loop watching the log dir (inotify); Kafka's copier
    runs every 30 s by default (remote.log.manager.task.interval.ms).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import boto3
from boto3.s3.transfer import TransferConfig

from kafkatier.storage.log_dir import LogDirectory
from kafkatier.storage.records import Record, build_batch
from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.manifest import ManifestStore
from kafkatier.tiering.restore import restore_topic
from kafkatier.tiering.sidecar import Sidecar
from kafkatier.tiering.tierer import Tierer
from kafkatier.tiering.weed import weed_server

MIB = 1 << 20
PART = 8 * MIB
CONCURRENCY = 4
RESTORE_THREADS = int(os.environ.get("KT_RESTORE_THREADS", "4"))


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


def bench_upload(logs: Path, endpoint: str, bucket: str, run: int) -> tuple[float, float, int]:
    files = sorted(p for p in (logs / "bench-0").iterdir() if p.suffix == ".log")[:-1]
    size = sum(p.stat().st_size for p in files)
    cfg = TransferConfig(multipart_threshold=PART, multipart_chunksize=PART,
                         max_concurrency=CONCURRENCY)  # fmt: skip
    client = _client(endpoint)
    t0 = time.perf_counter()
    for p in files:
        client.upload_file(str(p), bucket, f"plain-{run}/{p.name}", Config=cfg)
    plain = time.perf_counter() - t0
    config = _config(logs, f"s3://{bucket}/tier-{run}", endpoint)
    tierer = Tierer(config)
    tierer.store.head("warm-up")  # create the client outside the timing, as for boto3's
    t0 = time.perf_counter()
    result = tierer.run_once()
    ours = time.perf_counter() - t0
    assert result.failures == 0 and result.total("uploaded_segments") == len(files)
    return ours, plain, size


def bench_restore(tmp: Path, endpoint: str, bucket: str, run: int) -> tuple[float, float, int]:
    store = _config(tmp, f"s3://{bucket}/tier-{run}", endpoint).open_store()
    store.head("warm-up")  # create the client outside the timing, as for boto3's
    client = _client(endpoint)
    cfg = TransferConfig(multipart_threshold=PART, multipart_chunksize=PART,
                         max_concurrency=CONCURRENCY)  # fmt: skip
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=bucket, Prefix=f"plain-{run}/")
            ["Contents"]]  # fmt: skip
    out = tmp / f"plain-restore-{run}"
    out.mkdir()
    t0 = time.perf_counter()
    for key in keys:
        client.download_file(bucket, key, str(out / key.rsplit("/", 1)[1]), Config=cfg)
    plain = time.perf_counter() - t0
    size = sum(p.stat().st_size for p in out.iterdir())
    t0 = time.perf_counter()
    restore_topic(store, "bench", tmp / f"restore-{run}", threads=RESTORE_THREADS)
    ours = time.perf_counter() - t0
    shutil.rmtree(out)
    shutil.rmtree(tmp / f"restore-{run}")
    return ours, plain, size


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--segments", type=int, default=4)
    parser.add_argument("--segment-mb", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kt-bench-") as tmp_name:
        tmp = Path(tmp_name)
        with weed_server(tmp / "weed", bucket="bench") as server:
            os.environ.update(server.env)
            write_topic(tmp / "logs", args.segments, args.segment_mb)
            ups = [bench_upload(tmp / "logs", server.endpoint, "bench", r)
                   for r in range(args.repeat)]  # fmt: skip
            downs = [bench_restore(tmp, server.endpoint, "bench", r) for r in range(args.repeat)]
            lats = [bench_latency(tmp, server.endpoint, "bench", args.segment_mb, r)
                    for r in range(args.repeat)]  # fmt: skip
    report = {
        "segments": args.segments, "segment_mb": args.segment_mb,
        "upload_mib_s": max(s / t for t, _, s in ups) / MIB,
        "boto3_upload_file_mib_s": max(s / p for _, p, s in ups) / MIB,
        "restore_mib_s": max(s / t for t, _, s in downs) / MIB,
        "boto3_download_file_mib_s": max(s / p for _, p, s in downs) / MIB,
        "roll_to_finished_s": min(lats),
    }  # fmt: skip
    report["upload_vs_boto3"] = report["upload_mib_s"] / report["boto3_upload_file_mib_s"]
    report["restore_vs_boto3"] = report["restore_mib_s"] / report["boto3_download_file_mib_s"]
    if args.json:
        print(json.dumps(report))
    else:
        for key, value in report.items():
            print(f"{key:28} {value:.3f}" if isinstance(value, float) else f"{key:28} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
