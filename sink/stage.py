"""Encoded micro-batch bytes between the executors and the driver: staging files, sequences.

Executors encode whole transactional record batches (compression and CRC-32C included) but
cannot know their sequence numbers: those continue the producer's sequence per Kafka partition
across all the tasks of a micro-batch. So every batch leaves the executor with a provisional base
sequence, and the driver, the partition's single writer, gives each batch its real one
(:func:`assign_sequences`) just before ``Log.append`` gives it its offsets. The base sequence is
under the CRC, so the driver first checks the executor's CRC (the bytes travelled through a file
or the JVM) and then rewrites it: two CRC-32C passes over the batch, hardware-accelerated.

Staging (the fast path, when executors see the driver's filesystem: local mode, or a shared
mount): each task attempt writes its encoded batches to one file
``<root>/kafkatier-staging/<sink key>/<batch id>-<random>/task-<p>-<attempt>.kbatches``
(concatenated v2 batches, base offsets 0, not a segment) and returns only where they are; the
driver reads them back piece by piece. Staging files are scratch, never the log: they hold no
committed state, are read only by the batch call that created them, are deleted when it ends,
and the whole sink's staging tree is removed when a sink instance starts (a crashed driver's
leftovers). A replayed batch id encodes afresh. They live outside the log dir, so a Kafka broker
still loads the log dir.
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import struct
import tempfile
import uuid
from pathlib import Path
from typing import Any, Final

import crc32c

from kafkatier.storage.errors import CorruptRecordError
from kafkatier.storage.wire import (
    CRC_OFFSET,
    CRC_START,
    LOG_OVERHEAD,
    RECORDS_COUNT_OFFSET,
    increment_sequence,
)

BASE_SEQUENCE_OFFSET: Final = RECORDS_COUNT_OFFSET - 4  # not declared in wire.py
STAGING_DIR_NAME: Final = "kafkatier-staging"
_INT32: Final = struct.Struct(">i")
_UINT32: Final = struct.Struct(">I")


def sink_staging_root(root: str | Path | None, log_dir: Path, sink_id: str) -> Path:
    """The sink's staging tree: one per (log dir, sink id), under ``root`` or the temp dir."""
    base = Path(root) if root is not None else Path(tempfile.gettempdir())
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


def read_spans(spans: list[tuple[str, int, int]]) -> bytearray:
    """The (path, position, length) spans of staging files, back to back in one buffer (a
    short read is corruption)."""
    buf = bytearray(sum(length for _, _, length in spans))
    view = memoryview(buf)
    at = 0
    for path, position, length in spans:
        with open(path, "rb", buffering=0) as f:
            f.seek(position)
            got = f.readinto(view[at : at + length])
        if got != length:
            raise CorruptRecordError(
                f"staging file ended after {got} of {length} bytes", file=path, position=position
            )
        at += length
    return buf


def assign_sequences(buf: bytearray, first_sequence: int, *, source: str) -> tuple[int, int]:
    """Give the batches in ``buf`` consecutive base sequences from ``first_sequence`` (in place,
    CRC rewritten after the executor's CRC checked); returns (next sequence, records)."""
    view = memoryview(buf)
    sequence = first_sequence
    records = 0
    position = 0
    while position < len(buf):
        if len(buf) - position < RECORDS_COUNT_OFFSET + 4:
            raise CorruptRecordError("truncated batch header", file=source, position=position)
        size = LOG_OVERHEAD + _INT32.unpack_from(buf, position + 8)[0]
        end = position + size
        if size < RECORDS_COUNT_OFFSET + 4 or end > len(buf):
            raise CorruptRecordError(
                f"batch of {size} bytes does not fit", file=source, position=position
            )
        stored = _UINT32.unpack_from(buf, position + CRC_OFFSET)[0]
        if crc32c.crc32c(view[position + CRC_START : end]) != stored:
            raise CorruptRecordError("encoded batch fails its CRC", file=source, position=position)
        _INT32.pack_into(buf, position + BASE_SEQUENCE_OFFSET, sequence)
        crc = crc32c.crc32c(view[position + CRC_START : end])
        _UINT32.pack_into(buf, position + CRC_OFFSET, crc)
        count = _INT32.unpack_from(buf, position + RECORDS_COUNT_OFFSET)[0]
        sequence = increment_sequence(sequence, count)
        records += count
        position = end
    return sequence, records


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
