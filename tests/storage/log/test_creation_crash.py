"""SIGKILL and power loss while a topic's partitions are created (``storage/log/creation.py``):
before the next writer opens the log dir, readers see no partition of the topic or all of them;
after it, the topic is gone or whole (every partition with the topic's id, its leader-epoch
checkpoint and an empty segment), and writable.

A power loss is simulated as in ``tests/sink/power_loss.py``: the worker records every fsync it
makes; after the kill, a directory entry no fsync of its directory covered is gone (a rename not
covered is undone, or kept, at random: the filesystem may have written it back or not), and a
file keeps only what an fsync covered (a checkpoint never fsynced is empty).

A topic of 12 partitions is staged with an fsync of each file and directory; one of 24 (at
least ``SYNCFS_MIN_LOGS``) without, then made durable by one syncfs of the filesystem, which the
recorder counts as covering every file and directory under the log dir at that moment.

This file is also the worker: ``python test_creation_crash.py LOG_DIR POINT:N RECORD COUNT``.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "sink"))

from power_loss import install_recorder

from kafkatier.storage import fsutil
from kafkatier.storage.checkpoint.leader_epoch import LEADER_EPOCH_CHECKPOINT, LeaderEpochFileCache
from kafkatier.storage.checkpoint.metadata import PartitionMetadataFile, parse_partition_dir_name
from kafkatier.storage.log import creation, directory
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.readonly import discover
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record

TOPIC, PARTITIONS, MANY = "born", 12, 24
LONG = "l" * 249  # the longest valid name: staged names are cut to 255 bytes, as Kafka's
POINTS = {  # name: (owner, function) after whose n-th return the worker dies
    "staged": (directory, "stage_partition"),
    "renamed": (Path, "rename"),  # commit_staged's renames, one by one
    "committed": (directory, "commit_staged"),
    "opened": (directory, "new_log"),
}


def arm(spec: str) -> None:
    name, n = spec.split(":")
    owner, attr = POINTS[name]
    original = getattr(owner, attr)
    count = [0]

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        count[0] += 1
        if count[0] >= int(n):
            print(f"CRASHPOINT {spec}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    setattr(owner, attr, wrapped)


def worker(argv: list[str]) -> None:
    path, spec, record, count, topic = Path(argv[1]), argv[2], argv[3], int(argv[4]), argv[5]
    install_recorder(record)
    with LogDirectory(path) as log_dir:
        arm(spec)
        log_dir.create_partitions(topic, count)
        for log in log_dir:
            log.append(build_batch([Record(0, 1_700_000_000_000, None, b"first")]))
    print("DONE", flush=True)


# ------------------------------------------------------------------------------- the power loss


def lose_unsynced(root: Path, record: Path, rng: random.Random) -> None:
    """Undo what no fsync covered (module docstring)."""
    synced: dict[str, int] = {}
    listed: dict[str, set[str]] = {}
    for line in record.read_text().splitlines() if record.exists() else []:
        entry = json.loads(line)
        if "file" in entry:
            synced[entry["file"]] = max(synced.get(entry["file"], 0), entry["size"])
        elif "dir" in entry:
            listed[entry["dir"]] = set(entry["names"])  # ({"syncfs": root}: its entries follow)
    durable = listed.get(str(root), set())
    for child in sorted(root.iterdir()):
        if child.name in durable or not child.is_dir():
            continue
        staged = _staged_name(child, durable)
        if staged is not None and rng.random() < 0.5:
            child.rename(root / staged)  # the rename never reached the disk
        elif staged is None:
            shutil.rmtree(child)  # created, never covered by an fsync of the log dir
    for child in (d for d in root.iterdir() if d.is_dir()):
        _lose_in(child, synced, listed)


def _staged_name(child: Path, durable: set[str]) -> str | None:
    for name in durable:
        parsed = creation.parse_staged_dir_name(name)
        if parsed is not None and _is_staged_of(parsed, child.name):
            return name
    return None


def _lose_in(directory: Path, synced: dict[str, int], listed: dict[str, set[str]]) -> None:
    """Files of a directory: gone if no fsync of it listed them (under its name now or its
    staged one), else cut to what an fsync of the file covered."""
    names = next((n for d, n in listed.items() if _same_dir(Path(d).name, directory.name)), None)
    for path in sorted(directory.iterdir()):
        if names is None or path.name not in names:
            path.unlink()
            continue
        kept = max((s for f, s in synced.items() if Path(f).name == path.name
                    and _same_dir(Path(f).parent.name, directory.name)), default=0)  # fmt: skip
        if kept < path.stat().st_size:
            os.truncate(path, kept)


def _same_dir(recorded: str, now: str) -> bool:
    """Whether a directory recorded under ``recorded`` is the one now named ``now`` (the same
    name, or its staged name before the rename)."""
    staged = creation.parse_staged_dir_name(recorded)
    return recorded == now or (staged is not None and _is_staged_of(staged, now))


def _is_staged_of(staged: creation.Staged, live_name: str) -> bool:
    live = parse_partition_dir_name(live_name)
    return live is not None and staged.of(live[0]) and staged.partition == live[1]


# ------------------------------------------------------------------------------- the checks


def check_none_or_whole(root: Path, count: int = PARTITIONS, topic: str = TOPIC) -> str:
    """Readers first (before any writer repairs), then a writer's open; returns the outcome."""
    seen = discover(root, [topic], None)
    assert seen in ([], [(topic, p) for p in range(count)]), seen
    with LogDirectory(root) as log_dir:
        found = sorted(p for (t, p) in log_dir.logs if t == topic)
        assert found in ([], list(range(count))), found
        assert not [c for c in root.iterdir() if creation.parse_staged_dir_name(c.name)]
        if not found:
            return "none"
        metadata = [PartitionMetadataFile(log.directory / "partition.metadata") for log in log_dir]
        assert len({m.read() for m in metadata}) == 1
        for log in log_dir:
            epochs = LeaderEpochFileCache(log.directory / LEADER_EPOCH_CHECKPOINT).entries
            assert epochs in ([], [(0, 0)]) and log.log_end_offset in (0, 1)
            log.append(build_batch([Record(0, 1_700_000_000_001, None, b"after")]))
    assert discover(root, [topic], None) == [(topic, p) for p in range(count)]
    return "whole"


CASES = [
    ("staged:1", False), ("staged:7", True), ("staged:12", True),
    ("renamed:1", False), ("renamed:1", True), ("renamed:6", True), ("renamed:12", True),
    ("committed:1", True), ("opened:5", False), ("opened:12", True),
]  # fmt: skip
CASES_MANY = [  # staged without fsyncs, one syncfs before the renames
    ("staged:24", False), ("staged:24", True), ("renamed:1", True), ("renamed:13", True),
    ("committed:1", True),
]  # fmt: skip


CASES_LONG = [("staged:7", True), ("renamed:1", False), ("renamed:6", True)]


@pytest.mark.parametrize(
    ("point", "power_loss", "count", "topic"),
    [(*case, PARTITIONS, TOPIC) for case in CASES]
    + [(*case, MANY, TOPIC) for case in CASES_MANY]
    + [(*case, PARTITIONS, LONG) for case in CASES_LONG],
)
def test_a_crash_leaves_no_topic_or_a_whole_one(tmp_path: Path, point: str, power_loss: bool,
                                                count: int, topic: str) -> None:  # fmt: skip
    root, record = tmp_path / "logs", tmp_path / "fsyncs.jsonl"
    LogDirectory(root).close()
    proc = subprocess.run([sys.executable, __file__, str(root), point, str(record), str(count),
                           topic], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    syncfs_used = record.exists() and '"syncfs"' in record.read_text()
    if count >= directory.SYNCFS_MIN_LOGS and fsutil.syncfs_trusted(root):
        assert syncfs_used == (not point.startswith("staged"))
    else:
        assert not syncfs_used
    if power_loss:
        lose_unsynced(root, record, random.Random(point))
    outcome = check_none_or_whole(root, count, topic)
    committed = not point.startswith("staged")
    if not power_loss or point.startswith(("committed", "opened")):  # the log dir fsynced
        assert outcome == ("whole" if committed else "none")


def test_without_a_crash_the_topic_is_whole(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    with LogDirectory(root) as log_dir:
        log_dir.create_partitions(TOPIC, PARTITIONS)
    assert check_none_or_whole(root) == "whole"


if __name__ == "__main__":
    worker(sys.argv)
