"""Encoded micro-batch bytes between the executors and the driver: staging files, sequences.

Executors encode whole transactional record batches (compression and CRC-32C included) but
cannot know their sequence numbers: those continue the producer's sequence per Kafka partition
across all the tasks of a micro-batch. So every batch leaves the executor with a provisional base
sequence, and the driver, the partition's single writer, gives each batch its real one
(:func:`assign_sequences`) just before ``Log.append_batches`` gives it its offsets. The base
sequence is under the CRC, so the driver first checks the executor's CRC as the leader's parser
does (the bytes travelled through a file or the JVM; ``parse_incoming``, once: the log takes the
parsed batches) and then rewrites it: two CRC-32C passes over the batch, hardware-accelerated.

Staging (the fast path, when executors see the driver's filesystem: local mode, or a shared
mount): each task attempt writes its encoded batches to one file
``<root>/kafkatier-staging/<sink key>/<batch id>-<random>/task-<p>-<attempt>.kbatches``
(concatenated v2 batches, base offsets 0, not a segment) and returns only where they are; the
driver reads them back piece by piece (:class:`StagingFiles`: each file opened once per batch,
a bounded number at a time). Staging files are scratch, never the log: they hold no committed
state, are read only by the batch call that created them, are deleted when it ends,
and the whole sink's staging tree is removed when a sink instance starts (a crashed driver's
leftovers). A replayed batch id encodes afresh. They live outside the log dir, so a Kafka broker
still loads the log dir.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import struct
import tempfile
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import crc32c

from kafkatier.storage.errors import CorruptRecordError
from kafkatier.storage.record.batch import RecordBatch
from kafkatier.storage.wire import CRC_OFFSET, CRC_START, RECORDS_COUNT_OFFSET, increment_sequence

BASE_SEQUENCE_OFFSET: Final = RECORDS_COUNT_OFFSET - 4  # not declared in wire.py
STAGING_DIR_NAME: Final = "kafkatier-staging"
STAGING_FILES_OPEN: Final = 64  # descriptors a batch's reads keep open at most
_INT32: Final = struct.Struct(">i")
_UINT32: Final = struct.Struct(">I")


def sink_staging_root(root: str | Path | None, log_dir: Path, sink_id: str) -> Path:
    """The sink's staging tree: one per (log dir, sink id), under ``root`` or the temp dir; a
    relative ``root`` is the driver's, as the executors that write there cannot resolve it."""
    base = Path(root).absolute() if root is not None else Path(tempfile.gettempdir())
    digest = hashlib.blake2b(str(log_dir.resolve()).encode(), digest_size=6).hexdigest()
    return base / STAGING_DIR_NAME / f"{sink_id}-{digest}"


def new_batch_dir(sink_root: Path, batch_id: int) -> Path:
    """A fresh directory for one batch call (random suffix: a replay never meets old files)."""
    path = sink_root / f"{batch_id}-{uuid.uuid4().hex[:12]}"
    path.mkdir(parents=True)
    return path


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def task_file(batch_dir: str, partition_id: int, attempt_id: int) -> Path:
    """The task attempt's staging file; a missing ``batch_dir`` means the executor cannot see
    the driver's filesystem, which staging needs."""
    folder = Path(batch_dir)
    if not folder.is_dir():
        raise FileNotFoundError(
            f"staging directory {batch_dir} is not visible on this executor; fix: pass "
            "KafkaLogSink(..., staging='<a directory every executor and the driver share>') "
            "or staging=False (encoded bytes then travel through the driver JVM)"
        )
    return folder / f"task-{partition_id}-{attempt_id}.kbatches"


class StagingFiles:
    """The staging files one batch call reads, each opened once and kept open while it is read
    from, at most ``budget`` at a time (the least recently used one is closed first)."""

    def __init__(self, budget: int = STAGING_FILES_OPEN) -> None:
        self.budget = max(1, budget)
        self._open: OrderedDict[str, int] = OrderedDict()

    def read(self, spans: Sequence[tuple[str, int, int]]) -> bytearray:
        """The (path, position, length) spans back to back in one buffer (a short read is
        corruption)."""
        buf = bytearray(sum(length for _, _, length in spans))
        view = memoryview(buf)
        at = 0
        for path, position, length in spans:
            got = self._read_into(self._fd(path), view[at : at + length], position)
            if got != length:
                raise CorruptRecordError(
                    f"staging file ended after {got} of {length} bytes",
                    file=path,
                    position=position,
                )
            at += length
        return buf

    @staticmethod
    def _read_into(fd: int, target: memoryview, position: int) -> int:
        got = 0
        while got < len(target):
            n = os.preadv(fd, [target[got:]], position + got)
            if n == 0:
                break
            got += n
        return got

    def _fd(self, path: str) -> int:
        fd = self._open.get(path)
        if fd is not None:
            self._open.move_to_end(path)
            return fd
        while len(self._open) >= self.budget:
            os.close(self._open.popitem(last=False)[1])
        fd = self._open[path] = os.open(path, os.O_RDONLY)
        return fd

    def close(self) -> None:
        while self._open:
            os.close(self._open.popitem()[1])

    def __enter__(self) -> StagingFiles:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_spans(spans: Sequence[tuple[str, int, int]]) -> bytearray:
    """:meth:`StagingFiles.read` with files opened for this call only."""
    with StagingFiles() as files:
        return files.read(spans)


def assign_sequences(batches: Sequence[RecordBatch], first_sequence: int) -> int:
    """Give ``batches`` (parsed, their CRCs checked: ``parse_incoming``) consecutive base
    sequences from ``first_sequence``, in place, each CRC rewritten; returns the next one."""
    sequence = first_sequence
    for batch in batches:
        buf = batch.buffer
        _INT32.pack_into(buf, BASE_SEQUENCE_OFFSET, sequence)
        batch.crc = crc = crc32c.crc32c(buf[CRC_START:])
        _UINT32.pack_into(buf, CRC_OFFSET, crc)
        batch.base_sequence = sequence
        sequence = increment_sequence(sequence, batch.records_count)
    return sequence


def spark_master(df: Any) -> str:
    """Spark's master URL ("local[2]", "spark://...", or "" when unknown, e.g. Spark Connect)."""
    with contextlib.suppress(Exception):
        return str(df.sparkSession.sparkContext.master)
    return ""


def staging_wanted(option: str | Path | bool | None, master: str) -> bool:
    """Stage when asked, or by default when executors run on the driver's machine."""
    if option is None:
        return master.startswith("local")
    return option is not False


def staging_base(option: str | Path | bool | None) -> str | Path | None:
    return None if isinstance(option, bool) or option is None else option
