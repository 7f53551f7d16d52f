"""What one partition serves, read from its files: bounds, record batches, aborted transactions,
offsets by time. Every function here blocks on the disk and runs in the server's thread pool.

The partition is opened with ``ReadOnlyPartition`` (no locks, no recovery: the sink may append
meanwhile) and its log start raised by the log dir's ``log-start-offset-checkpoint``. The high
watermark is the log end (a single always-leader replica); the last stable offset is rebuilt
from the newest producer snapshot and the batch headers after it (``bounds.scan_bounds``).

A fetch returns the bytes of whole batches exactly as they lie in the ``.log`` file, from the
batch holding the fetch offset up to the isolation level's bound (HW for read_uncommitted, LSO
for read_committed) and at most ``max_bytes``: the first batch goes out whole even when larger,
if the response holds nothing yet (Kafka's KIP-74 rule), so a consumer always makes progress.
Aborted transactions come from the ``.txnindex`` files and from the ABORT markers the bounds scan
saw (a writer appends the marker before it indexes the transaction).

With a remote store configured (``remote_view``), offsets below the local log start are read
from the remote copy of the segments local retention deleted, and the log start is the remote
one: consumers replay a tiered topic from its beginning.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kafkatier.serve.epochs import EpochCaches
from kafkatier.serve.remote_view import RemoteTier, read_remote_run
from kafkatier.serve.zero_copy import FileSpan, MemorySpan, Span
from kafkatier.storage.index.txn_index import AbortedTxn
from kafkatier.storage.log.active_index import batches_from
from kafkatier.storage.log.batch_position import BatchPosition
from kafkatier.storage.log.bounds import PartitionBounds, scan_bounds
from kafkatier.storage.log.bounds_cache import BoundsCache, Look
from kafkatier.storage.log.log_start_cache import LogStartCache
from kafkatier.storage.log.readonly import (
    ReadOnlyPartition,
    byte_ranges,
)
from kafkatier.storage.log.segment import AnyBatch
from kafkatier.storage.log.tail_cache import TailCache
from kafkatier.tiering.metadata.manifest import RemoteSegment
from kafkatier.tiering.read.remote_reader import RemoteLogReader


@dataclass(frozen=True)
class Sources:
    """Where a partition's data are read from: the local files (what their last segment's
    headers said kept in ``tails``, their bounds while unchanged in ``bounds``, their leader
    epochs in ``epochs``) and, when configured, the remote tier."""

    tails: TailCache
    remote: RemoteTier | None = None
    epochs: EpochCaches = field(default_factory=EpochCaches)
    log_starts: LogStartCache = field(default_factory=LogStartCache)
    bounds: BoundsCache = field(default_factory=BoundsCache)

    def remote_reader(
        self, log_dir: Path, topic: str, partition: int, local: tuple[int, int] | None = None
    ) -> RemoteLogReader | None:
        """The remote tier's reader (``RemoteTier.reader``; ``local``: the local files' first
        offset and the checkpointed log start, when just read)."""
        if self.remote is None:
            return None
        return self.remote.reader(log_dir, topic, partition, local)


@dataclass(frozen=True)
class FetchedPartition:
    """One partition's part of a Fetch response."""

    bounds: PartitionBounds
    records: bytes | Span = b""  # a local segment's span (sendfile) or a remote run's (zero_copy)
    aborted: tuple[AbortedTxn, ...] = ()
    out_of_range: bool = False
    remote: bool = False  # the records came from the remote store


def open_partition(
    log_dir: Path, topic: str, partition: int, sources: Sources
) -> ReadOnlyPartition:
    hint = _log_start_hint(log_dir, topic, partition, sources)
    return ReadOnlyPartition(log_dir, topic, partition, hint)


def _log_start_hint(log_dir: Path, topic: str, partition: int, sources: Sources) -> int:
    return sources.log_starts.get(log_dir).get((topic, partition), 0)


def folder(log_dir: Path, topic: str, partition: int) -> str:
    """The partition's directory, as the bounds cache and its watch know it."""
    return os.path.join(log_dir, f"{topic}-{partition}")


def _kept(
    log_dir: Path, topic: str, partition: int, sources: Sources
) -> tuple[int, str, PartitionBounds | None]:
    """The partition's checkpointed log start, its directory, and its local bounds kept from
    an earlier look if its files are unchanged (``sources.bounds``)."""
    hint = _log_start_hint(log_dir, topic, partition, sources)
    directory = folder(log_dir, topic, partition)
    return hint, directory, sources.bounds.get(directory, hint)


def bounds(log_dir: Path, topic: str, partition: int, sources: Sources) -> PartitionBounds:
    """Log start (the remote one, if older), high watermark and last stable offset now."""
    hint, local = _local(log_dir, topic, partition, sources)
    remote = sources.remote_reader(log_dir, topic, partition, (local.log_start, hint))
    return _with_remote_start(local, remote, hint)


def local_log_start(log_dir: Path, topic: str, partition: int, sources: Sources) -> int:
    """The first offset of the local segments (ListOffsets' earliest-local, KIP-405)."""
    return local_bounds(log_dir, topic, partition, sources).log_start


def local_bounds(log_dir: Path, topic: str, partition: int, sources: Sources) -> PartitionBounds:
    """The local files' bounds: kept from an earlier look while the files are unchanged
    (``sources.bounds``), else read."""
    return _local(log_dir, topic, partition, sources)[1]


def _local(
    log_dir: Path, topic: str, partition: int, sources: Sources
) -> tuple[int, PartitionBounds]:
    """:func:`local_bounds`, with the checkpointed log start it was read with."""
    hint, directory, found = _kept(log_dir, topic, partition, sources)
    if found is None:
        look = sources.bounds.look(directory)
        with ReadOnlyPartition(log_dir, topic, partition, hint) as part:
            found = _scan(part, look, hint, sources)
    return hint, found


def _scan(
    part: ReadOnlyPartition, look: Look | None, hint: int, sources: Sources
) -> PartitionBounds:
    """``scan_bounds`` of the local files, kept for the next look (``look``: the partition
    directory's stamp, taken before ``part`` listed it; ``hint``: the checkpointed log start
    ``part`` was opened with)."""
    return sources.bounds.keep(look, part, hint, lambda: scan_bounds(
        part, committed=True, tails=sources.tails))  # fmt: skip


def highest_tiered(log_dir: Path, topic: str, partition: int, sources: Sources) -> int:
    """The highest offset the remote store holds, -1 when none (latest-tiered, KIP-1005)."""
    remote = sources.remote_reader(log_dir, topic, partition)
    return remote.segments[-1].end_offset if remote is not None and remote.segments else -1


def _with_remote_start(
    found: PartitionBounds, remote: RemoteLogReader | None, hint: int
) -> PartitionBounds:
    """The local bounds with the remote copy's first offset as the log start where it is
    older, but never below the checkpointed log start ``hint``: a DeleteRecords (or total
    retention) that moved it holds at once, before the sidecar's next pass deletes the remote
    segments below it (they were served until then). A checkpointed start at the local end is
    an empty local log's (a topic only the store holds, mirrored: ``remote_topics``), not a
    moved log start."""
    first = None if remote is None else remote.first_offset
    if first is None:
        return found
    start = max(first, hint) if hint < found.high_watermark else first
    if start >= found.log_start:
        return found
    return dataclasses.replace(found, log_start=start)


def fetch(
    log_dir: Path, topic: str, partition: int, offset: int, max_bytes: int, committed: bool,
    min_one: bool, sources: Sources,
) -> FetchedPartition:
    """Batches from ``offset`` (module docstring); out of range below the log start or past
    the high watermark. Where the partition's files are unchanged, its kept bounds are used:
    a tailing consumer's poll (nothing new) is answered without opening it, and a read up to
    them skips the bounds scan."""
    hint, directory, kept = _kept(log_dir, topic, partition, sources)
    remote: RemoteLogReader | None = None
    if kept is not None:
        remote = sources.remote_reader(log_dir, topic, partition, (kept.log_start, hint))
        found = _with_remote_start(kept, remote, hint)
        if offset < found.log_start or offset > found.high_watermark:
            return FetchedPartition(found, out_of_range=True)
        if offset >= found.latest(committed):
            return FetchedPartition(found)
    look = None if kept is not None else sources.bounds.look(directory)
    with ReadOnlyPartition(log_dir, topic, partition, hint) as part:
        local = kept if kept is not None else _scan(part, look, hint, sources)
        if kept is None:
            remote = sources.remote_reader(log_dir, topic, partition, (local.log_start, hint))
        found = _with_remote_start(local, remote, hint)
        if offset < found.log_start or offset > found.high_watermark:
            return FetchedPartition(found, out_of_range=True)
        bound = found.latest(committed)
        from_remote = remote is not None and offset < local.log_start
        records: bytes | Span = b""
        run: memoryview | None = None
        if offset < bound and remote is not None and from_remote:
            run = read_remote_run(remote, offset, min(bound, local.log_start), max_bytes, min_one)
            records = MemorySpan(run) if run else b""
        if offset < bound and run is None:
            # locally, or past what the remote copy still holds below the local segments
            # (remote compaction emptied its last ones): the local batches after, as Kafka
            # moves on to the next segment (answering nothing kept consumers there for ever)
            from_remote = False
            start = max(offset, local.log_start)
            records = read_run(part, start, bound, max_bytes, min_one)
        aborted: tuple[AbortedTxn, ...] = ()
        try:
            if committed and records:
                aborted = _aborted(part, found, offset, bound, remote)
        except BaseException:
            if isinstance(records, FileSpan):
                records.close()
            raise
        return FetchedPartition(found, records, aborted, remote=from_remote)


def read_run(
    part: ReadOnlyPartition, offset: int, bound: int, max_bytes: int, min_one: bool
) -> bytes | FileSpan:
    """Whole batches holding offsets in [offset, bound), at most ``max_bytes`` (one batch more
    when ``min_one``), from a single segment (the next fetch goes on in the next one), as the
    span of its ``.log`` that holds them (b"" for none). Segments are located through their
    offset indexes, the last one's read as a hint the batch there confirms
    (``active_index.py``), its batches framed only as far as the span needs."""
    for base in part.bases_from(offset):
        if base >= bound:
            break
        with contextlib.ExitStack() as opened:
            headers = _batches_from(part, base, offset, opened)
            found = next(headers, None)
            if found is None:
                continue
            if found.base_offset >= bound:
                break
            runs = byte_ranges(itertools.chain([found], headers), found.position, bound, max_bytes)
            for position, size, _legacy in runs:
                if size > max_bytes and not min_one:
                    return b""
                return FileSpan.open(Path(part.file(base, ".log")), position, size)
    return b""


def _batches_from(
    part: ReadOnlyPartition, base: int, offset: int, opened: contextlib.ExitStack
) -> Iterator[BatchPosition]:
    """Segment ``base``'s batches from the first whose last offset is >= ``offset``."""
    if base == part.bases[-1]:
        log = opened.enter_context(part.last_log())
        return batches_from(log, part.file(base, ".index"), base, offset)
    segment = part.segment(base)
    found = segment.translate_offset(offset)
    return iter(segment.scan_headers(found.position) if found is not None else ())


def _aborted(
    part: ReadOnlyPartition, found: PartitionBounds, start: int, end: int,
    remote: RemoteLogReader | None,
) -> tuple[AbortedTxn, ...]:
    """Aborted transactions overlapping [start, end): the remote and local ``.txnindex``
    entries and the markers the bounds scan saw, each once, in first-offset order."""
    txns, complete = remote.aborted_txns(start, end) if remote is not None else ([], False)
    if not complete:
        txns.extend(part.aborted_txns(start, end))
    merged = {(t.producer_id, t.first_offset): t for t in txns}
    for txn in found.aborted_in(start, end):
        merged.setdefault((txn.producer_id, txn.first_offset), txn)
    return tuple(sorted(merged.values(), key=lambda t: t.first_offset))


def offset_for_timestamp(
    log_dir: Path, topic: str, partition: int, timestamp: int, sources: Sources
) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record whose timestamp is >= ``timestamp`` (Kafka's
    ListOffsets by time: the remote segments first, then the local ones), or None when every
    record is older."""
    with open_partition(log_dir, topic, partition, sources) as part:
        remote = sources.remote_reader(log_dir, topic, partition)
        if remote is not None and (offset := remote.offset_for_timestamp(timestamp)) is not None:
            return _record_at(remote.batches_from(offset), offset)
        offset = part.offset_for_timestamp(timestamp)
        if offset is None:
            return None
        return _record_at(_local_batches(part, offset), offset)


def max_timestamp(
    log_dir: Path, topic: str, partition: int, sources: Sources
) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record holding the partition's largest timestamp
    (ListOffsets MAX_TIMESTAMP, KIP-734), remote segments included; None when it is empty.
    Segments are compared by their max timestamps (the time index's last entry; the last
    segment, whose index a reader does not open, and remote ones by a scan or the manifest),
    then the winning segment's batches are scanned for the first such record."""
    with open_partition(log_dir, topic, partition, sources) as part:
        remote = sources.remote_reader(log_dir, topic, partition)
        local_start = part.bases[0] if part.bases else 0
        best: tuple[int, Callable[[], Iterable[AnyBatch]]] | None = None
        if remote is not None:
            for seg in remote.segments:
                if seg.base_offset < local_start and (best is None or seg.max_timestamp > best[0]):
                    best = (seg.max_timestamp, _remote_batches(remote, seg))
        for base in part.bases:
            segment = part.segment(base)
            top = (max((b.max_timestamp for b in segment.batches()), default=-1)
                   if base == part.bases[-1] else segment.max_timestamp)  # fmt: skip
            if best is None or top > best[0]:
                best = (top, segment.batches)
        if best is None or best[0] < 0:
            return None
        for batch in best[1]():
            if batch.max_timestamp == best[0]:
                found = next((r for r in batch.records() if r.timestamp == best[0]), None)
                if found is not None:
                    return found.offset, found.timestamp
        return None


def _remote_batches(
    remote: RemoteLogReader, seg: RemoteSegment
) -> Callable[[], Iterable[AnyBatch]]:
    return lambda: remote.batches_from(seg.base_offset, seg.end_offset + 1)


def _local_batches(part: ReadOnlyPartition, offset: int) -> Iterator[AnyBatch]:
    for segment in part.segments_from(offset):
        found = segment.translate_offset(offset)
        if found is not None:
            yield from segment.batches(found.position)


def _record_at(batches: Iterable[AnyBatch], offset: int) -> tuple[int, int]:
    """(offset, timestamp) of the first record at or after ``offset`` (timestamp -1 if it went
    meanwhile: retention deleted its segment)."""
    for batch in batches:
        for record in batch.records():
            if record.offset >= offset:
                return record.offset, record.timestamp
    return offset, -1


def change_token(log_dir: Path, topic: str, partition: int, sources: Sources) -> tuple[int, ...]:
    """Changes whenever the partition's log grows or rolls, for long-polling fetches: the
    stamps of its kept bounds where they have settled (``BoundsCache.token``: two ``stat``
    calls), else its segment bases and the last ``.log``'s size (a ``listdir`` and a
    ``stat``)."""
    path = folder(log_dir, topic, partition)
    kept = sources.bounds.token(path)
    if kept is not None:
        return kept
    try:
        bases = sorted(int(n[:20]) for n in os.listdir(path) if n.endswith(".log"))
        size = os.stat(os.path.join(path, f"{bases[-1]:020d}.log")).st_size if bases else 0
    except (FileNotFoundError, ValueError):
        return (-1,)
    return (*bases[-2:], len(bases), size)
