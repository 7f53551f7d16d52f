"""Scratch directories named for the process that made them, and those a dead process left.

Some work writes to a temporary directory of its own: remote compaction the segments it
downloads and cleans (``kafkatier-compact-<pid>-*`` in the sidecar's ``scratch_dir``, default
the system's temporary directory), the cleaner's warm-up its small log
(``kafkatier-warm-<pid>-*``). Each is removed when its work ends, but a process killed mid-way
(SIGKILL, power loss, an OOM kill) cannot remove it, and a remote compaction's may hold a
segment's worth of bytes. So a process's first scratch directory of a kind in a root removes
those of that kind whose process is gone (once: a pass compacts many partitions, and the
temporary directory may hold thousands of names to list). A directory whose pid belongs to a
live process (another sidecar's, or a reused pid) is left alone, and so are names without a pid
(made before it was part of the name)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

_SWEPT: set[tuple[int, Path, str]] = set()  # (pid, root, kind): a fork sweeps again


def prefix(kind: str) -> str:
    """The names' common start for ``kind`` (``compact``, ``warm``)."""
    return f"kafkatier-{kind}-"


def new_scratch(kind: str, scratch_dir: Path | None = None) -> Path:
    """A new scratch directory of ``kind`` for this process, the first of its kind in its root
    after removing dead processes' ones."""
    root = Path(scratch_dir) if scratch_dir is not None else Path(tempfile.gettempdir())
    if (os.getpid(), root, kind) not in _SWEPT:
        remove_dead(root, kind)
        _SWEPT.add((os.getpid(), root, kind))
    return Path(tempfile.mkdtemp(prefix=f"{prefix(kind)}{os.getpid()}-", dir=root))


def remove_dead(root: Path, kind: str) -> list[Path]:
    """Remove the scratch directories of ``kind`` in ``root`` of processes that no longer run;
    returns them."""
    removed = []
    start = prefix(kind)
    for path in root.glob(f"{start}*"):
        pid = _pid_of(path.name[len(start) :])
        if pid is not None and not _running(pid) and path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _pid_of(rest: str) -> int | None:
    head = rest.split("-", 1)[0]
    return int(head) if head.isdigit() else None


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True
