"""Benchmark: what each partition costs ``kafkatier produce``, new topic and existing topic.

    python bench/scale_produce.py [--partitions 8,64,256,1024,4096] [--records 100000]
        [--rounds 1] [--kafkatier PATH[,PATH...]] [--max-open-files N]

One input file of ``--records`` records (16-byte keys, 100-byte values, as
``bench/scale_read.py``'s ``rows()``), written once as Parquet. For each partition count N and
each round, a fresh log dir (all deleted at the end: see ``one_round``), then two whole
processes, timed from start to exit as a user sees them (interpreter start-up, imports, reading
the file, writing, flushing, closing)::

    kafkatier produce DIR --topic scale --input in.parquet --partitions N --compression lz4

the first creating the topic ("new"), the second appending the same records to it
("existing"). With several ``--kafkatier`` executables (e.g. another checkout's venv, to compare
before and after a change), each round runs each of them in turn, in an order rotated from
round to round, so all see the same machine (it is shared and noisy: compare the columns of one
run, not runs). ``--max-open-files`` runs every process under that ``RLIMIT_NOFILE``.
Printed: the command, then per N the median time of each side and its ratio to the same side at
the smallest N.

From a driver: ``run(partitions=[8, 1024], records=100_000)`` returns one dict per N and
executable (``partitions``, ``kafkatier``, ``new_s``, ``existing_s``, the per-round lists).
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale_read import rows

TOPIC = "scale"
DEFAULT_KAFKATIER = str(Path(sys.executable).with_name("kafkatier"))


def produce_command(kafkatier: str, log_dir: Path, source: Path, partitions: int) -> list[str]:
    return [kafkatier, "produce", str(log_dir), "--topic", TOPIC, "--input", str(source),
            "--partitions", str(partitions), "--compression", "lz4"]  # fmt: skip


def timed_process(command: list[str], max_open_files: int | None) -> float | None:
    """Wall time of ``command`` from spawn to exit; None (its error printed) if it fails."""

    def limit() -> None:
        if max_open_files is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (max_open_files, max_open_files))

    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, preexec_fn=limit)
    elapsed = time.perf_counter() - began
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        print(f"  failed, exit {done.returncode}: {' '.join(command)}: {last}", flush=True)
        return None
    return elapsed


def one_round(kafkatier: str, root: Path, source: Path, n: int,
              max_open_files: int | None) -> tuple[float | None, float | None]:  # fmt: skip
    """(new topic, existing topic) seconds of one fresh log dir (None: failed).

    The log dirs are left for the caller to delete when every round is done: ext4 makes files
    created in the seconds after many were deleted look for free inodes past the recently
    deleted ones (``recently_deleted`` in ``find_inode_bit``, 40% of a new 1,024-partition
    topic's samples under ``perf``), which doubled a new topic's time when each round deleted
    the last one's 6,000 files just before (7.0-8.3 s against 3.0 s, 2026-12-01): a cost of
    the benchmark's own deletes, not of creating a topic. The same holds across runs: one
    started within half a minute of another's end (which deletes its log dirs) times that
    search in its new topics (5.5-6.6 s against 3.2-3.3 s at 1,024 partitions)."""
    log_dir = Path(tempfile.mkdtemp(prefix=f"logs-{n}-", dir=root))
    command = produce_command(kafkatier, log_dir / "logs", source, n)
    new = timed_process(command, max_open_files)
    existing = timed_process(command, max_open_files) if new is not None else None
    return new, existing


def run(
    partitions: Sequence[int] = (8, 64, 256, 1024, 4096),
    records: int = 100_000,
    rounds: int = 1,
    kafkatiers: Sequence[str] = (DEFAULT_KAFKATIER,),
    max_open_files: int | None = None,
    root: Path | None = None,
    report: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """One dict per partition count and executable, with the median and per-round times
    (each also given to ``report`` as soon as it is measured)."""
    work = Path(tempfile.mkdtemp(prefix="kafkatier-produce-", dir=root))
    try:
        source = work / "in.parquet"
        pq.write_table(rows(records), source)
        for kafkatier in kafkatiers:  # untimed: compiles and caches the numba kernels
            one_round(kafkatier, work, source, min(partitions), max_open_files)
        results = []
        for n in partitions:
            times: dict[str, list[tuple[float | None, float | None]]] = {k: [] for k in kafkatiers}
            for r in range(rounds):
                turn = r % len(kafkatiers)
                order = [*kafkatiers[turn:], *kafkatiers[:turn]]
                for kafkatier in order:
                    times[kafkatier].append(one_round(kafkatier, work, source, n, max_open_files))
            for kafkatier, pairs in times.items():
                results.append({
                    "partitions": n, "kafkatier": kafkatier, "records": records,
                    "new_s": _median([p[0] for p in pairs]),
                    "existing_s": _median([p[1] for p in pairs]),
                    "new_rounds": [p[0] for p in pairs], "existing_rounds": [p[1] for p in pairs],
                })  # fmt: skip
                if report is not None:
                    report(results[-1])
        return results
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _median(values: list[float | None]) -> float | None:
    """The median, None if any round failed."""
    return None if None in values else statistics.median(v for v in values if v is not None)


def _cell(value: float | None, base: float | None) -> str:
    if value is None:
        return f"{'failed':>18}"
    ratio = f"{value / base:5.2f}x" if base else "   - "
    return f"{value:7.2f} s ({ratio})"


class TablePrinter:
    """Prints each result as a row: times, and their ratio to the same executable's at the
    first (smallest) partition count."""

    def __init__(self) -> None:
        self.first: dict[str, dict[str, Any]] = {}
        print(f"{'parts':>6}  {'new topic':>18}  {'existing topic':>18}  kafkatier", flush=True)

    def __call__(self, row: dict[str, Any]) -> None:
        base = self.first.setdefault(row["kafkatier"], row)
        print(f"{row['partitions']:>6}  {_cell(row['new_s'], base['new_s'])}"
              f"  {_cell(row['existing_s'], base['existing_s'])}  {row['kafkatier']}",
              flush=True)  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", default="8,64,256,1024,4096")
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--kafkatier", default=DEFAULT_KAFKATIER,
                        help="comma-separated executables, compared side by side")  # fmt: skip
    parser.add_argument("--max-open-files", type=int, help="RLIMIT_NOFILE of every process")
    args = parser.parse_args(argv)
    counts = [int(x) for x in args.partitions.split(",")]
    kafkatiers = args.kafkatier.split(",")
    extra = f" --max-open-files {args.max_open_files}" if args.max_open_files else ""
    print(f"command: python bench/scale_produce.py --partitions {args.partitions} --records "
          f"{args.records} --rounds {args.rounds} --kafkatier {args.kafkatier}{extra}")  # fmt: skip
    each = " ".join(produce_command("kafkatier", Path("DIR"), Path("in.parquet"), 0))
    print(f"each: {each.replace('--partitions 0', '--partitions N')}  (new topic, then again)")
    run(counts, args.records, args.rounds, kafkatiers, args.max_open_files, report=TablePrinter())
    return 0


if __name__ == "__main__":
    sys.exit(main())
