"""``kafkatier run`` end to end in a subprocess, on a small configuration: embedded S3, the Spark
job, the sidecar, restore, replay and checks; exit 0, the report's checks, and no process (S3
server, Spark JVM, Python workers) left behind. A second run in the same folder needs no cleanup:
run.reset wipes what the first one left (checked here without Spark; ``make run`` twice shows it
whole). SIGTERM mid-stream stops everything too."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="kafkatier run needs pyspark")
KAFKATIER = Path(sys.executable).parent / "kafkatier"
BATCHES, ROWS = 3, 2000
CONFIG = f"""\
log.dirs=logs
remote.storage.url=s3://kafkatier-e2e/run
remote.storage.embedded=true
remote.storage.embedded.dir=s3
remote.log.manager.task.interval.ms=500
topic.events.partitions=2
topic.events.compression.type=lz4
topic.events.segment.bytes=32768
topic.events.remote.storage.enable=true
topic.events.local.retention.bytes=65536
topic.user-state.partitions=2
topic.user-state.cleanup.policy=compact
topic.user-state.compression.type=lz4
topic.user-state.segment.bytes=16384
topic.user-state.min.cleanable.dirty.ratio=0.01
topic.user-state.remote.storage.enable=true
topic.user-state.local.retention.bytes=16384
run.clickstream.users=300
run.clickstream.max.rows.per.trigger={ROWS}
run.batches={BATCHES}
run.checkpoint.dir=chk
run.work.dir=work
run.reset=true
listeners=PLAINTEXT://127.0.0.1:0
"""


def marked_processes(marker: str) -> list[str]:
    """Live processes whose environment carries ``marker`` (every child of the run has it)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if marker.encode() not in (proc / "environ").read_bytes():
                continue
            status = (proc / "status").read_text()
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:120]
        except OSError:
            continue
        if "\nState:\tZ" not in status:
            found.append(f"{proc.name}: {cmdline}")
    return found


def run_once(folder: Path) -> str:
    marker = f"KAFKATIER_E2E_MARKER={uuid.uuid4().hex}"
    env = {**os.environ, marker.split("=")[0]: marker.split("=")[1]}
    done = subprocess.run([str(KAFKATIER), "run", "--config", "kafkatier.properties"],
                          cwd=folder, env=env, capture_output=True, text=True,
                          timeout=400)  # fmt: skip
    deadline = time.monotonic() + 20
    while marked_processes(marker) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert marked_processes(marker) == [], "processes left behind"
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One small ``kafkatier run`` (its folder and output), shared by the checks of its report
    and by the README's walk-through, which runs against what it left."""
    folder = tmp_path_factory.mktemp("run")
    (folder / "kafkatier.properties").write_text(CONFIG)
    return folder, run_once(folder)


def test_run_end_to_end(finished_run: tuple[Path, str]) -> None:
    out = finished_run[1]
    assert "RESULT: PASS" in out and "FAIL" not in out.replace("RESULT: PASS", "")
    assert f"{BATCHES} micro-batches" in out and f"{BATCHES * ROWS} events -> events" in out
    for check in ("restore events-0 + verify", "restore user-state-0 + verify",
                  "events: every event exactly once",
                  "state: latest value per key",
                  "state: every record a state the job wrote, once"):  # fmt: skip
        assert f"[ok] {check}" in out, out
    assert f"{BATCHES * ROWS} records replayed, {BATCHES * ROWS} expected" in out
    tiered = re.search(r"events: .* remote .* in (\d+) segments\n\s+sidecar: (\d+) segments "
                       r"uploaded .*, (\d+) local segments deleted", out)  # fmt: skip
    assert tiered is not None, out
    assert int(tiered[1]) > 0 and int(tiered[2]) > 0 and int(tiered[3]) > 0


def test_run_serves_the_topics_to_a_kafka_client(finished_run: tuple[Path, str]) -> None:
    """The consumer group tailing events and the reads from the beginning, through serve with
    librdkafka, each equal to the replay; the report says how a user reads the topics again."""
    out = finished_run[1]
    events = BATCHES * ROWS
    assert re.search(rf"\[ok\] serve: a consumer group tailing events got every committed "
                     rf"record once: {events:,} records in 2 partitions", out), out
    assert re.search(rf"\[ok\] serve: events read from the beginning equals the replay: "
                     rf"{events:,} records", out), out
    assert "[ok] serve: user-state read from the beginning equals the replay" in out, out
    bootstrap = re.search(r"served at (127\.0\.0\.1:\d+) while the job ran", out)
    assert bootstrap is not None, out
    assert f"kcat -b {bootstrap[1]} -C -t events -o beginning -e" in out
    assert "kafkatier serve --config kafkatier.properties" in out


def test_reset_wipes_what_a_previous_run_left(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    from kafkatier.cli.config.loader import load_config
    from kafkatier.cli.run.pipeline import prepare

    monkeypatch.chdir(tmp_path)
    (tmp_path / "kafkatier.properties").write_text(CONFIG)
    config = load_config(Path("kafkatier.properties"))
    leftovers = [tmp_path / "logs" / "events-0" / "00000000000000000042.log",
                 tmp_path / "chk" / "commits" / "0", tmp_path / "work" / "x", tmp_path / "s3" / "y"]
    for path in leftovers:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"old run")
    prepare(config)
    assert not any(p.exists() for p in leftovers)
    assert sorted(p.name for p in (tmp_path / "logs").iterdir() if p.is_dir()) == [
        "events-0", "events-1", "user-state-0", "user-state-1"]  # fmt: skip
    assert (tmp_path / "logs" / "kafkatier-topic.events.properties").exists()
    assert "reset: wiped" in capsys.readouterr().out


def test_sigterm_mid_stream_stops_everything(tmp_path: Path) -> None:
    """SIGTERM (as Ctrl-C) once the first batch is written: exit 130, nothing left running."""
    (tmp_path / "kafkatier.properties").write_text(CONFIG.replace(f"run.batches={BATCHES}",
                                                                  "run.batches=0"))  # fmt: skip
    marker = uuid.uuid4().hex
    proc = subprocess.Popen([str(KAFKATIER), "run", "--config", "kafkatier.properties"],
                            cwd=tmp_path, env={**os.environ, "KAFKATIER_E2E_MARKER": marker},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)  # fmt: skip
    try:
        assert proc.stdout is not None
        seen = []
        for line in proc.stdout:
            seen.append(line)
            if re.search(r"batch 1 \(id \d+\)", line):
                break
        assert seen and "batch 1" in seen[-1], "".join(seen)[-3000:]
        proc.terminate()
        rest, _ = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, rest[-3000:]
    assert "interrupted; stopped everything it had started" in rest
    deadline = time.monotonic() + 20
    while marked_processes(marker) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert marked_processes(marker) == [], "processes left behind"


README = Path(__file__).resolve().parents[3] / "README.md"


def walkthrough() -> tuple[list[tuple[str, list[str]]], str]:
    """The README's walk-through: its shell commands, each with the output the README shows,
    and its Python replay snippet (the blocks after the ``walkthrough`` markers)."""
    text = README.read_text()
    shell = text.split("<!-- walkthrough:")[1].split("```console\n")[1].split("```")[0]
    commands: list[tuple[str, list[str]]] = []
    for line in shell.splitlines():
        if line.startswith("$ "):
            commands.append((line[2:], []))
        else:
            commands[-1][1].append(line)
    python = text.split("<!-- walkthrough-python:")[1].split("```python\n")[1].split("```")[0]
    return commands, python


def shape(line: str) -> str:
    """A line with its numbers, paths and padding generalised (the README's run and this one
    differ in size), up to its first comma (what follows may be a state that varies)."""
    line = re.sub(r"\d+", "N", re.sub(r"/\S*/restored\S*", "RESTORED", line))
    return " ".join(line.split(",")[0].split())


def test_readme_walkthrough_commands_run(finished_run: tuple[Path, str], tmp_path: Path) -> None:
    """Every command of the README's walk-through runs (exit 0) against what a run left, and
    prints what the README shows, up to the numbers."""
    folder = finished_run[0]
    restored = tmp_path / "restored"
    env = {**os.environ, "PATH": f"{KAFKATIER.parent}{os.pathsep}{os.environ['PATH']}"}
    commands, _ = walkthrough()
    assert len(commands) >= 5
    for command, shown in commands:
        if command.startswith("source "):
            continue
        actual = command.replace("conf/kafkatier.properties", "kafkatier.properties")
        actual = actual.replace("/tmp/restored", str(restored))
        done = subprocess.run(["bash", "-c", actual], cwd=folder, env=env, capture_output=True,
                              text=True, timeout=300)  # fmt: skip
        assert done.returncode == 0, (command, done.stdout[-2000:], done.stderr[-2000:])
        printed = done.stdout.splitlines()
        assert [shape(x) for x in printed[:1]] == [shape(x) for x in shown[:1]], (command, printed)
        if command.startswith("kafkatier status"):
            assert sorted(shape(x) for x in printed) == sorted(shape(x) for x in shown)


def test_readme_walkthrough_python_replays_the_restored_partition(
    finished_run: tuple[Path, str], tmp_path: Path
) -> None:
    folder = finished_run[0]
    restored = tmp_path / "restored"
    subprocess.run([str(KAFKATIER), "restore", "--config", "kafkatier.properties", "--topic",
                    "events", "--partition", "1", "--to", str(restored)], cwd=folder,
                   check=True, capture_output=True, timeout=300)  # fmt: skip
    _, python = walkthrough()
    done = subprocess.run([sys.executable, "-c", python.replace("/tmp/restored", str(restored))],
                          cwd=folder, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(r"^\|partition\|offset\| +user\| +page\|$", done.stdout, re.MULTILINE)
    count = re.search(r"^(\d+) events, offsets (\d+)$", done.stdout, re.MULTILINE)
    assert count is not None, done.stdout
    assert 0 < int(count[1]) < int(count[2])  # markers take offsets too
