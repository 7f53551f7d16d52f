"""The cleaner's :class:`~kafkatier.storage.cleaner.segment_store.SegmentStore` over a tiered
partition.

Reads cover the whole log (:mod:`kafkatier.tiering.cleaner.view`): the FINISHED segments that
exist only remotely, read by ranged GETs of ``io_buffer_size`` bytes (the offset index fetched
only to start inside a segment, the ``txnindex`` once per segment), then the local segments,
read with ``pread`` beside the writer. So the offset map the cleaner builds over the dirty
section holds keys written locally too, and a key overwritten locally is removed remotely.

Writes go to the remote part only: a cleaned segment is built in a local scratch directory (one
group at a time, so local disk holds at most one ``segment.bytes`` output), then handed to
:class:`~kafkatier.tiering.cleaner.swap.GroupReplacer`, which uploads it under a new attempt and
swaps it into the manifest; the scratch files go right after. Local segments are the writer's:
they are never rewritten here.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from kafkatier.storage import wire
from kafkatier.storage.cleaner.segment_store import CleanedSegment, SegmentInfo
from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.errors import StorageError
from kafkatier.storage.index.txn_index import AbortedTxn
from kafkatier.storage.log.batch_position import BatchInfo
from kafkatier.storage.log.segment import AnyBatch, LogSegment
from kafkatier.storage.record.records import chunked_batches
from kafkatier.storage.wire import OFFSET_INDEX_ENTRY
from kafkatier.tiering.cleaner.swap import GroupReplacer
from kafkatier.tiering.cleaner.view import RemoteSegmentFile
from kafkatier.tiering.errors import CorruptRemoteObjectError
from kafkatier.tiering.metadata.identity import RemotePartition
from kafkatier.tiering.metadata.manifest import RemoteSegment, object_key
from kafkatier.tiering.read.remote_reader import batch_spans, verify_spans
from kafkatier.tiering.store.object_store import ObjectStore


class _Cleaned:
    """A cleaned segment being written in the scratch directory."""

    def __init__(self, segment: LogSegment) -> None:
        self.segment = segment
        self.base_offset = segment.base_offset

    @property
    def size(self) -> int:
        return self.segment.size

    def append_batches(self, data: bytes, infos: Sequence[BatchInfo]) -> None:
        self.segment.append(data, infos)

    def append_aborted_txn(self, txn: AbortedTxn) -> None:
        self.segment.append_aborted_txn(txn)

    def discard(self) -> None:
        self.segment.delete()


class _ReadAhead:
    """Sequential ranged reads of remote segments with the next range already on its way: the
    cleaner walks a segment chunk by chunk, each chunk starting where the whole batches of the
    last one ended, so the bytes after the last chunk are what it asks for next."""

    def __init__(self) -> None:
        self.pool = ThreadPoolExecutor(max_workers=1)
        self.key = ""
        self.start = 0
        self.data = b""
        self.ahead_at = -1
        self.ahead: Future[bytes] | None = None

    def read(self, seg: RemoteSegmentFile, position: int, size: int) -> bytes:
        end = min(position + size, seg.size)
        if seg.key != self.key:
            self.key, self.start, self.data, self.ahead = seg.key, 0, b"", None
        out = bytearray()
        at = position
        if self.start <= at < self.start + len(self.data):
            out += self.data[at - self.start : end - self.start]
            at += len(out)
        if self.ahead is not None and at < end and self.ahead_at == at:
            out += self.ahead.result()[: end - at]
            at = position + len(out)
        self.ahead = None
        if at < end:
            out += seg.read_bytes(at, end - at)
        self.start, self.data = position, bytes(out)
        if end < seg.size:
            self.ahead_at, self.ahead = end, self.pool.submit(seg.read_bytes, end, size)
        return self.data

    def close(self) -> None:
        self.ahead = None
        self.pool.shutdown(wait=True, cancel_futures=True)


class RemoteSegmentStore:
    """Remote-only segments (rewritten) then local ones (read only); module docstring."""

    reads_ahead = True
    """Its ranged GETs go a range ahead (``_ReadAhead``): the cleaner's read-ahead thread gained
    nothing over them (bench/remote_compaction.py, zstd: 1.72-1.81 s against 1.66 without it)
    and held 40 MiB more (three 4 MiB chunks and their inflated batches)."""

    def __init__(
        self,
        store: ObjectStore,
        rp: RemotePartition,
        remote: Sequence[RemoteSegment],
        local: Sequence[LogSegment],
        *,
        config: LogConfig,
        replacer: GroupReplacer,
        scratch: Path,
        io_buffer_size: int = 256 << 10,
    ) -> None:
        self.store = store
        self.rp = rp
        self.remote = [RemoteSegmentFile(store, rp, s) for s in remote]
        self.local = list(local)
        self.config = config
        self.replacer = replacer
        self.scratch = scratch
        self.io_buffer_size = max(io_buffer_size, wire.BATCH_HEADER_SIZE)
        self.groups_replaced = 0
        self.bytes_written = 0
        self._txn_cache: dict[str, bytes] = {}
        self._ahead = _ReadAhead()
        self._lock = threading.Lock()

    # ----------------------------------------------------------------- reading

    def _all(self) -> list[RemoteSegmentFile | LogSegment]:
        return [*self.remote, *self.local]

    def _find(self, base_offset: int) -> RemoteSegmentFile | LogSegment:
        for seg in self._all():
            if seg.base_offset == base_offset:
                return seg
        raise KeyError(f"no segment with base {base_offset} in {self.rp}")

    def _object(self, seg: RemoteSegmentFile, kind: str) -> bytes:
        """A small per-segment object (the index, empty when absent)."""
        if kind not in seg.remote.files:
            return b""
        return self.store.get_bytes(object_key(self.rp, seg.remote, kind))

    def _txn_index(self, seg: RemoteSegmentFile) -> bytes:
        """The ``txnindex`` (one entry per aborted transaction), fetched once per pass: every
        group's rewrite asks for the aborted transactions from its segments on."""
        with self._lock:
            found = self._txn_cache.get(seg.remote.attempt)
        if found is None:
            found = self._object(seg, "txnindex")
            with self._lock:
                self._txn_cache[seg.remote.attempt] = found
        return found

    def segment_infos(self) -> list[SegmentInfo]:
        infos = []
        for seg in self.remote:
            files = seg.remote.files
            infos.append(SegmentInfo(
                seg.base_offset, seg.size,
                files["index"].size if "index" in files else 0,
                files["timeindex"].size if "timeindex" in files else 0,
                max(seg.remote.max_timestamp, 0),
            ))  # fmt: skip
        for local in self.local:
            infos.append(SegmentInfo(local.base_offset, local.size, local.offset_index.valid_bytes,
                                     local.time_index.valid_bytes, local.last_modified_ms))
        return infos

    def start_position(self, base_offset: int, start_offset: int) -> int:
        seg = self._find(base_offset)
        if start_offset <= base_offset:
            return 0
        if isinstance(seg, LogSegment):
            return seg.offset_index.lookup(start_offset)[1]
        data = self._object(seg, "index")
        usable = len(data) - len(data) % OFFSET_INDEX_ENTRY.size
        entries = [(base_offset + rel, pos) for rel, pos in OFFSET_INDEX_ENTRY.iter_unpack(
            data[:usable])]  # fmt: skip
        i = bisect.bisect_right(entries, (start_offset, 2**63)) - 1
        return entries[i][1] if i >= 0 else 0

    def read_chunk(self, base_offset: int, position: int, size: int) -> bytes:
        """Bytes from a batch boundary; a remote segment's whole batches in them verified
        (``verify_spans``: CRCs, offsets in the segment's range) before the cleaner keeps any
        of their records: a corrupt object is never rewritten into a cleaned segment."""
        seg = self._find(base_offset)
        if isinstance(seg, RemoteSegmentFile):
            data = self._ahead.read(seg, position, size)
            verify_spans(data, batch_spans(data), seg.remote, seg.key, position)
            return data
        return seg.read_bytes(position, size)

    def read_batches(self, base_offset: int, start_offset: int = -1) -> Iterator[AnyBatch]:
        seg = self._find(base_offset)
        position = self.start_position(base_offset, start_offset)
        batches = chunked_batches(seg.read_bytes, seg.size, position, self.io_buffer_size,
                                  self.location(base_offset))  # fmt: skip
        if isinstance(seg, LogSegment):
            yield from batches
            return
        for batch in batches:  # verified as read_chunk's are
            inside = seg.base_offset <= batch.last_offset <= seg.remote.end_offset
            if not (inside and batch.is_valid()):
                raise CorruptRemoteObjectError(
                    "batch CRC or offsets do not match the manifest", key=seg.key,
                    position=batch.position,
                )  # fmt: skip
            yield batch

    def location(self, base_offset: int) -> str:
        seg = self._find(base_offset)
        return seg.key if isinstance(seg, RemoteSegmentFile) else str(seg.log_path)

    def read_next_offset(self, base_offset: int) -> int:
        """A remote segment's upper bound (its range is kept whatever cleaning removed)."""
        seg = self._find(base_offset)
        if isinstance(seg, LogSegment):
            return seg.read_next_offset()
        return seg.remote.end_offset + 1

    def aborted_txns(self, start_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Kafka's ``collectAbortedTransactions`` over remote then local segments."""
        found: list[AbortedTxn] = []
        segments = self._all()
        bases = [s.base_offset for s in segments]
        for seg in segments[max(bisect.bisect_right(bases, start_offset) - 1, 0):]:
            if isinstance(seg, LogSegment):
                txns, complete = seg.collect_aborted_txns(start_offset, upper_bound)
            else:
                txns, complete = self._remote_aborted(seg, start_offset, upper_bound)
            found.extend(txns)
            if complete:
                break
        return found

    def _remote_aborted(
        self, seg: RemoteSegmentFile, start: int, upper: int
    ) -> tuple[list[AbortedTxn], bool]:
        data = self._txn_index(seg)
        found: list[AbortedTxn] = []
        for pos in range(0, len(data) - AbortedTxn.SIZE + 1, AbortedTxn.SIZE):
            txn = AbortedTxn.unpack(data, pos, file=seg.key)
            if txn.last_offset >= start and txn.first_offset < upper:
                found.append(txn)
            if txn.last_stable_offset >= upper:
                return found, True
        return found, False

    # ----------------------------------------------------------------- writing

    def create_cleaned(self, base_offset: int) -> _Cleaned:
        for ext in (".log", ".index", ".timeindex", ".txnindex"):  # a stale earlier group
            (self.scratch / wire.segment_file_name(base_offset, ext)).unlink(missing_ok=True)
        segment = LogSegment(self.scratch, base_offset,
                             index_interval_bytes=self.config.index_interval_bytes,
                             max_index_size=self.config.segment_index_bytes)  # fmt: skip
        return _Cleaned(segment)

    def replace_segments(self, new: CleanedSegment, old_bases: Sequence[int],
                         last_modified_ms: int) -> None:  # fmt: skip
        """Upload the group's cleaned segment and swap it in (``swap``); the scratch
        files are removed whatever happens."""
        assert isinstance(new, _Cleaned)
        cleaned = new.segment
        try:
            old = [self._find(b) for b in old_bases]
            if not all(isinstance(o, RemoteSegmentFile) for o in old):
                raise StorageError("a cleaning group reached the local segments",
                                   file=str(cleaned.log_path))  # fmt: skip
            olds = [o.remote for o in old if isinstance(o, RemoteSegmentFile)]
            cleaned.on_become_inactive()
            cleaned.flush()
            entry = self.replacer.replace(cleaned, olds)
        finally:
            cleaned.delete()
            for path in self.scratch.glob("*.snapshot"):
                path.unlink(missing_ok=True)
        if entry is None:
            raise StorageError("remote segments changed while they were compacted",
                               file=self.location(old_bases[0]))  # fmt: skip
        self._install(entry, old_bases)

    def _install(self, entry: RemoteSegment, old_bases: Sequence[int]) -> None:
        first = next(i for i, s in enumerate(self.remote) if s.base_offset == old_bases[0])
        new = RemoteSegmentFile(self.store, self.rp, entry)
        self.remote[first: first + len(old_bases)] = [new]
        self.groups_replaced += 1
        self.bytes_written += new.size

    def finish(self) -> None:
        """Replaced objects are deleted by the caller after its grace (``delete_replaced``)."""

    def close(self) -> None:
        self._ahead.close()
