"""The scratch directory of one remote compaction, and those a dead process left.

A remote compaction downloads the segments it rewrites and writes the cleaned ones into a
scratch directory (``kafkatier-compact-<pid>-*`` in ``scratch_dir``, default the system's
temporary directory), removed when it ends. A process killed mid-way (SIGKILL, power loss, an
OOM kill) cannot remove it, and it may hold a segment's worth of bytes: a process's first
scratch directory in a root removes those whose process is gone (once: a pass compacts many
partitions, and the temporary directory may hold thousands of names to list). A directory
whose pid belongs to a live process (another sidecar's, or a reused pid) is left alone."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Final

PREFIX: Final = "kafkatier-compact-"


_SWEPT: set[tuple[int, Path]] = set()  # (pid, root): a fork sweeps again


def new_scratch(scratch_dir: Path | None = None) -> Path:
    """A new scratch directory for this process, the first in its root after removing dead
    processes' ones."""
    root = Path(scratch_dir) if scratch_dir is not None else Path(tempfile.gettempdir())
    if (os.getpid(), root) not in _SWEPT:
        remove_dead(root)
        _SWEPT.add((os.getpid(), root))
    return Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=root))


def remove_dead(root: Path) -> list[Path]:
    """Remove the scratch directories in ``root`` of processes that no longer run; returns them.
    Names without a pid (written before it was part of the name) are left alone."""
    removed = []
    for path in root.glob(f"{PREFIX}*"):
        pid = _pid_of(path.name)
        if pid is not None and not _running(pid) and path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _pid_of(name: str) -> int | None:
    head = name[len(PREFIX) :].split("-", 1)[0]
    return int(head) if head.isdigit() else None


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True
