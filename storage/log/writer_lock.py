"""Turns of the processes that write one log dir, as Kafka's one broker per log dir.

A Kafka broker holds ``<log dir>/.lock`` (``LogManager.LockFileName``) while it owns the log dir.
Here several writers may share one (two Spark sinks with different sink ids, ``kafkatier
produce``, ``kafkatier clean``), each holding its own in-memory ``LogDirectory``, so they take
turns: a writer holds an exclusive ``fcntl.flock`` on ``.lock`` while it changes the log dir
(the sink: for one micro-batch; the CLI commands: for their whole run), and writes a fresh token
to ``kafkatier-writer.generation`` when its turn begins, before it changes anything. A writer
that keeps its ``LogDirectory`` open between turns compares the token found at the start of its
next turn with the one it wrote: if another writer had a turn in between (even one killed
half-way), its in-memory segments, offsets and producer state are stale, and it reopens the log
dir (which recovers from what the other writer left). The token only matters between live
processes (after a machine crash every writer starts afresh), so it is renamed into place
without fsync.

The tiering sidecar does not take turns: it changes only what the writers tolerate (it never
touches the active segment, and stages its checkpoint rewrites; see
``tiering/cleaner/local_log_start.py``). Readers never lock. Both files sit at the log-dir root,
where a broker ignores them (``.lock`` is its own name).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from kafkatier.storage.fsutil import atomic_write, make_log_dir

LOCK_FILE: Final = ".lock"
GENERATION_FILE: Final = "kafkatier-writer.generation"
log = logging.getLogger(__name__)


class WriterTurn:
    """One writer's turn on a log dir: the generation found when it began, and its own."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.generation_at_start = read_generation(self.path)
        self.token = _write_generation(self.path)  # before any change: a killed turn still shows

    def changed_since(self, generation: str | None) -> bool:
        """Whether another writer had a turn after the one whose token is ``generation``."""
        return generation is None or generation != self.generation_at_start


def _write_generation(path: Path) -> str:
    """A fresh token, atomically (the turn's flock keeps other writers out of the temp file).
    On a full disk the new file cannot be made: the token overwrites the old one in place (the
    same length, so no new block; only turns read it, under the lock), so that ``clean`` can
    still take its turn and free space; a torn one reads as another writer's turn."""
    token = uuid.uuid4().hex
    data = f"{token}\n".encode("ascii")
    try:
        atomic_write(path / GENERATION_FILE, data, sync=False)
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT) or not _overwrite(path, data):
            raise
    return token


def _overwrite(path: Path, data: bytes) -> bool:
    """``data`` written over the generation file's bytes where it has as many; False if not."""
    try:
        fd = os.open(path / GENERATION_FILE, os.O_WRONLY)
    except FileNotFoundError:
        return False
    try:
        return os.fstat(fd).st_size == len(data) and os.pwrite(fd, data, 0) == len(data)
    finally:
        os.close(fd)


def read_generation(path: Path) -> str | None:
    try:
        # damaged bytes read as a token no writer had: the next turn writes a fresh one
        return (Path(path) / GENERATION_FILE).read_text("ascii", "replace").strip() or None
    except FileNotFoundError:
        return None


@contextlib.contextmanager
def writer_turn(path: Path, *, who: str = "a writer") -> Iterator[WriterTurn]:
    """Hold ``<path>/.lock`` exclusively (waiting for the current holder) for one turn.

    The holder's pid and name are written into the lock file, so a waiting writer can say whom
    it waits for. The lock goes with the process: a killed writer never blocks the others."""
    path = Path(path)
    make_log_dir(path)
    fd = os.open(path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        _acquire(fd, path, who)
        with contextlib.suppress(OSError):  # only said to waiting writers: a full disk's write
            os.ftruncate(fd, 0)  # fails further on, naming its file (this one named none)
            os.pwrite(fd, f"{os.getpid()} {who}\n".encode(), 0)
        yield WriterTurn(path)
    finally:
        os.close(fd)  # closing releases the lock


def _acquire(fd: int, path: Path, who: str) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return
    except BlockingIOError:
        pass
    holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "unknown"
    log.info("%s waits for its turn on log dir %s (held by pid %s)", who, path, holder)
    start = time.monotonic()
    fcntl.flock(fd, fcntl.LOCK_EX)
    log.info("%s got its turn on %s after %.1f s", who, path, time.monotonic() - start)
