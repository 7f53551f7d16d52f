"""Benchmark: tiering upload and restore throughput against plain boto3, and roll-to-FINISHED.

    python bench/tiering.py [--segments N] [--segment-mb M] [--rounds K] [--json]

Starts a SeaweedFS ``weed mini`` S3 server on 127.0.0.1 (the test server, tiering/store/weed.py),
writes a tiered topic of N closed segments of about M MiB each with kafkatier's log engine, then
runs a warm-up round and then K rounds; each round times, back to back and in an order rotated
from round to round (the machine is shared and noisy, so all sides of a round see the same
conditions):

(a) upload: one sidecar pass (``Tierer.run_once``: orphan sweep, manifest commits, multipart
    upload with per-part checksum checks, SHA-256, retention) against boto3 uploading the
    very same files (every ``.log``, ``.index``, ``.timeindex``, ``.txnindex`` and producer
    snapshot the pass uploads), same part size, part concurrency 4: as a loop of
    ``upload_file`` ("boto3", the issue's baseline), and as one s3transfer manager with every
    file queued ("boto3_manager": 4 requests in flight across files, as ours);
(b) restore: ``restore_topic`` (download, SHA-256 check, rename into place, checkpoints) against
    boto3 downloading the same objects: a loop of ``download_file`` and one manager;
(c) latency: the time from a segment roll (of an M MiB segment) to its manifest entry being
    COPY_SEGMENT_FINISHED, with the sidecar loop watching the log dir (inotify); Kafka's copier
    runs every 30 s by default (remote.log.manager.task.interval.ms).

Reported: per round each throughput and the ratio kafkatier / boto3, then per contender the
median and best throughput and the median CPU seconds of this process (client side only; the
server runs beside it on the same cores), and the ratios' median, best and per round.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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
from boto3.s3.transfer import TransferConfig, create_transfer_manager

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "tiering"))
from tier_fixtures import only

from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record
from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.metadata.local import LocalPartition
from kafkatier.tiering.metadata.manifest_copy import COPY_NAME
from kafkatier.tiering.metadata.manifest_store import ManifestStore
from kafkatier.tiering.read.restore import restore_topic
from kafkatier.tiering.sidecar.loop import Sidecar
from kafkatier.tiering.sidecar.tierer import Tierer
from kafkatier.tiering.store.weed import weed_server

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


Timing = dict[str, tuple[float, float]]
"""Contender -> (wall seconds, CPU seconds of this process) for one round."""


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _round(contenders: dict[str, Callable[[], object]], run: int) -> Timing:
    """Every contender once, back to back, the order rotated from round to round so none is
    always first (or always last) on a noisy machine."""
    names = list(contenders)
    shift = run % len(names)
    timing: Timing = {}
    for name in names[shift:] + names[:shift]:
        c0, t0 = _cpu(), time.perf_counter()
        contenders[name]()
        timing[name] = (time.perf_counter() - t0, _cpu() - c0)
    return timing


def _manager(client: Any) -> Any:
    """One s3transfer manager for all the files: ``max_concurrency`` requests in flight in
    total, the most boto3 does with the same concurrency."""
    return create_transfer_manager(client, TRANSFER)


def bench_upload(logs: Path, endpoint: str, bucket: str, run: int) -> tuple[Timing, int]:
    files = tiered_files(logs)
    size = sum(p.stat().st_size for p in files)
    client = _client(endpoint)
    client.head_bucket(Bucket=bucket)  # connect outside the timing, as for ours
    # Each round tiers to a new prefix: the partition's copy of the last round's manifest would
    # (rightly) stop the sidecar, which takes a manifest gone from its store for lost data.
    (logs / "bench-0" / COPY_NAME).unlink(missing_ok=True)
    tierer = Tierer(_config(logs, f"s3://{bucket}/tier-{run}", endpoint))
    tierer.store.head("warm-up")  # create the client outside the timing, as for boto3's

    def loop() -> None:
        for p in files:
            client.upload_file(str(p), bucket, f"plain-{run}/{p.name}", Config=TRANSFER)

    def manager() -> None:
        with _manager(client) as mgr:
            for f in [mgr.upload(str(p), bucket, f"mgr-{run}/{p.name}") for p in files]:
                f.result()

    def ours() -> None:
        result = tierer.run_once()
        assert result.failures == 0 and result.total("uploaded_bytes") == size, result

    return _round({"kafkatier": ours, "boto3": loop, "boto3_manager": manager}, run), size


def bench_restore(tmp: Path, endpoint: str, bucket: str, run: int) -> tuple[Timing, int]:
    store = _config(tmp, f"s3://{bucket}/tier-{run}", endpoint).open_store()
    store.head("warm-up")  # create the client outside the timing, as for boto3's
    client = _client(endpoint)
    listed = client.list_objects_v2(Bucket=bucket, Prefix=f"plain-{run}/")["Contents"]
    keys, size = [o["Key"] for o in listed], sum(o["Size"] for o in listed)
    outs = [tmp / f"{name}-restore-{run}" for name in ("loop", "mgr", "ours")]
    outs[0].mkdir()
    outs[1].mkdir()

    def loop() -> None:
        for key in keys:
            client.download_file(bucket, key, str(outs[0] / key.rsplit("/", 1)[1]),
                                 Config=TRANSFER)  # fmt: skip

    def manager() -> None:
        with _manager(client) as mgr:
            for f in [mgr.download(bucket, k, str(outs[1] / k.rsplit("/", 1)[1])) for k in keys]:
                f.result()

    def ours() -> None:
        [result] = restore_topic(store, "bench", outs[2], threads=RESTORE_THREADS)
        assert result.bytes_downloaded == size, (result, size)

    timing = _round({"kafkatier": ours, "boto3": loop, "boto3_manager": manager}, run)
    for out in outs:
        shutil.rmtree(out)
    for prefix in (f"plain-{run}/", f"mgr-{run}/", f"tier-{run}/"):  # keep the disk small
        for o in client.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", []):
            client.delete_object(Bucket=bucket, Key=o["Key"])
    return timing, size


def bench_latency(tmp: Path, endpoint: str, bucket: str, segment_mb: int, run: int) -> float:
    logs = tmp / f"lat-{run}"
    write_topic(logs, 1, segment_mb)
    config = _config(logs, f"s3://{bucket}/lat-{run}", endpoint)
    sidecar = Sidecar(config)
    thread = threading.Thread(target=sidecar.run, daemon=True)
    thread.start()
    manifests = ManifestStore(config.open_store())
    while len(manifests.load(only(manifests.store, "bench", 0))[0].finished()) < 1:
        time.sleep(0.01)
    value = os.urandom(MIB - 200)
    with LogDirectory(logs) as log_dir:  # fill a second segment; the roll is at its end
        log = log_dir.get_or_create("bench", 0)
        for i in range(segment_mb):
            log.append(build_batch([Record(0, int(time.time() * 1000), b"x%d" % i, value, ())]))
        rolled = time.perf_counter()
        log.roll()
        log_dir.flush()
    while len(manifests.load(only(manifests.store, "bench", 0))[0].finished()) < 2:
        time.sleep(0.01)
    latency = time.perf_counter() - rolled
    sidecar.stop()
    thread.join(timeout=60)
    return latency


def _summary(name: str, runs: list[tuple[Timing, int]]) -> dict[str, Any]:
    """Median and best throughput (MiB/s) and median CPU seconds per contender, and the
    ratios kafkatier / boto3 (the upload_file/download_file loop and the shared manager)."""
    out: dict[str, Any] = {}
    rates = {who: [size / t[who][0] / MIB for t, size in runs] for who in runs[0][0]}
    for who, values in rates.items():
        cpu = statistics.median(t[who][1] for t, _ in runs)
        out[f"{name}_{who}_mib_s"] = {"median": statistics.median(values), "best": max(values),
                                      "cpu_s_median": cpu}  # fmt: skip
    for base in ("boto3", "boto3_manager"):
        ratios = [o / b for o, b in zip(rates["kafkatier"], rates[base], strict=True)]
        out[f"{name}_vs_{base}"] = {"median": statistics.median(ratios), "best": max(ratios),
                                    "best_vs_best": max(rates["kafkatier"]) / max(rates[base]),
                                    "per_round": [round(r, 2) for r in ratios]}  # fmt: skip
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--segments", type=int, default=4)
    parser.add_argument("--segment-mb", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    ups: list[tuple[Timing, int]] = []
    downs: list[tuple[Timing, int]] = []
    lats: list[float] = []
    with tempfile.TemporaryDirectory(prefix="kt-bench-") as tmp_name:
        tmp = Path(tmp_name)
        with weed_server(tmp / "weed", bucket="bench") as server:
            os.environ.update(server.env)
            write_topic(tmp / "logs", args.segments, args.segment_mb)
            for r in range(-1, args.rounds):  # round -1 warms both sides up, not counted
                up = bench_upload(tmp / "logs", server.endpoint, "bench", r)
                down = bench_restore(tmp, server.endpoint, "bench", r)
                if r >= 0:
                    ups.append(up)
                    downs.append(down)
                    _print_round(r, up, down, args.json)
            for r in range(3):
                lats.append(bench_latency(tmp, server.endpoint, "bench", args.segment_mb, r))
    report: dict[str, Any] = {"segments": args.segments, "segment_mb": args.segment_mb,
                              "rounds": args.rounds, "bytes_per_round": ups[0][1],
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
            print(f"{key:30} {value}")
    return 0


def _print_round(r: int, up: tuple[Timing, int], down: tuple[Timing, int], quiet: bool) -> None:
    if quiet:
        return
    parts = []
    for name, (timing, size) in (("upload", up), ("restore", down)):
        rates = {who: size / t / MIB for who, (t, _) in timing.items()}
        parts.append(f"{name} " + " ".join(f"{who} {v:.1f}" for who, v in rates.items())
                     + f" ratio {rates['kafkatier'] / rates['boto3']:.2f}")  # fmt: skip
    print(f"round {r} (MiB/s): " + "; ".join(parts), flush=True)


if __name__ == "__main__":
    sys.exit(main())
