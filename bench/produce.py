"""Benchmark: ``kafkatier produce`` against a plain aiokafka-builder script, whole processes.

    python bench/produce.py [--records 2000000] [--rounds 3] [--compression none|lz4]
                            [--before COMMAND]

One Parquet file of ``--records`` records (``bench/scale_read.py``'s rows: 16-byte keys,
100-byte values), written once, untimed, and read once untimed so every side finds it in the
page cache. Then, each round, in alternating order (each after an untimed ``sync``), three
processes timed from start to exit as a user sees them (interpreter start-up, imports, reading
the file, encoding, writing, closing):

(a) ``kafkatier produce DIR --topic t --input in.parquet --partitions 1 --compression C``
    into a fresh log dir (the topic created, fsynced at the end as every kafkatier write is);
(b) ``python bench/produce.py --aiokafka in.parquet OUT C``: what a user would otherwise write:
    pyarrow reads the file, aiokafka's ``DefaultRecordBatchBuilder`` (its C extension) builds
    v2 batches of at most 1 MiB with offsets numbered from 0, and the bytes go to one file
    (no index, no log dir, no fsync: less than (a) does);
(c) ``python bench/produce.py --floor in.parquet OUT``: the floor under any producer of durable
    records from this file: pyarrow reads it in chunks and the key and value bytes go to one
    file, written back as they come and fsynced (no record framing, no encoding: the least (a)
    must do with the same bytes).

All run as a user's Python does, with bytecode caches (:data:`USER_ENV`), after one untimed
run of each. Printed: the command, each round's seconds and the median ratio (a)/(b) (issue
18's goal: 0.5), and the floor's own median ratio (what the goal can reach on this machine
at best). ``--before COMMAND``: a fourth side, another kafkatier (an older checkout's
console script) run as (a) in the same rounds, with its own median ratio to (b), so that a
change is judged against the code before it under the same load.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
MAX_BATCH = 1 << 20


def aiokafka_script(source: str, out: str, compression: str) -> None:
    """Side (b), run in its own process (module docstring)."""
    import pyarrow.parquet as pq
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    codec = {"none": 0, "lz4": 3}[compression]
    table = pq.read_table(source)
    keys, values = table.column("key").to_pylist(), table.column("value").to_pylist()
    now = int(time.time() * 1000)
    with open(out, "wb") as sink:
        builder = DefaultRecordBatchBuilder(2, codec, 0, -1, -1, -1, MAX_BATCH)
        first = 0
        for i in range(len(values)):
            if builder.append(i - first, now, keys[i], values[i], []) is None:
                built = builder.build()
                built[0:8] = first.to_bytes(8, "big")
                sink.write(built)
                builder = DefaultRecordBatchBuilder(2, codec, 0, -1, -1, -1, MAX_BATCH)
                first = i
                builder.append(0, now, keys[i], values[i], [])
        built = builder.build()
        built[0:8] = first.to_bytes(8, "big")
        sink.write(built)


def floor_script(source: str, out: str) -> None:
    """Side (c), run in its own process (module docstring). Read and written as kafkatier
    produce does, without encoding: the file in chunks of 256 Ki rows (``read_table`` of the
    whole file, about 0.9 GB resident, and one write of it took 1.1-3.9 s on this machine), the
    kernel asked to start writing back every 8 MiB (kafkatier's ``start_writeback``: 12 ms of
    imports) so that the final fsync finds little left."""
    import pyarrow.parquet as pq

    from kafkatier.storage.fsutil import start_writeback

    with open(out, "wb", buffering=0) as sink:
        done = behind = 0
        for chunk in pq.ParquetFile(source).iter_batches(256 * 1024):
            for name in ("key", "value"):
                data = chunk.column(name).buffers()[2]  # the bytes of the binary column
                done += sink.write(data)
            if done - behind >= 8 << 20:
                start_writeback(sink.fileno(), behind, done - behind)
                behind = done
        os.fsync(sink.fileno())


USER_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
"""The environment both sides run in: Python writes and reads its bytecode caches, as a
user's does (a sandbox that sets PYTHONDONTWRITEBYTECODE made every run compile kafkatier's
modules again, while aiokafka's came compiled from its install)."""


def timed(command: list[str]) -> float:
    began = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=USER_ENV)
    return time.perf_counter() - began


def _side(name: str, command: list[str], work: Path, r: int, source: Path,
          compression: str) -> tuple[list[str], Path]:  # fmt: skip
    """One side's whole command line in round ``r`` and where it writes (removed after it)."""
    if name == "aiokafka script":
        out = work / f"out-{r}.log"
        return [*command, "--aiokafka", str(source), str(out), compression], out
    if name == "floor":
        out = work / f"floor-{r}.bin"
        return [*command, "--floor", str(source), str(out)], out
    logs = work / f"logs-{name.replace(' ', '-')}-{r}"
    return [*command, "produce", str(logs), "--topic", "t", "--input", str(source),
            "--partitions", "1", "--compression", compression], logs  # fmt: skip


def _rounds(args: argparse.Namespace, work: Path, source: Path) -> dict[str, list[float]]:
    """Each side's seconds per timed round, in alternating order (module docstring)."""
    commands = {"kafkatier produce": [str(Path(sys.executable).with_name("kafkatier"))],
                "aiokafka script": [sys.executable, __file__],
                "floor": [sys.executable, __file__]}  # fmt: skip
    if args.before:
        commands["before"] = shlex.split(args.before)
    times: dict[str, list[float]] = {name: [] for name in commands}
    for r in range(-1, args.rounds):  # round -1: untimed, writes every side's bytecode caches
        sides = [(name, *_side(name, command, work, r, source, args.compression))
                 for name, command in commands.items()]  # fmt: skip
        for name, command, out in sides if r % 2 == 0 else sides[::-1]:
            took = timed(command)
            if r >= 0:
                times[name].append(took)
            shutil.rmtree(out, ignore_errors=True)  # 240 MB a side and round
            out.unlink(missing_ok=True)
            os.sync()  # untimed: no side pays for the writeback of the one before it
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--compression", choices=("none", "lz4"), default="none")
    parser.add_argument("--before", metavar="COMMAND",
                        help="also time this kafkatier command (e.g. an older checkout's "
                             "console script) as a third side of every round")  # fmt: skip
    parser.add_argument("--aiokafka", nargs=3, metavar=("IN", "OUT", "CODEC"),
                        help=argparse.SUPPRESS)  # fmt: skip
    parser.add_argument("--floor", nargs=2, metavar=("IN", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.aiokafka:
        aiokafka_script(*args.aiokafka)
        return 0
    if args.floor:
        floor_script(*args.floor)
        return 0
    sys.path.insert(0, str(HERE))
    import pyarrow.parquet as pq
    from scale_read import rows

    work = Path(tempfile.mkdtemp(prefix="bench-produce-"))
    try:
        source = work / "in.parquet"
        pq.write_table(rows(args.records), source)
        source.read_bytes()  # in the page cache for both sides
        times = _rounds(args, work, source)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    before = f" --before '{args.before}'" if args.before else ""
    print(f"command: python bench/produce.py --records {args.records} --rounds {args.rounds} "
          f"--compression {args.compression}{before}")  # fmt: skip
    theirs = times["aiokafka script"]
    for r in range(args.rounds):
        print(f"round {r}: " + ", ".join(f"{name} {t[r]:.2f} s" for name, t in times.items())
              + f", ratio {times['kafkatier produce'][r] / theirs[r]:.2f}")  # fmt: skip
    for name in (n for n in times if n != "aiokafka script"):
        ratio = statistics.median(x / y for x, y in zip(times[name], theirs, strict=True))
        goal = (
            " (the floor: no producer of these durable bytes can do better)"
            if name == "floor"
            else " (goal <= 0.5)"
        )
        print(f"median ratio {name} / aiokafka script: {ratio:.2f}{goal}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
