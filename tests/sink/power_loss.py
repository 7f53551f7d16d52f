"""A simulated power loss for the sink's crash tests: whatever no fsync covered may be lost.

SIGKILL alone loses nothing the process wrote (the page cache survives it), so it cannot catch a
missing fsync. A driver run with ``POWER_LOSS_LOG=<file>`` calls :func:`install_recorder`, which
records, after every ``os.fsync`` the process makes, the size of the file (or the names in the
directory) it covered, and after every ``fsutil.syncfs`` the same of every file and directory
under the log dir (one syncfs covers the whole filesystem). After the test kills the driver,
:func:`lose_unsynced` leaves the log dir as a power cut at that moment could have:

* each ``.log`` and ``.txnindex`` file cut at a random point between what was fsynced and its end
  (half the time exactly at the fsynced size, else anywhere, torn batches included: writes reach
  the disk in order within a file, as the loader assumes);
* a segment file created but never made durable by a directory fsync gone;
* a producer ``.snapshot`` or ``leader-epoch-checkpoint`` no fsync covered (written at a roll
  or an epoch change, fsynced by the next flush) gone, empty or cut short, as its directory
  entry and its content may each be lost: the loader must fall back to an older snapshot, or
  rebuild the checkpoint;
* the offset and time indexes of the segments above the recovery point zeroed (their first page:
  they are only ever msynced at roll and clean close, and a page never written back reads as
  zeros).

Every other file the sink and the engine write (bookkeeping, checkpoints) is replaced atomically
with fsyncs, so what is on disk is what a power loss leaves of them.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import stat
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from kafkatier.storage import fsutil
from kafkatier.storage.checkpoint.checkpoint_file import (
    RECOVERY_POINT_CHECKPOINT,
    OffsetCheckpointFile,
)
from kafkatier.storage.checkpoint.metadata import parse_partition_dir_name

ENV = "POWER_LOSS_LOG"
SEGMENT_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex")
APPENDED = ("*-*/*.log", "*-*/*.txnindex")  # written in place, in order
DEFERRED = ("*-*/*.snapshot", "*-*/leader-epoch-checkpoint")  # written whole, fsynced later
INDEX_PAGE = 4096
Loss = Counter[str]
"""What :func:`lose_unsynced` took away: ``files_cut``, ``bytes_lost``, ``files_gone``,
``deferred_lost`` (files of ``DEFERRED``), ``indexes_zeroed``; and ``syncfs``, how many the
record holds."""


def install_recorder(record: str) -> None:
    """Make every ``os.fsync`` and ``fsutil.syncfs`` of this process record what it covered."""
    for target, name, replacement in recorders(record):
        setattr(target, name, replacement)


def recorders(record: str) -> list[tuple[Any, str, Callable[[Any], None]]]:
    """(module, attribute, replacement) for ``os.fsync`` and ``fsutil.syncfs``: each calls the
    real one, then appends what it covered to ``record``, one JSON per line:
    ``{"file": path, "size": n}`` or ``{"dir": path, "names": [...]}``."""
    out = os.open(record, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    real_fsync, real_syncfs = os.fsync, fsutil.syncfs

    def write(lines: Iterator[dict[str, object]]) -> None:
        os.write(out, "".join(json.dumps(line) + "\n" for line in lines).encode())

    def fsync(fd: Any) -> None:
        fd = fd if isinstance(fd, int) else fd.fileno()
        real_fsync(fd)
        write(_covered(os.readlink(f"/proc/self/fd/{fd}")))

    def syncfs(fd: int) -> None:
        real_syncfs(fd)
        root = os.readlink(f"/proc/self/fd/{fd}")
        write(itertools.chain([{"syncfs": root}], *map(_covered, _tree(root))))

    return [(os, "fsync", fsync), (fsutil, "syncfs", syncfs)]


def _covered(path: str) -> Iterator[dict[str, object]]:
    info = os.stat(path)
    if stat.S_ISDIR(info.st_mode):
        yield {"dir": path, "names": sorted(os.listdir(path))}
    else:
        yield {"file": path, "size": info.st_size}


def _tree(root: str) -> Iterator[str]:
    for folder, _dirs, files in os.walk(root):
        yield folder
        yield from (os.path.join(folder, name) for name in files)


def durable_files(log_dir: Path) -> dict[str, int]:
    """Every segment log, transaction index and file of ``DEFERRED`` and its size: what a run
    starts from is durable."""
    patterns = (*APPENDED, *DEFERRED)
    return {str(p): p.stat().st_size for pattern in patterns for p in log_dir.glob(pattern)}


def lose_unsynced(
    log_dir: Path, record: Path, durable_at_start: dict[str, int], rng: random.Random
) -> Loss:
    """Apply the power loss (module docstring) and start a new record."""
    loss: Loss = Counter()
    synced, listed = _read_record(record, loss)
    synced = {**durable_at_start, **synced}
    record.unlink(missing_ok=True)
    for path in sorted(p for pattern in APPENDED for p in log_dir.glob(pattern)):
        if path.exists():  # a segment removed just before goes with all its files
            _lose_appended(path, synced, listed, rng, loss)
    for path in sorted(p for pattern in DEFERRED for p in log_dir.glob(pattern)):
        if _content_durable(path, synced):
            continue
        loss["deferred_lost"] += 1
        if not _name_durable(path, listed, synced) and rng.random() < 0.5:
            path.unlink()
        else:
            os.truncate(path, rng.randint(0, path.stat().st_size))
    loss["indexes_zeroed"] = _zero_indexes_above_recovery_points(log_dir)
    return loss


def _lose_appended(
    path: Path, synced: dict[str, int], listed: dict[str, set[str]], rng: random.Random, loss: Loss
) -> None:
    size = path.stat().st_size
    log = path.with_suffix(".log")
    if not _name_durable(log, listed, synced):
        _remove_segment(log)
        loss["files_gone"] += 1
        loss["bytes_lost"] += size
        return
    durable = min(synced.get(str(path), 0), size)
    cut = durable if rng.random() < 0.5 else rng.randint(durable, size)
    if cut < size:
        os.truncate(path, cut)
        loss["files_cut"] += 1
        loss["bytes_lost"] += size - cut


def _read_record(record: Path, loss: Loss) -> tuple[dict[str, int], dict[str, set[str]]]:
    synced: dict[str, int] = {}
    listed: dict[str, set[str]] = {}
    if not record.exists():
        return synced, listed
    for line in record.read_text().splitlines():
        entry = json.loads(line)
        if "file" in entry:
            synced[entry["file"]] = entry["size"]
        elif "dir" in entry:
            listed[entry["dir"]] = set(entry["names"])
        else:
            loss["syncfs"] += 1
    return synced, listed


def _name_durable(path: Path, listed: dict[str, set[str]], synced: dict[str, int]) -> bool:
    return str(path) in synced or path.name in listed.get(str(path.parent), set())


def _content_durable(path: Path, synced: dict[str, int]) -> bool:
    """Fsynced under its name, or written by ``fsutil.atomic_write`` with its fsync (of the
    temporary file, renamed over the name)."""
    return str(path) in synced or str(fsutil.temp_path(path)) in synced


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
