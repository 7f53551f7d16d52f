"""The writer's ``log-start-offset-checkpoint`` of each log dir, read once per change.

A reader opening a partition takes its log start offset from the checkpoint (retention and
DeleteRecords move it above the first segment's base): :func:`~kafkatier.storage.log.readonly.
checkpointed_log_starts` opens and parses the file, one line per partition whose start moved. A
server that opens each partition of a fetch that way reads the file once per partition of each
request: about a third of an idle fetch's time at 1,024 partitions, once it no longer opened
segments (an ad hoc cProfile; ``bench/serve_scale.py`` measures both changes together).
:class:`LogStartCache` keeps each log dir's parse and reads it again when the file changed: the
writer replaces it by rename, so its inode, size or modification time differ; a replacement
that matches all three (an inode reused within the filesystem's timestamp granularity) is still
seen within :data:`MAX_AGE_S`. The file is looked at (a ``stat``) at most once per
:data:`LOOK_S`: a fetch naming a thousand partitions of a log dir costs one ``stat``, not one a
partition, and a replaced checkpoint is seen within that time.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final, NamedTuple

from kafkatier.storage.checkpoint.checkpoint_file import LOG_START_OFFSET_CHECKPOINT
from kafkatier.storage.log.readonly import TopicPartition, checkpointed_log_starts

MAX_AGE_S: Final = 1.0
LOOK_S: Final = 0.02

_Stamp = tuple[int, int, int] | None  # inode, size, mtime in ns; None: no file


class _Parsed(NamedTuple):
    stamp: _Stamp
    read_at: float
    looked_at: float  # the last stat of the file
    starts: dict[TopicPartition, int]


class LogStartCache:
    """Log dir -> its checkpointed log start offsets, as :func:`checkpointed_log_starts`
    returns them (module docstring). Thread-safe; the dicts it returns are shared: read only."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._parsed: dict[Path, _Parsed] = {}
        self._lock = threading.Lock()
        self.parses = 0  # how many times a file was read (tests)

    def get(self, log_dir: Path) -> dict[TopicPartition, int]:
        now = self._clock()
        with self._lock:
            found = self._parsed.get(log_dir)
        fresh = found is not None and now - found.read_at < MAX_AGE_S
        if found is not None and fresh and now - found.looked_at < LOOK_S:
            return found.starts
        stamp = _stamp(os.path.join(log_dir, LOG_START_OFFSET_CHECKPOINT))
        if found is not None and fresh and found.stamp == stamp:
            with self._lock:
                self._parsed[log_dir] = found._replace(looked_at=now)
            return found.starts
        starts = checkpointed_log_starts(log_dir) if stamp is not None else {}
        with self._lock:
            self._parsed[log_dir] = _Parsed(stamp, now, now, starts)
            self.parses += 1
        return starts


def _stamp(path: str) -> _Stamp:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns
