"""Compile the cleaner's numba kernels before the first compaction needs them.

The kernels are compiled on first use and cached beside their sources (``cache=True``), so only
a fresh install or container pays, but it pays on its first compaction, while the sidecar pass
holding it holds everything waiting on that pass (``kafkatier run``'s stop waits for it): 35 s
on this 2-core machine, 1.6 s once the cache is warm (``NUMBA_CACHE_DIR=$(mktemp -d) python -m
kafkatier.storage.cleaner.warm``, twice). The sidecar's long-running loops (``kafkatier
sidecar``, ``kafkatier run``) run in :func:`warming`: a child process at low priority compacts
a small throwaway log that takes every kernel path a real compaction takes (plain and
compressed batches, tombstones, a committed and an aborted transaction), which fills the cache.
It is an optimisation only: if it fails or is killed, the first compaction compiles as before.

    python -m kafkatier.storage.cleaner.warm
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from kafkatier.storage.cleaner.compact import CompactionResult, compact_log
from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.log import Log
from kafkatier.storage.producer.entry import AppendOrigin
from kafkatier.storage.record.builder import build_batch, build_control_batch
from kafkatier.storage.record.record import Record
from kafkatier.storage.scratch import new_scratch
from kafkatier.storage.wire import Codec, ControlType

_NOW = 1_700_000_000_000


def _fill(log: Log) -> None:
    """Keys written over and over, in every kind of batch the cleaner meets."""
    for round_ in range(4):
        for codec in (Codec.NONE, Codec.LZ4):
            records = [Record(i, _NOW, b"k%d" % (i % 5), b"v%d" % round_ if i else None)
                       for i in range(20)]  # fmt: skip
            log.append(build_batch(records, codec=codec))
        pid = 1000 + round_
        txn = [Record(0, _NOW, b"k1", b"t%d" % round_)]
        log.append(build_batch(txn, producer_id=pid, producer_epoch=0, base_sequence=0,
                               transactional=True))  # fmt: skip
        kind = ControlType.COMMIT if round_ % 2 else ControlType.ABORT
        marker = build_control_batch(kind, producer_id=pid, producer_epoch=0, timestamp=_NOW)
        log.append(marker, origin=AppendOrigin.COORDINATOR)
        log.roll()


def warm_up(directory: Path | None = None) -> CompactionResult:
    """Compact a small log in ``directory`` (empty, the caller's to remove), else in a temporary
    directory (module docstring)."""
    if directory is None:
        scratch = new_scratch("warm")
        try:
            return warm_up(scratch)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    config = LogConfig.from_properties(
        {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0"}, source="warm-up"
    )
    log_dir = LogDirectory(directory, config_for=lambda _topic: config, clock=lambda: _NOW)
    try:
        log = log_dir.get_or_create("warm-up", 0)
        _fill(log)
        return compact_log(log, now_ms=_NOW, first_dirty_offset=None)
    finally:
        log_dir.close()


@contextlib.contextmanager
def warming() -> Iterator[subprocess.Popen[bytes] | None]:
    """:func:`warm_up` in a child process at the lowest priority for the time of the block (a
    long-running loop); a child still compiling when the block ends is killed (numba writes each
    cache file whole, by rename) and always reaped. The child's log is in a directory this
    process made and removes after it, so a killed child leaves nothing behind; one that a
    killed parent left is removed by the next process's first warm-up (``storage.scratch``)."""
    scratch = new_scratch("warm")
    try:
        child = subprocess.Popen(
            [sys.executable, "-m", "kafkatier.storage.cleaner.warm", scratch],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=lambda: os.nice(19), close_fds=True,
        )  # fmt: skip
    except OSError:
        child = None
    try:
        yield child
    finally:
        if child is not None:
            child.kill()
            child.wait()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    warm_up(Path(sys.argv[1]) if len(sys.argv) > 1 else None)
