"""Benchmark: key compaction (Kafka's LogCleaner, ``kafkatier.storage.cleaner.compact``) against a
plain read-and-rewrite of the same segments, in the same run.

    python bench/compaction.py [--records N] [--keys K] [--dedupe-mb M] [--codec C]
                               [--rounds R] [--read-ahead both] [--json]

Writes a partition of N records over K distinct keys (16-byte keys, 100-byte values, 100
records per batch, keys in random order; ``--codec``: batches compressed with it, ``none`` by
default, the issue's workload) through ``Log.append``, then, each on a fresh copy:

(a) plain rewrite: every batch read through the cleaner's segment store (the cleaner's chunk
    size), its header parsed, and appended as stored (compressed batches stay compressed),
    indexed, to a new ``.cleaned`` segment, which is finished (final time-index entry, indexes
    trimmed) and fsynced: the I/O and framing work of a cleaning with nothing filtered;
(b) compaction: ``compact_log`` with ``min.cleanable.dirty.ratio=0`` (map budget M MiB);
(c) with a codec, one decode of every batch of the segments (read first, not timed) by the
    cleaner's own decoder (``compressed.inflate``, the codec libraries through its kernels):
    the least any compaction does (it reads every key), so plain time over this time bounds
    the ratio a compaction on one core can reach (where the process has a second core, the
    cleaner decodes in a thread of its own, ``storage.cleaner.read_ahead``: the CPU-time ratio
    then shows both threads' time);
(d) with a codec, the records of every batch the compaction rebuilt (its output's batches that
    are not an input batch kept whole: another CRC) compressed once more with the codec at
    Kafka's default level (``record.compression.compress``, one core, not the cleaner's code):
    with (c), the codec work no compaction that keeps these records can avoid, as Kafka's
    cleaner decodes every batch and compresses what it keeps of a batch again. Plain time over
    that work spread over the process's cores (``codec floor``) bounds the ratio any compaction
    here can reach, however well its threads share the cores.

``--read-ahead both``: (b) also with the cleaner's read-ahead thread off (``serial``, as on a
one-core process), on its own fresh copy in the same round, so the thread's gain is measured side
by side (the compacted segments are the same either way: tests/storage/cleaner/test_read_ahead.py).

R rounds, each timing both (or all three) back to back on fresh copies (the order rotating), so
all see the same machine load. Reports, per round, wall and CPU seconds of both and their ratio
(compaction speed over plain speed = plain time over compaction time; goal: at least 0.5), the
median and worst ratio over the rounds and the ratio of the best times, records/s and MB/s (of
input) of the best runs, the map build's time within each compaction (``index_seconds``, Kafka's
"Indexed ... in ... seconds"), and, in a fresh process, the resident set before compaction and its
peak during compaction (``/proc/self/clear_refs`` resets the mark), against the map budget.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from kafkatier.storage.arrow.codec import encode_arrow
from kafkatier.storage.cleaner import read_ahead
from kafkatier.storage.cleaner.compact import compact_log
from kafkatier.storage.cleaner.compressed import Scratch, inflate
from kafkatier.storage.cleaner.segment_store import LocalSegmentStore
from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.log.batch_position import BatchInfo
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.log import Log
from kafkatier.storage.record.compression import compress, decompress
from kafkatier.storage.wire import (
    ATTR_CODEC_MASK,
    ATTRIBUTES_OFFSET,
    BATCH_HEADER_SIZE,
    CRC_OFFSET,
    LOG_OVERHEAD,
    OFFSET_AND_LENGTH,
    Codec,
)

TOPIC = "bench"
NOW_MS = 1_700_000_000_000


def config(dedupe_mb: float) -> LogConfig:
    return LogConfig.from_properties(
        {
            "cleanup.policy": "compact",
            "min.cleanable.dirty.ratio": "0",
            "log.cleaner.dedupe.buffer.size": str(int(dedupe_mb * (1 << 20))),
        },
        source="bench",
    )


def build(path: Path, records: int, keys: int, codec: str, cfg: LogConfig) -> None:
    rng = np.random.default_rng(7)
    key_ids = rng.integers(0, keys, records)
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz012345", np.uint8)
    with LogDirectory(path, config_for=lambda _t: cfg, clock=lambda: NOW_MS) as logs:
        log = logs.get_or_create(TOPIC, 0)
        step = 100_000
        for start in range(0, records, step):
            ids = key_ids[start : start + step]
            n = len(ids)
            key_col = pa.array([b"key-%012d" % k for k in ids.tolist()], pa.binary())
            vals = letters[rng.integers(0, len(letters), n * 100)].tobytes()
            value_col = pa.array([vals[i * 100 : (i + 1) * 100] for i in range(n)], pa.binary())
            table = pa.table({"key": key_col, "value": value_col})
            encoded = encode_arrow(table, codec=codec, timestamp=NOW_MS, max_batch_records=100)
            log.append(bytes(encoded.data))
        log.roll()


def open_log(path: Path, cfg: LogConfig) -> tuple[LogDirectory, Log]:
    logs = LogDirectory(path, config_for=lambda _t: cfg, clock=lambda: NOW_MS)
    log = logs.get(TOPIC, 0)
    assert log is not None
    return logs, log


def plain_rewrite(log: Log) -> tuple[int, int]:
    """Every non-active segment read and written back whole; returns (records, bytes)."""
    store = LocalSegmentStore(log, io_buffer_size=max(log.config.io_buffer_size // 2, 1 << 16))
    records = size = 0
    for info in store.segment_infos()[:-1]:
        cleaned = store.create_cleaned(info.base_offset)
        data, infos = bytearray(), []
        for batch in store.read_batches(info.base_offset):
            infos.append(BatchInfo(len(data), batch.size_in_bytes, batch.last_offset,
                                   batch.max_timestamp))  # fmt: skip
            data += batch.buffer
            records += batch.records_count
            if len(data) >= store.io_buffer_size:
                cleaned.append_batches(bytes(data), infos)
                data, infos = bytearray(), []
        if infos:
            cleaned.append_batches(bytes(data), infos)
        cleaned.segment.on_become_inactive()
        cleaned.segment.flush()
        size += info.size
        cleaned.segment.delete()
    return records, size


def segment_bytes(source: Path) -> list[bytes]:
    """The segments under ``source``, read for (c) (once a run, not timed)."""
    return [path.read_bytes() for path in sorted(source.rglob("*.log"))]


def decode_once(segments: list[bytes]) -> float:
    """Seconds to decompress every batch of ``segments`` once ((c) above)."""
    scratch = Scratch()
    started = time.perf_counter()
    for data in segments:
        pos = 0
        while (run := inflate(data, pos, 4 << 20, scratch)) is not None:
            pos = run.real_position(run.data.shape[0])
    return time.perf_counter() - started


def _batches(data: bytes) -> list[tuple[int, bytes, int, bytes]]:
    """(base offset, CRC field, codec id, records) of each whole batch of a ``.log``."""
    out, pos = [], 0
    while pos + LOG_OVERHEAD <= len(data):
        base, length = OFFSET_AND_LENGTH.unpack_from(data, pos)
        end = pos + LOG_OVERHEAD + length
        if end > len(data):
            break
        attrs = int.from_bytes(data[pos + ATTRIBUTES_OFFSET : pos + ATTRIBUTES_OFFSET + 2], "big")
        out.append((base, data[pos + CRC_OFFSET : pos + CRC_OFFSET + 4],
                    attrs & ATTR_CODEC_MASK, data[pos + BATCH_HEADER_SIZE : end]))  # fmt: skip
        pos = end
    return out


def rebuilt_records(compacted: Path, segments: list[bytes]) -> list[tuple[Codec, bytes]]:
    """The records (decoded) of each compressed batch in ``compacted``'s segments that is not
    one of ``segments``' batches kept whole ((d) above; read once a run, not timed)."""
    source = {(base, crc) for data in segments for base, crc, _, _ in _batches(data)}
    return [(Codec(codec), decompress(Codec(codec), records))
            for data in segment_bytes(compacted) for base, crc, codec, records in _batches(data)
            if codec and (base, crc) not in source]  # fmt: skip


def recompress_once(rebuilt: list[tuple[Codec, bytes]]) -> float:
    """Seconds to compress every rebuilt batch's records once at the codec's default level."""
    started = time.perf_counter()
    for codec, records in rebuilt:
        compress(codec, records)
    return time.perf_counter() - started


def _cpu_seconds() -> float:
    """User + system CPU time of this process (page faults and syscalls count)."""
    t = os.times()
    return t.user + t.system


def timed(path: Path, cfg: LogConfig, work: str) -> dict[str, Any]:
    logs, log = open_log(path, cfg)
    start, cpu = time.perf_counter(), _cpu_seconds()
    if work == "plain":
        records, size = plain_rewrite(log)
        extra: dict[str, Any] = {}
    else:
        result = compact(log, read_ahead.ENABLED and work != "serial")
        records, size = result.records_read, result.bytes_before - log.active_segment.size
        extra = {"passes": result.passes, "bytes_after": result.bytes_after,
                 "records_removed": result.records_removed,
                 "index_seconds": result.index_seconds}  # fmt: skip
    seconds, cpu = time.perf_counter() - start, _cpu_seconds() - cpu
    logs.close()
    rates = {"records_per_s": records / seconds, "mb_per_s": size / seconds / 1e6}
    return {"seconds": seconds, "cpu_seconds": cpu, "records": records, "bytes": size, **rates,
            **extra}  # fmt: skip


def compact(log: Log, ahead: bool) -> Any:
    """``compact_log`` of the whole log, the cleaner reading ahead in a thread or not."""
    was, read_ahead.ENABLED = read_ahead.ENABLED, ahead
    try:
        return compact_log(log, now_ms=NOW_MS, first_dirty_offset=None)
    finally:
        read_ahead.ENABLED = was


def one_round(
    tmp: Path, source: Path, cfg: LogConfig, index: int, segments: list[bytes] | None,
    works: tuple[str, ...] = ("plain", "compact"),
) -> dict[str, Any]:  # fmt: skip
    """The rewrites (``works``) on fresh copies, back to back; the order rotates between
    rounds so none always runs first. Dirty pages of the copy are written back before timing.
    ``segments``: the source's, for (c) (None without a codec)."""
    shift = index % len(works)
    order = works[shift:] + works[:shift]
    out: dict[str, Any] = {"order": list(order)}
    for work in order:
        copy = tmp / f"{work}{index}"
        shutil.copytree(source, copy)
        os.sync()
        out[work] = timed(copy, cfg, work)
        if work == "compact" and segments is not None:
            rebuilt = rebuilt_records(copy, segments)
            out["rebuilt_batches"] = len(rebuilt)
            out["recompress_seconds"] = recompress_once(rebuilt)
            del rebuilt
        shutil.rmtree(copy)
    out["ratio"] = out["plain"]["seconds"] / out["compact"]["seconds"]
    if "serial" in out:
        out["serial_ratio"] = out["plain"]["seconds"] / out["serial"]["seconds"]
    if segments is not None:
        out["decode_seconds"] = decode_once(segments)
        out["decode_ceiling"] = out["plain"]["seconds"] / out["decode_seconds"]
        floor = out["decode_seconds"] + out["recompress_seconds"]
        out["codec_floor_ceiling"] = out["plain"]["seconds"] / (floor / read_ahead.cores())
    out["cpu_ratio"] = out["plain"]["cpu_seconds"] / out["compact"]["cpu_seconds"]
    return out


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def rss_child(path: Path, dedupe_mb: float) -> None:
    """In a fresh process: open the log, reset the peak-RSS mark (``clear_refs`` 5), compact,
    and print the resident set before and the peak during compaction (KiB)."""
    warm = path.parent / "rss-warm"
    build(warm, 2000, 100, "none", config(dedupe_mb))
    timed(warm, config(1), "compact")  # numba code loaded before measuring, as a cleaner thread
    logs, log = open_log(path, config(dedupe_mb))
    before = _status_kib("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")
    compact_log(log, now_ms=NOW_MS, first_dirty_offset=None)
    peak = _status_kib("VmHWM")
    logs.close()
    print(before, peak)


def peak_rss(path: Path, dedupe_mb: float) -> tuple[int, int]:
    """(RSS before compaction, peak RSS during it), bytes, from :func:`rss_child`."""
    argv = [sys.executable, __file__, "--rss-child", str(path), "--dedupe-mb", str(dedupe_mb)]
    out = subprocess.run(argv, check=True, capture_output=True, text=True)
    before, peak = out.stdout.split()[-2:]
    return int(before) * 1024, int(peak) * 1024


def summarize(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-round ratios (compaction speed over plain speed, i.e. plain time over compaction
    time, both from the same round), their median and worst, and the ratio of best times."""
    best = {w: min(rounds, key=lambda r: r[w]["seconds"])[w] for w in ("plain", "compact")}
    ratios = [r["ratio"] for r in rounds]
    cpu = [r["cpu_ratio"] for r in rounds]
    serial = [r["serial_ratio"] for r in rounds if "serial_ratio" in r]
    both = {"serial_ratios": serial, "median_serial_ratio": statistics.median(serial or [0])}
    return {
        **(both if serial else {}),
        "plain": best["plain"], "compact": best["compact"], "ratios": ratios,
        "median_ratio": statistics.median(ratios), "worst_ratio": min(ratios),
        "best_times_ratio": best["plain"]["seconds"] / best["compact"]["seconds"],
        "cpu_ratios": cpu, "median_cpu_ratio": statistics.median(cpu),
    }  # fmt: skip


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Build the input, time both rewrites on copies round by round, measure RSS."""
    cfg = config(args.dedupe_mb)
    with tempfile.TemporaryDirectory(prefix="kafkatier-bench-") as tmp:
        source = Path(tmp) / "source"
        started = time.perf_counter()
        build(source, args.records, args.keys, args.codec, cfg)
        build_s = time.perf_counter() - started
        started = time.perf_counter()
        warm = Path(tmp) / "warm"
        shutil.copytree(source, warm)
        timed(warm, cfg, "compact")  # not timed: numba's first calls (cache load or compile)
        shutil.rmtree(warm)  # and a process's first compaction at this size (without it round
        # 0's compaction took 1.6-1.9x the others', 2026-11-30)
        warm_s = time.perf_counter() - started
        segments = segment_bytes(source) if args.codec != "none" else None
        works = ("plain", "compact", *(("serial",) if args.read_ahead == "both" else ()))
        rounds = [one_round(Path(tmp), source, cfg, i, segments, works)
                  for i in range(args.rounds)]  # fmt: skip
        del segments
        rss_copy = Path(tmp) / "rss"
        shutil.copytree(source, rss_copy)
        rss_before, rss_peak = peak_rss(rss_copy, args.dedupe_mb)
    summary = summarize(rounds)
    return {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "records": args.records, "keys": args.keys, "codec": args.codec, "rounds": rounds,
        "dedupe_buffer_bytes": int(args.dedupe_mb * (1 << 20)), "build_seconds": build_s,
        "warm_up_seconds": warm_s, **summary, "rss_before_compaction": rss_before,
        "peak_rss_during_compaction": rss_peak, "cpu_count": os.cpu_count(),
        "load_average": os.getloadavg(), "goal_met": summary["median_ratio"] >= 0.5,
        "read_ahead_enabled": read_ahead.ENABLED,
    }  # fmt: skip


def print_report(report: dict[str, Any]) -> None:
    mib = 1 << 20
    plain, compact = report["plain"], report["compact"]
    print(f"command: {report['command']}")
    print(f"input: {report['records']:,} records, {report['keys']:,} keys, codec "
          f"{report['codec']}, {plain['bytes'] / mib:.1f} MiB in segments (built in "
          f"{report['build_seconds']:.1f} s; warm-up compaction {report['warm_up_seconds']:.1f} s, "
          "not timed)")  # fmt: skip
    serial = "serial_ratios" in report
    print("round  first    plain s  compact s  (map build s)  ratio   (CPU s: plain compact "
          "ratio)" + ("   serial s  ratio" if serial else ""))  # fmt: skip
    for i, r in enumerate(report["rounds"]):
        p, c = r["plain"], r["compact"]
        extra = f"   {r['serial']['seconds']:8.3f}  {r['serial_ratio']:5.2f}" if serial else ""
        print(f"{i:5}  {r['order'][0]:>7}  {p['seconds']:7.3f}  {c['seconds']:9.3f}  "
              f"({c['index_seconds']:11.3f})  {r['ratio']:5.2f}   ({p['cpu_seconds']:.3f} "
              f"{c['cpu_seconds']:.3f} {r['cpu_ratio']:.2f}){extra}")  # fmt: skip
    print(f"best of {len(report['rounds'])} rounds each:")
    for name, r in (("plain", plain), ("compact", compact)):
        print(f"{name:>8}: {r['seconds']:7.3f} s  {r['records_per_s']:>12,.0f} records/s  "
              f"{r['mb_per_s']:8.1f} MB/s")  # fmt: skip
    print(f"compaction: {compact['passes']} pass(es), {compact['records_removed']:,} records "
          f"removed, {compact['bytes_after'] / mib:.1f} MiB after")  # fmt: skip
    print(f"speed ratio compact/plain (plain time / compaction time, same round): median "
          f"{report['median_ratio']:.2f}, worst {report['worst_ratio']:.2f}; best times "
          f"{report['best_times_ratio']:.2f}; CPU-time median {report['median_cpu_ratio']:.2f} "
          f"(goal: median >= 0.5: {'met' if report['goal_met'] else 'NOT met'})")  # fmt: skip
    if "serial_ratios" in report:
        print(f"without the read-ahead thread (serial, same rounds): ratios "
              f"{', '.join(f'{x:.2f}' for x in report['serial_ratios'])}, median "
              f"{report['median_serial_ratio']:.2f}, against {report['median_ratio']:.2f} with it"
              + ("" if report["read_ahead_enabled"] else " (off here too: one core)"))  # fmt: skip
    ceilings = [r["decode_ceiling"] for r in report["rounds"] if "decode_ceiling" in r]
    if ceilings:
        best = min(r["decode_seconds"] for r in report["rounds"])
        print(f"one decode of every batch (the least a compaction does): best {best:.3f} s; "
              f"plain time / decode time, median {statistics.median(ceilings):.2f} (no "
              "compaction decoding on one core can pass this ratio)")  # fmt: skip
        rounds = report["rounds"]
        again = min(r["recompress_seconds"] for r in rounds)
        floors = [r["codec_floor_ceiling"] for r in rounds]
        print(f"codec floor: that decode and the {rounds[0]['rebuilt_batches']:,} rebuilt "
              f"batches' records compressed once at the codec's default level (best "
              f"{again:.3f} s), spread over {read_ahead.cores()} core(s): plain time / floor, "
              f"median {statistics.median(floors):.2f} (no compaction that keeps these records "
              "can pass this ratio here)")  # fmt: skip
    before, peak = report["rss_before_compaction"], report["peak_rss_during_compaction"]
    print(f"RSS: {before / mib:.0f} MiB before compaction (log open), peak {peak / mib:.0f} MiB "
          f"during it: +{(peak - before) / mib:.0f} MiB against a map budget of "
          f"{report['dedupe_buffer_bytes'] / mib:g} MiB")  # fmt: skip
    load = ", ".join(f"{x:.1f}" for x in report["load_average"])
    print(f"machine: {report['cpu_count']} CPUs, load average {load} at the end")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--dedupe-mb", type=float, default=128.0)
    parser.add_argument("--codec", default="none")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of the rewrites")
    parser.add_argument("--read-ahead", choices=("auto", "both"), default="auto",
                        help="both: also time compaction without the read-ahead thread")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--rss-child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rss_child is not None:
        rss_child(args.rss_child, args.dedupe_mb)
        return 0
    report = run(args)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_report(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
