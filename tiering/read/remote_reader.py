"""Reading a partition straight from the remote store, joined with what is still local.

A FINISHED segment's ``index`` and ``timeindex`` objects (small: one entry per
``index.interval.bytes``) are fetched whole once and cached; a read then starts at the byte
position the offset index gives and pulls the ``log`` object in ranged GETs of ``chunk_bytes``
(a batch larger than a chunk gets one GET of its exact length), so reading a few batches from
the middle of a 1 GiB segment moves kilobytes, not the segment. A timestamp lookup is Kafka's:
the first segment whose max timestamp reaches the target, the time index's last entry below it,
then a scan to the first record at or after it.

:func:`joined_batches` serves offsets below the local log start (segments local retention
deleted) from the remote store and the rest from the local files, which is how a reader replays
a topic whose older segments exist only remotely.
"""

from __future__ import annotations

import bisect
import functools
import struct
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from kafkatier.storage.index.txn_index import AbortedTxn
from kafkatier.storage.log.readonly import ReadOnlyPartition
from kafkatier.storage.log.segment import AnyBatch
from kafkatier.storage.record.batch import RecordBatch
from kafkatier.storage.record.crc import crc32c
from kafkatier.storage.record.records import iter_batches
from kafkatier.storage.wire import (
    BATCH_HEADER_SIZE,
    CRC_OFFSET,
    CRC_START,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    OFFSET_AND_LENGTH,
    OFFSET_INDEX_ENTRY,
    TIME_INDEX_ENTRY,
)
from kafkatier.tiering.errors import CorruptRemoteObjectError, ObjectNotFoundError, TieringError
from kafkatier.tiering.metadata.identity import RemotePartition
from kafkatier.tiering.metadata.manifest import PartitionManifest, RemoteSegment, object_key
from kafkatier.tiering.metadata.manifest_store import ManifestStore
from kafkatier.tiering.read.chunk_cache import ChunkCache
from kafkatier.tiering.read.incarnation import incarnation_of
from kafkatier.tiering.store.object_store import ObjectStore

_LAST_OFFSET_DELTA = struct.Struct(">i")
_CRC = struct.Struct(">I")
_LAST_OFFSET_DELTA_AT = 23  # BATCH_HEADER: baseOffset, length, epoch, magic, crc, attributes


class BatchSpan(NamedTuple):
    """Where one whole batch lies in a buffer, from its header alone."""

    position: int
    size: int
    last_offset: int
    legacy: bool  # magic 0/1: its offset field is the wrapper's (last) offset


def batch_spans(data: bytes | memoryview) -> list[BatchSpan]:
    """The whole batches at the start of ``data`` (a partial batch at the end is left out)."""
    return list(iter_batch_spans(data))


def iter_batch_spans(data: bytes | memoryview) -> Iterator[BatchSpan]:
    """:func:`batch_spans` one at a time, for a reader that stops early (a fetch reads the
    headers of the batches it sends, not of the whole chunk they lie in)."""
    pos = 0
    while pos + MAGIC_OFFSET + 1 <= len(data):
        offset, length = OFFSET_AND_LENGTH.unpack_from(data, pos)
        size = LOG_OVERHEAD + length
        if length <= 0 or pos + size > len(data):
            return
        legacy = data[pos + MAGIC_OFFSET] < 2
        if not legacy and size < BATCH_HEADER_SIZE:
            return  # too short for a v2 header: not a whole batch (readers report the position)
        last = offset
        if not legacy:
            last += _LAST_OFFSET_DELTA.unpack_from(data, pos + _LAST_OFFSET_DELTA_AT)[0]
        yield BatchSpan(pos, size, last, legacy)
        pos += size


def verify_spans(
    data: bytes, spans: list[BatchSpan], seg: RemoteSegment, key: str, at: int
) -> None:
    """Refuse bytes that are not what the segment's manifest entry promises: every batch's CRC
    (CRC-32C from the attributes on for v2, CRC-32 from the magic on for legacy messages) and
    its offsets inside the segment's range. A flipped bit, a truncated object or another
    segment under the key fail here, named, before any record is served."""
    view = memoryview(data)
    for span in spans:
        pos, end = span.position, span.position + span.size
        if span.legacy:
            stored = _CRC.unpack_from(data, pos + LOG_OVERHEAD)[0]
            computed = zlib.crc32(view[pos + MAGIC_OFFSET : end])
        else:
            stored = _CRC.unpack_from(data, pos + CRC_OFFSET)[0]
            computed = crc32c(view[pos + CRC_START : end])
        if stored != computed:
            raise CorruptRemoteObjectError(
                f"batch CRC mismatch (stored {stored}, computed {computed})", key=key,
                position=at + pos,
            )  # fmt: skip
        if not seg.base_offset <= span.last_offset <= seg.end_offset:
            raise CorruptRemoteObjectError(
                f"batch ending at offset {span.last_offset} outside the segment's offsets "
                f"[{seg.base_offset}, {seg.end_offset}]", key=key, position=at + pos,
            )  # fmt: skip


class RemoteLogReader:
    """Batches and timestamp lookups of one partition's FINISHED remote segments."""

    def __init__(
        self,
        store: ObjectStore,
        rp: RemotePartition,
        *,
        manifest: PartitionManifest | None = None,
        chunk_bytes: int = 1 << 20,
        chunks: ChunkCache | None = None,
    ) -> None:
        self.store = store
        self.rp = rp
        self.topic = rp.topic
        self.partition = rp.partition
        if manifest is None:
            manifest, _ = ManifestStore(store).load(rp)
        self.segments = manifest.contiguous()
        self.log_start_offset = manifest.log_start_offset
        self.chunk_bytes = chunk_bytes
        self.chunks = chunks  # runs fetched earlier, shared by a server's readers
        self._indexes: dict[tuple[str, str], list[tuple[int, int]]] = {}
        self._lock = threading.Lock()

    @property
    def end_offset(self) -> int:
        """One past the highest remote offset (the log start when nothing is remote)."""
        return self.segments[-1].end_offset + 1 if self.segments else self.log_start_offset

    def _index(self, seg: RemoteSegment, kind: str) -> list[tuple[int, int]]:
        """Offset index as (absolute offset, position); time index as (timestamp, offset)."""
        with self._lock:
            cached = self._indexes.get((seg.attempt, kind))
        if cached is not None:
            return cached
        entries: list[tuple[int, int]] = []
        if kind in seg.files:
            data = self.store.get_bytes(object_key(self.rp, seg, kind))
            layout = OFFSET_INDEX_ENTRY if kind == "index" else TIME_INDEX_ENTRY
            usable = len(data) - len(data) % layout.size
            for a, b in layout.iter_unpack(data[:usable]):
                if kind == "index":
                    entries.append((seg.base_offset + a, b))
                elif a > 0 or b > 0:  # a zero-filled (untrimmed) slot ends the entries
                    entries.append((a, seg.base_offset + b))
        with self._lock:
            self._indexes[(seg.attempt, kind)] = entries
        return entries

    def _position(self, seg: RemoteSegment, offset: int) -> int:
        entries = self._index(seg, "index")
        i = bisect.bisect_right(entries, (offset, 2**63)) - 1
        return entries[i][1] if i >= 0 else 0

    def _segment_index(self, offset: int) -> int | None:
        bases = [s.base_offset for s in self.segments]
        i = max(bisect.bisect_right(bases, offset) - 1, 0)
        if not self.segments or offset > self.segments[-1].end_offset:
            return None
        return i

    @property
    def first_offset(self) -> int | None:
        """The first readable remote offset (None: nothing remote): retention moves the
        manifest's log start past the start of the first segment it has not deleted yet."""
        if not self.segments:
            return None
        return max(self.log_start_offset, self.segments[0].base_offset)

    def batches_from(self, offset: int, end: int | None = None) -> Iterator[RecordBatch]:
        """Whole batches with last offset >= ``offset`` (and base offset < ``end``)."""
        for key, _, data in self.byte_runs(offset, end):
            for batch in iter_batches(data, file=key):
                if end is not None and batch.base_offset >= end:
                    return
                if batch.last_offset >= offset:
                    yield batch  # type: ignore[misc]

    def byte_runs(
        self, offset: int, end: int | None = None
    ) -> Iterator[tuple[str, int, bytes | memoryview]]:
        """(object key, position, bytes) of runs of whole batches, each one ranged GET of at
        most ``chunk_bytes`` (or one batch), from the batch the offset index places at or before
        ``offset`` until a batch covering ``end - 1`` or beyond. Readers filter by offset."""
        start = self._segment_index(offset)
        if start is None:
            return
        for i in range(start, len(self.segments)):
            seg = self.segments[i]
            if end is not None and seg.base_offset >= end:
                return
            position = self._position(seg, offset) if seg.base_offset <= offset else 0
            # Only a segment holding end - 1 can end the runs (no walk over the others' headers).
            last = None if end is None or seg.end_offset < end - 1 else end - 1
            following = self.segments[i + 1] if i + 1 < len(self.segments) else None
            for key, at, data in self._segment_runs(seg, position, following):
                stop = None
                if last is not None:
                    stop = next((s for s in iter_batch_spans(data) if s.last_offset >= last), None)
                if stop is not None:
                    yield key, at, data[: stop.position + stop.size]
                    return
                yield key, at, data

    def _segment_runs(
        self, seg: RemoteSegment, position: int, following: RemoteSegment | None = None
    ) -> Iterator[tuple[str, int, bytes | memoryview]]:
        """The runs of ``seg``'s ``log`` object from ``position`` (``following``: the next
        segment, whose first run is read ahead once this one's last is read)."""
        key = object_key(self.rp, seg, "log")
        size = seg.files["log"].size
        chunks = self.chunks
        while position < size:
            cached = None if chunks is None else chunks.get(key, position)
            if cached is not None:  # whole batches, checked when they arrived (chunk_cache.py)
                self._read_ahead(seg, position + len(cached), following)
                yield key, position, cached
                position += len(cached)
                continue
            data = self._fetch_run(seg, key, position, size)
            if chunks is not None:
                chunks.put(key, position, data)
                self._read_ahead(seg, position + len(data), following)
            yield key, position, data
            position += len(data)

    def _read_ahead(
        self, seg: RemoteSegment, position: int, following: RemoteSegment | None
    ) -> None:
        """The run after the one being read (at ``position`` of ``seg``, or the first of
        ``following`` where ``seg`` ends), fetched in the background if the chunk cache reads
        ahead (chunk_cache.py)."""
        if self.chunks is None:
            return
        if position >= seg.files["log"].size:
            if following is None:
                return
            seg, position = following, 0
        key = object_key(self.rp, seg, "log")
        fetch = functools.partial(self._fetch_run, seg, key, position, seg.files["log"].size)
        self.chunks.read_ahead(key, position, fetch)

    def _fetch_run(self, seg: RemoteSegment, key: str, position: int, size: int) -> bytes:
        """The whole batches of one ranged GET of ``chunk_bytes`` from ``position`` (a batch
        larger than that: one more GET of its exact length), their CRCs checked."""
        data = self.store.get_bytes(key, position, min(position + self.chunk_bytes, size))
        spans = batch_spans(data)
        if not spans:  # one batch larger than the chunk: fetch exactly it
            if len(data) < LOG_OVERHEAD:
                data = self.store.get_bytes(key, position, position + LOG_OVERHEAD)
            if len(data) >= LOG_OVERHEAD:
                _, length = OFFSET_AND_LENGTH.unpack_from(data, 0)
                data = self.store.get_bytes(key, position, position + LOG_OVERHEAD + length)
                spans = batch_spans(data)
            if not spans:
                raise TieringError(
                    "truncated or malformed batch in remote segment", key=key, position=position
                )
        verify_spans(data, spans, seg, key, position)
        return data[: spans[-1].position + spans[-1].size]

    def aborted_txns(self, start: int, end: int) -> tuple[list[AbortedTxn], bool]:
        """The remote ``.txnindex`` entries overlapping [start, end), and whether the search is
        complete (Kafka's collectAbortedTransactions: an entry whose LSO reaches ``end``
        means no later segment holds one); incomplete means: go on with the local segments."""
        first = self._segment_index(start)
        found: list[AbortedTxn] = []
        for seg in self.segments[first:] if first is not None else ():
            if "txnindex" not in seg.files:
                continue
            key = object_key(self.rp, seg, "txnindex")
            data = self.store.get_bytes(key)
            for pos in range(0, len(data) - len(data) % AbortedTxn.SIZE, AbortedTxn.SIZE):
                txn = AbortedTxn.unpack(data, pos, file=key)
                if txn.last_offset >= start and txn.first_offset < end:
                    found.append(txn)
                if txn.last_stable_offset >= end:
                    return found, True
        return found, False

    def offset_for_timestamp(self, timestamp: int) -> int | None:
        """Offset of the first record with timestamp >= ``timestamp`` (None: none remote)."""
        seg = next((s for s in self.segments if s.max_timestamp >= timestamp), None)
        if seg is None:
            return None
        entries = self._index(seg, "timeindex")
        i = bisect.bisect_left(entries, (timestamp, -1)) - 1
        start = entries[i][1] if i >= 0 else seg.base_offset
        for batch in self.batches_from(start, seg.end_offset + 1):
            if batch.max_timestamp >= timestamp:
                for record in batch.records():
                    if record.timestamp >= timestamp:
                        return record.offset
        return None


ATTEMPTS = 3
"""Fresh starts of a joined read whose segment or object went while it read (below)."""


def joined_batches(
    store: ObjectStore, log_dir: Path, topic: str, partition: int, from_offset: int
) -> Iterator[AnyBatch]:
    """Batches from ``from_offset`` on: remote below the local log start, local from there.

    Local retention deletes a segment only once its remote copy is FINISHED, so a segment that
    vanishes under the read (``FileNotFoundError``) is remote now, and a remote object retention
    or compaction removed (``ObjectNotFoundError``) has a successor in a fresh manifest: either
    makes the read start over, with a fresh listing and manifest, after the last batch it
    returned, as the Spark reader does (``sink/source/joined.py``)."""
    offset = from_offset
    for attempt in range(ATTEMPTS):
        try:
            for batch in _joined_once(store, log_dir, topic, partition, offset):
                yield batch
                offset = batch.next_offset
            return
        except (FileNotFoundError, ObjectNotFoundError):
            if attempt + 1 == ATTEMPTS:
                raise


def _joined_once(
    store: ObjectStore, log_dir: Path, topic: str, partition: int, from_offset: int
) -> Iterator[AnyBatch]:
    with ReadOnlyPartition(log_dir, topic, partition) as local:
        local_start = local.segments[0].base_offset if local.segments else None
        remote = _reader(store, log_dir, topic, partition)
        offset = from_offset
        if local_start is None or offset < local_start:
            for batch in remote.batches_from(offset, local_start):
                yield batch
                offset = batch.next_offset
        if local_start is not None:
            yield from _local_batches(local, max(offset, local_start))


def _local_batches(local: ReadOnlyPartition, offset: int) -> Iterator[AnyBatch]:
    """Whole local batches with last offset >= ``offset`` (the segment API only)."""
    for seg in local.segments_from(offset):
        position = 0
        if seg.base_offset <= offset:
            found = seg.translate_offset(offset)
            if found is None:
                continue
            position = found.position
        for batch in seg.batches(position):
            if batch.last_offset >= offset:
                yield batch


def joined_offset_for_timestamp(
    store: ObjectStore, log_dir: Path, topic: str, partition: int, timestamp: int
) -> int | None:
    """Kafka's ListOffsets by time over remote then local segments."""
    with ReadOnlyPartition(log_dir, topic, partition) as local:
        found = _reader(store, log_dir, topic, partition).offset_for_timestamp(timestamp)
        return found if found is not None else local.offset_for_timestamp(timestamp)


def _reader(store: ObjectStore, log_dir: Path, topic: str, partition: int) -> RemoteLogReader:
    rp, manifest = incarnation_of(store, log_dir, topic, partition,
                                  hint="read from a log dir that holds the topic")  # fmt: skip
    return RemoteLogReader(store, rp, manifest=manifest)
