"""Encoded micro-batch bytes between the executors and the driver: staging files, sequences.

Executors encode whole transactional record batches (compression and CRC-32C included) but
cannot know their sequence numbers: those continue the producer's sequence per Kafka partition
across all the tasks of a micro-batch. So every batch leaves the executor with a provisional base
sequence, and the driver, the partition's single writer, gives each batch its real one
(:func:`assign_sequences`) just before the log gives it its offsets. The base sequence is under
the CRC, so the driver first checks the executor's CRC as the leader's parser does
(``parse_incoming``) and then rewrites it: two CRC-32C passes over the batch,
hardware-accelerated.

Staging: each task attempt writes its encoded batches to one file (concatenated v2 batches,
base offsets 0, not a segment) and returns only where they are; the driver reads them back
piece by piece (:class:`StagingFiles`: each file opened once, a bounded number at a time). The
files are the sink's write-ahead log (:mod:`kafkatier.sink.wal`): fsynced before the commit
decision and kept until the partitions are durable, so they live where a crash does not take
them. :func:`batch_place` says where: by default in the log dir itself, as regular files
``kafkatier-sink.<sink id>.wal.<batch id>-<random>.task-<p>-<attempt>.kbatches`` (a Kafka broker
loading the log dir looks at directories only); with ``staging=<dir>`` (executors on other
machines sharing a directory with the driver), in a fresh directory
``<dir>/kafkatier-staging/<sink key>/<batch id>-<random>/``. When the executors cannot see the
driver's filesystem (``staging=False``), the driver writes the pieces it fetches into one such
file in the log dir. A replayed batch id encodes afresh; a sink instance removes at its start
every staging file of its own that no pending write-ahead record names (a crashed driver's).
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import itertools
import os
import shutil
import struct
import uuid
from collections import OrderedDict
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from kafkatier.sink.bookkeeping import FILE_PREFIX
from kafkatier.storage.errors import CorruptRecordError
from kafkatier.storage.fsutil import MAX_NAME_BYTES, fitted_name
from kafkatier.storage.log.validator import ROW_LENGTH, ROW_RECORDS, checked_rows
from kafkatier.storage.record.batch import RecordBatch
from kafkatier.storage.record.crc import crc32c
from kafkatier.storage.wire import (
    CRC_OFFSET,
    CRC_START,
    LOG_OVERHEAD,
    RECORDS_COUNT_OFFSET,
    increment_sequence,
)

BASE_SEQUENCE_OFFSET: Final = RECORDS_COUNT_OFFSET - 4  # not declared in wire.py
STAGING_DIR_NAME: Final = "kafkatier-staging"
_TAG_AND_FILE: Final = len(f"{2**63}-{'0' * 12}.task-{2**31}-{2**31}.kbatches")
_WAL_PREFIX_ROOM: Final = MAX_NAME_BYTES - _TAG_AND_FILE
STAGING_FILES_OPEN: Final = 64  # descriptors a batch's reads keep open at most
_INT32: Final = struct.Struct(">i")
_UINT32: Final = struct.Struct(">I")


def sink_staging_root(root: str | Path, log_dir: Path, sink_id: str) -> Path:
    """The sink's staging tree under a shared ``root`` (one per log dir and sink id); a relative
    ``root`` is the driver's, as the executors that write there cannot resolve it."""
    digest = hashlib.blake2b(str(log_dir.resolve()).encode(), digest_size=6).hexdigest()
    return Path(root).absolute() / STAGING_DIR_NAME / fitted_name(sink_id, f"-{digest}")


@dataclass(frozen=True)
class StagingPlace:
    """Where one batch call's staging files go: ``directory`` and a file-name ``prefix``;
    ``own_directory``: the directory is the batch's alone (removed with it)."""

    directory: str
    prefix: str
    own_directory: bool

    def file(self, name: str) -> Path:
        return Path(self.directory) / f"{self.prefix}{name}"

    def durable_dirs(self) -> list[str]:
        """The directories whose fsync makes the batch's file names durable."""
        here = Path(self.directory)
        return [str(here), str(here.parent)] if self.own_directory else [str(here)]

    def remove(self) -> None:
        if self.own_directory:
            shutil.rmtree(self.directory, ignore_errors=True)
        else:
            for path in Path(self.directory).glob(f"{glob.escape(self.prefix)}*"):
                path.unlink(missing_ok=True)


def wal_prefix(sink_id: str) -> str:
    """The name every staging file of ``sink_id`` in the log dir starts with; it leaves room
    for a batch's tag and the longest file name after it (``task_file``, the JVM's too)."""
    return fitted_name(f"{FILE_PREFIX}{sink_id}", ".wal.", room=_WAL_PREFIX_ROOM)


def batch_place(
    log_dir: Path, sink_id: str, shared: str | Path | None, batch_id: int
) -> StagingPlace:
    """A fresh place for one batch call (random suffix: a replay never meets old files): in the
    log dir, or in its own directory under a ``shared`` staging root (module docstring)."""
    tag = f"{batch_id}-{uuid.uuid4().hex[:12]}"
    if shared is None:
        return StagingPlace(str(log_dir), f"{wal_prefix(sink_id)}{tag}.", own_directory=False)
    folder = sink_staging_root(shared, log_dir, sink_id) / tag
    folder.mkdir(parents=True)
    return StagingPlace(str(folder), "", own_directory=True)


def remove_leftovers(log_dir: Path, sink_id: str, shared: str | Path | None) -> None:
    """Every staging file of the sink, and every batch directory under a ``shared`` root: what
    a crashed instance left (its recovery, which runs first, completed a decided batch from
    its files and removed them)."""
    for path in log_dir.glob(f"{glob.escape(wal_prefix(sink_id))}*"):
        path.unlink(missing_ok=True)
    if shared is None:
        return
    root = sink_staging_root(shared, log_dir, sink_id)
    for folder in root.glob("*") if root.is_dir() else []:
        shutil.rmtree(folder, ignore_errors=True)


def task_file(directory: str, prefix: str, partition_id: int, attempt_id: int) -> Path:
    """The task attempt's staging file; a missing ``directory`` means the executor cannot see
    the driver's filesystem, which staging needs."""
    folder = Path(directory)
    if not folder.is_dir():
        raise FileNotFoundError(
            f"staging directory {directory} is not visible on this executor; fix: pass "
            "KafkaLogSink(..., staging='<a directory every executor and the driver share>') "
            "or staging=False (encoded bytes then travel through the driver JVM)"
        )
    return folder / f"{prefix}task-{partition_id}-{attempt_id}.kbatches"


class LoadBuffers:
    """The buffers one sink's batches load staging files into, kept from one batch to the next.

    ``foreachBatch`` calls the sink on one of py4j's callback threads, whose allocations of
    many MiB come as fresh pages every batch (glibc maps them): zeroing and faulting them in
    took 5.6-6.0 ms for each 11 MiB staging file of a 1M-row streaming micro-batch, against no
    time reused (ad hoc phase timers in ``bench/sink_stream.py``'s driver, two runs without,
    three with: ``check_all`` 15.4-16.6 -> 6.0-6.4 ms). What one batch used is kept for the
    next (at most ``KEPT_BYTES``: larger batches are not loaded), the rest let go. Not
    thread-safe: a sink runs one batch at a time."""

    def __init__(self) -> None:
        self._kept: list[bytearray] = []
        self._lent: list[bytearray] = []

    def take(self, size: int) -> memoryview:
        """``size`` bytes of the smallest kept buffer that holds them, else of a new one (a
        quarter larger: batches vary)."""
        fits = [b for b in self._kept if len(b) >= size]
        if fits:
            buf = min(fits, key=len)
            self._kept.remove(buf)
        else:
            buf = bytearray(size + size // 4)
        self._lent.append(buf)
        return memoryview(buf)[:size]

    def restore(self) -> None:
        """The batch is done with what it took: keep that for the next, let the rest go."""
        self._kept, self._lent = self._lent, []

    def clear(self) -> None:
        """Let every kept buffer go (the sink is closed: its query stopped)."""
        self._kept = []

    @property
    def kept_bytes(self) -> int:
        return sum(len(b) for b in self._kept)


class CheckedFile:
    """A loaded staging file's batches that passed the check (``validator.checked_rows``),
    without a Python object a batch: each batch's fields (its position, then ``BATCH_HEADER``'s),
    where each starts, the records before each and each one's bytes, so a partition's spans
    are counted and handed on by index (at 1,024 partitions a ``RecordBatch`` a batch cost the
    driver about as much as the check itself)."""

    __slots__ = ("_views", "records_before", "rows", "starts", "view")

    def __init__(self, view: memoryview, rows: list[list[int]], end: int) -> None:
        self.view, self.rows = view, rows
        self.starts = {row[0]: i for i, row in enumerate(rows)}
        self.starts[end] = len(rows)  # a span may end where the checked batches end
        self.records_before = [0, *itertools.accumulate(row[ROW_RECORDS] for row in rows)]
        self._views: list[memoryview] | None = None

    def span(self, position: int, length: int) -> tuple[int, int] | None:
        """The batches [first, last) that are exactly the span's bytes, or None (a span not of
        whole checked batches, or of none)."""
        first, last = self.starts.get(position), self.starts.get(position + length)
        if first is None or last is None or first >= last:
            return None
        return first, last

    def take(self, position: int, length: int) -> tuple[int, list[memoryview]] | None:
        """The span's records and its batches' bytes (a view each, of the loaded file:
        writable), or None as :meth:`span`."""
        at = self.span(position, length)
        if at is None:
            return None
        first, last = at
        if self._views is None:
            view = self.view
            self._views = [view[row[0] : row[0] + LOG_OVERHEAD + row[ROW_LENGTH]]
                           for row in self.rows]  # fmt: skip
        return self.records_before[last] - self.records_before[first], self._views[first:last]


class StagingFiles:
    """The staging files one batch call reads, each opened once and kept open while it is read
    from, at most ``budget`` at a time (the least recently used one is closed first);
    ``buffers``: where loaded files go (a sink's, kept across its batches; None: new ones)."""

    def __init__(
        self, budget: int = STAGING_FILES_OPEN, buffers: LoadBuffers | None = None
    ) -> None:
        self.budget = max(1, budget)
        self._open: OrderedDict[str, int] = OrderedDict()
        self._loaded: dict[str, memoryview] = {}
        self._checked: dict[str, CheckedFile | None] = {}
        self._buffers = buffers

    def load(self, paths: Collection[str]) -> None:
        """Read ``paths`` whole, once: :meth:`view` then slices them instead of reading each
        span (a batch over a thousand partitions has two spans a partition and a task)."""
        for path in paths:
            if path not in self._loaded:
                fd = self._fd(path)
                size = os.fstat(fd).st_size
                whole = (memoryview(bytearray(size)) if self._buffers is None
                         else self._buffers.take(size))  # fmt: skip
                self._loaded[path] = whole[: self._read_into(fd, whole, 0)]

    def view(self, path: str, position: int, length: int) -> memoryview:
        """The span's bytes: a slice of a :meth:`load`-ed file, else read into a new buffer (a
        short read is corruption)."""
        whole = self._loaded.get(path)
        if whole is None:
            return memoryview(self.read([(path, position, length)]))
        if position + length > len(whole):
            raise CorruptRecordError(
                f"staging file ended after {max(len(whole) - position, 0)} of {length} bytes",
                file=path,
                position=position,
            )
        return whole[position : position + length]

    def batches(self, path: str, position: int, length: int) -> list[RecordBatch] | None:
        """The span's batches, checked as a client's append (:meth:`checked`), where its file
        is loaded and the span is whole batches the check passed; None otherwise (the caller's
        own parse then names the fault)."""
        found = self.checked(path)
        at = None if found is None else found.span(position, length)
        if found is None or at is None:
            return None
        return [RecordBatch.of_checked(found.view, row, path) for row in found.rows[at[0] : at[1]]]

    def checked(self, path: str) -> CheckedFile | None:
        """The loaded file's batches checked as a client's append (``validator.checked_rows``:
        the framing, CRCs and client rules of ``parse_incoming``), as far as they pass; None
        where the file is not loaded or the C library is missing. The whole file is checked at
        its first use: one call into the library for all its batches (per span, a call's own
        cost was more than the Python check's)."""
        if path in self._checked:
            return self._checked[path]
        whole = self._loaded.get(path)
        if whole is None:
            return None  # not loaded (yet)
        found = checked_rows(whole)
        checked = self._checked[path] = None if found is None else CheckedFile(whole, *found)
        return checked

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
        self._loaded.clear()
        self._checked.clear()
        if self._buffers is not None:
            self._buffers.restore()
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
        batch.crc = crc = crc32c(buf[CRC_START:])
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
    """The shared staging root ``staging=`` names, None for the log dir itself."""
    return None if isinstance(option, bool) or option is None else option
