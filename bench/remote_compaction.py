"""Benchmark: key compaction of a partition stored only in S3 (``kafkatier.tiering
.remote_compaction``) next to local compaction (``kafkatier.storage.cleaner.compact.compact_log``)
of the same data, in the same run.

    python bench/remote_compaction.py [--records N] [--keys K] [--segment-mb S] [--dedupe-mb M]
                                      [--codec C] [--json]

Starts a SeaweedFS ``weed mini`` S3 server on 127.0.0.1 (the test server, tiering/store/weed.py),
writes a partition of N records over K keys (bench/compaction.py's input: 16-byte keys, 100-byte
values, 100 records per batch; ``--codec``: compressed with it) in segments of S MiB, uploads
every closed segment with the sidecar's uploader and then compacts:

(a) local: ``compact_log`` on a copy of the partition directory;
(b) remote: ``compact_remote`` with no local directory at all (the data exists only in S3):
    batches read by ranged GETs, one cleaned group at a time written to a scratch directory,
    uploaded under new keys and swapped into the manifest, the replaced objects deleted;
(c) plain remote rewrite, run before (b) on the same objects: every remote segment's ``.log``
    downloaded whole and uploaded again under a scratch key with the store's own transfers
    (``get_file``, ``put_file``: its parallel parts), the least a remote rewrite of the same
    bytes costs; the copies are deleted after, untimed. The issue's goal for (b) is half of
    (c)'s speed, as for local compaction against a local rewrite (bench/compaction.py).

Each runs in a fresh process that warms numba up on a tiny log first, then resets the peak-RSS
mark (``/proc/self/clear_refs`` 5) and reports wall and CPU seconds, records/s and MB/s of input,
and the resident set before and its peak during the compaction.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compaction import NOW_MS, TOPIC, build, open_log  # bench/compaction.py

from kafkatier.storage.cleaner.compact import compact_log
from kafkatier.storage.config.log_config import LogConfig
from kafkatier.tiering.cleaner.compaction import compact_remote, remote_only
from kafkatier.tiering.copy.upload import Uploader
from kafkatier.tiering.metadata.local import LocalPartition
from kafkatier.tiering.metadata.manifest import object_key
from kafkatier.tiering.metadata.manifest_store import ManifestStore
from kafkatier.tiering.store.s3store import S3Store
from kafkatier.tiering.store.weed import weed_server

BUCKET = "bench-remote-compaction"


def config(segment_mb: int, dedupe_mb: float) -> LogConfig:
    return LogConfig.from_properties({
        "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0",
        "segment.bytes": str(segment_mb << 20),
        "log.cleaner.dedupe.buffer.size": str(int(dedupe_mb * (1 << 20))),
    }, source="bench")  # fmt: skip


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


def child(kind: str, target: str, endpoint: str, cfg: LogConfig, scratch: Path) -> dict[str, Any]:
    """One measured compaction in this (fresh) process."""
    warm = scratch / "warm"
    build(warm, 2000, 100, "none", cfg)
    wlogs, wlog = open_log(warm, cfg)
    compact_log(wlog, now_ms=NOW_MS, first_dirty_offset=None)  # numba loaded, not measured
    wlogs.close()
    store = S3Store(target, endpoint_url=endpoint, region="us-east-1") if kind != "local" else None
    logs = log = None
    if kind == "local":
        logs, log = open_log(Path(target), cfg)
    before = _status_kib("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")
    start, cpu = time.perf_counter(), _cpu()
    if kind == "plain":
        assert store is not None
        out, copies = plain_remote(store, scratch)
    elif store is not None:
        (rp,) = ManifestStore(store).partitions(topic=TOPIC)  # the one partition uploaded
        r = compact_remote(store, rp, config=cfg, local=None, now_ms=NOW_MS, owner="bench",
                           scratch_dir=scratch)  # fmt: skip
        out = {"records": r.records_read, "bytes": r.bytes_before,
               "bytes_after": r.bytes_after, "records_removed": r.records_removed,
               "passes": r.passes, "segments_before": r.segments_before,
               "segments_after": r.segments_after}  # fmt: skip
    else:
        assert log is not None and logs is not None
        c = compact_log(log, now_ms=NOW_MS, first_dirty_offset=None)
        out = {"records": c.records_read, "bytes": c.bytes_before - log.active_segment.size,
               "bytes_after": c.bytes_after, "records_removed": c.records_removed,
               "passes": c.passes, "segments_before": c.segments_before - 1,
               "segments_after": c.segments_after - 1}  # fmt: skip
        logs.close()
    seconds, cpu = time.perf_counter() - start, _cpu() - cpu
    peak = _status_kib("VmHWM")
    if kind == "plain":
        for key in copies:  # untimed
            store.delete(key)
    return {**out, "seconds": seconds, "cpu_seconds": cpu,
            "records_per_s": out["records"] / seconds, "mb_per_s": out["bytes"] / seconds / 1e6,
            "rss_before": before * 1024, "rss_peak": peak * 1024}  # fmt: skip


def plain_remote(store: S3Store, scratch: Path) -> tuple[dict[str, Any], list[str]]:
    """(c) in the module docstring: (its figures, the copies' keys)."""
    manifests = ManifestStore(store)
    (rp,) = manifests.partitions(topic=TOPIC)
    manifest, _ = manifests.load(rp)
    segments = remote_only(manifest, None)
    copies, size = [], 0
    path = scratch / "plain.log"
    for seg in segments:
        key = object_key(rp, seg, "log")
        store.get_file(key, path)
        copies.append(f"{key}.plain-copy")
        store.put_file(copies[-1], path)
        size += path.stat().st_size
        path.unlink()
    n = len(segments)
    out = {"records": 0, "bytes": size, "bytes_after": size, "records_removed": 0,
           "passes": 0, "segments_before": n, "segments_after": n}  # fmt: skip
    return out, copies


def run_child(args: argparse.Namespace, kind: str, target: str, endpoint: str,
              env: dict[str, str], scratch: Path) -> dict[str, Any]:  # fmt: skip
    argv = [sys.executable, __file__, "--child", kind, target, endpoint, str(scratch),
            "--segment-mb", str(args.segment_mb), "--dedupe-mb", str(args.dedupe_mb)]
    done = subprocess.run(argv, check=True, capture_output=True, text=True, env=env)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def upload_all(source: Path, store: S3Store) -> tuple[int, float]:
    """Every closed segment uploaded by the sidecar's uploader; (bytes, seconds)."""
    started = time.perf_counter()
    with LocalPartition(source, TOPIC, 0) as part:
        uploader = Uploader(store, "bench")
        with ThreadPoolExecutor(max_workers=2) as pool:
            entries = list(pool.map(lambda c: uploader.upload(part, c), part.candidates()))
    size = sum(e.size for e in entries if e is not None)
    return size, time.perf_counter() - started


def run(args: argparse.Namespace) -> dict[str, Any]:
    cfg = config(args.segment_mb, args.dedupe_mb)
    with tempfile.TemporaryDirectory(prefix="kafkatier-bench-rc-") as name:
        tmp = Path(name)
        with weed_server(tmp / "weed", bucket=BUCKET) as server:
            env = {**os.environ, **server.env}
            os.environ.update(server.env)
            source = tmp / "source"
            started = time.perf_counter()
            build(source, args.records, args.keys, args.codec, cfg)
            build_s = time.perf_counter() - started
            url = f"s3://{BUCKET}/bench"
            store = S3Store(url, endpoint_url=server.endpoint, region="us-east-1")
            uploaded, upload_s = upload_all(source, store)
            copy = tmp / "local"
            shutil.copytree(source, copy)
            shutil.rmtree(source)  # from here on the partition exists only in S3
            (tmp / "scratch").mkdir()
            local = run_child(args, "local", str(copy), server.endpoint, env, tmp / "scratch")
            plain = run_child(args, "plain", url, server.endpoint, env, tmp / "scratch")
            remote = run_child(args, "remote", url, server.endpoint, env, tmp / "scratch")
    return {"command": " ".join([Path(sys.executable).name, *sys.argv]),
            "records": args.records, "keys": args.keys, "codec": args.codec,
            "segment_mb": args.segment_mb, "dedupe_mb": args.dedupe_mb, "build_seconds": build_s,
            "uploaded_bytes": uploaded,
            "upload_seconds": upload_s, "local": local, "remote": remote, "plain_remote": plain,
            "cpu_count": os.cpu_count(), "load_average": os.getloadavg()}  # fmt: skip


def print_report(r: dict[str, Any]) -> None:
    mib = 1 << 20
    print(f"command: {r['command']}")
    print(f"input: {r['records']:,} records ({r['codec']}), {r['keys']:,} keys, "
          f"{r['uploaded_bytes'] / mib:.1f} "
          f"MiB in {r['segment_mb']} MiB segments, uploaded to SeaweedFS in "
          f"{r['upload_seconds']:.1f} s, then removed locally; map budget {r['dedupe_mb']:g} MiB")
    print("          seconds   CPU s      records/s      MB/s  segments      MiB after  "
          "RSS before  peak")
    for name in ("local", "remote"):
        x = r[name]
        print(f"{name:>7}  {x['seconds']:8.2f} {x['cpu_seconds']:7.2f} {x['records_per_s']:14,.0f}"
              f" {x['mb_per_s']:9.1f}  {x['segments_before']:>3} -> {x['segments_after']:<3}"
              f" {x['bytes_after'] / mib:10.1f}  {x['rss_before'] / mib:7.0f} MiB "
              f"{x['rss_peak'] / mib:4.0f} MiB")  # fmt: skip
    plain = r["plain_remote"]
    print(f"plain remote rewrite (download + upload of every segment): {plain['seconds']:.2f} s, "
          f"{plain['mb_per_s']:.1f} MB/s; remote compaction's speed / its speed: "
          f"{plain['seconds'] / r['remote']['seconds']:.2f} (goal 0.5)")  # fmt: skip
    ratio = r["local"]["seconds"] / r["remote"]["seconds"]
    print(f"remote speed / local speed: {ratio:.2f}; records removed: local "
          f"{r['local']['records_removed']:,}, remote {r['remote']['records_removed']:,}")
    load = ", ".join(f"{x:.1f}" for x in r["load_average"])
    print(f"machine: {r['cpu_count']} CPUs, load average {load} at the end")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--segment-mb", type=int, default=32)
    parser.add_argument("--dedupe-mb", type=float, default=16)
    parser.add_argument("--codec", default="none", help="the batches' codec (bench/compaction.py)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        kind, target, endpoint, scratch = args.child
        cfg = config(args.segment_mb, args.dedupe_mb)
        print(json.dumps(child(kind, target, endpoint, cfg, Path(scratch))))
        return 0
    report = run(args)
    if args.json:
        print(json.dumps(report))
    else:
        print_report(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
