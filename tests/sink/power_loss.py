"""A simulated power loss for the sink's crash tests: whatever no fsync covered may be lost.

SIGKILL alone loses nothing the process wrote (the page cache survives it), so it cannot catch a
missing fsync. A driver run with ``POWER_LOSS_LOG=<file>`` calls :func:`install_recorder`, which
records, after every fsync the process makes, the size of the file (or the names in the
directory) it covered. After the test kills the driver, :func:`lose_unsynced` leaves the log dir
as a power cut at that moment could have: each ``.log`` file cut at a random point between what
was fsynced and its end (half the time exactly at the fsynced size, else anywhere, torn batches
included: writes reach the disk in order within a file, as the loader assumes), a segment file
created but never made durable by a directory fsync gone, and the offset and time indexes of the
segments above the recovery point zeroed (their first page: they are only ever msynced at roll and
clean close, and a page never written back reads as zeros).
Every other file the sink and the engine write (bookkeeping, checkpoints, snapshots) is replaced
atomically with fsyncs, so what is on disk is what a power loss leaves of them.
"""

from __future__ import annotations

import json
import os
import random
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafkatier.storage.checkpoint.checkpoint_file import (
    RECOVERY_POINT_CHECKPOINT,
    OffsetCheckpointFile,
)
from kafkatier.storage.checkpoint.metadata import parse_partition_dir_name

ENV = "POWER_LOSS_LOG"
SEGMENT_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex")
INDEX_PAGE = 4096


def install_recorder(record: str) -> None:
    """Make every ``os.fsync`` of this process append what it covered to ``record``."""
    os.fsync = recorder(record)


def recorder(record: str) -> Callable[[Any], None]:
    """An ``os.fsync`` that appends, once the real one returns, what it covered to ``record``:
    ``{"file": path, "size": n}`` or ``{"dir": path, "names": [...]}``, one JSON per line."""
    out = os.open(record, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    real_fsync = os.fsync

    def fsync(fd: Any) -> None:
        fd = fd if isinstance(fd, int) else fd.fileno()
        real_fsync(fd)
        path = os.readlink(f"/proc/self/fd/{fd}")
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            line: dict[str, object] = {"dir": path, "names": sorted(os.listdir(path))}
        else:
            line = {"file": path, "size": info.st_size}
        os.write(out, (json.dumps(line) + "\n").encode())

    return fsync


def log_sizes(log_dir: Path) -> dict[str, int]:
    """Every partition's ``.log`` files and their sizes: what a run starts from is durable."""
    return {str(path): path.stat().st_size for path in log_dir.glob("*-*/*.log")}


@dataclass
class Loss:
    """What :func:`lose_unsynced` took away."""

    files_cut: int = 0
    bytes_lost: int = 0
    files_gone: int = 0
    indexes_zeroed: int = 0


def lose_unsynced(
    log_dir: Path, record: Path, durable_at_start: dict[str, int], rng: random.Random
) -> Loss:
    """Apply the power loss (module docstring) and start a new record."""
    synced, listed = _read_record(record)
    record.unlink(missing_ok=True)
    loss = Loss()
    for path in sorted(log_dir.glob("*-*/*.log")):
        name = str(path)
        size = path.stat().st_size
        if name not in durable_at_start and not _name_durable(path, listed):
            _remove_segment(path)
            loss.files_gone += 1
            loss.bytes_lost += size
            continue
        durable = min(synced.get(name, durable_at_start.get(name, 0)), size)
        cut = durable if rng.random() < 0.5 else rng.randint(durable, size)
        if cut < size:
            os.truncate(path, cut)
            loss.files_cut += 1
            loss.bytes_lost += size - cut
    loss.indexes_zeroed = _zero_indexes_above_recovery_points(log_dir)
    return loss


def _read_record(record: Path) -> tuple[dict[str, int], dict[str, set[str]]]:
    synced: dict[str, int] = {}
    listed: dict[str, set[str]] = {}
    if not record.exists():
        return synced, listed
    for line in record.read_text().splitlines():
        entry = json.loads(line)
        if "file" in entry:
            synced[entry["file"]] = entry["size"]
        else:
            listed[entry["dir"]] = set(entry["names"])
    return synced, listed


def _name_durable(path: Path, listed: dict[str, set[str]]) -> bool:
    return path.name in listed.get(str(path.parent), set())


def _remove_segment(log_file: Path) -> None:
    stem = log_file.name[: -len(".log")]
    for suffix in SEGMENT_SUFFIXES:
        (log_file.parent / f"{stem}{suffix}").unlink(missing_ok=True)


def _zero_indexes_above_recovery_points(log_dir: Path) -> int:
    points = OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT).read()
    zeroed = 0
    for directory in sorted(log_dir.glob("*-*")):
        tp = parse_partition_dir_name(directory.name)
        if tp is None:
            continue
        bases = sorted(int(p.name[:20]) for p in directory.glob("*.log"))
        point = points.get(tp, 0)
        first = max([b for b in bases if b <= point], default=0)
        for base in (b for b in bases if b >= first):
            for suffix in (".index", ".timeindex"):
                index = directory / f"{base:020d}{suffix}"
                size = index.stat().st_size if index.exists() else 0
                if size:
                    with open(index, "r+b") as f:
                        f.write(bytes(min(size, INDEX_PAGE)))
                    zeroed += 1
    return zeroed
