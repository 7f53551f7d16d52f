"""The whole log of a tiered partition as the cleaner's choice rules see it: the segments that
exist only remotely, then every local segment.

Kafka's cleaner decides over one log (``storage.cleaner.choose``: first dirty offset, first
uncleanable
offset, dirty ratio, compaction lags) and keeps the latest record per key over all of it. A
tiered partition's log is split: segments below the local log start are only in the object store
(their FINISHED copies in the manifest), the rest is in the partition directory beside the writer.
:class:`CombinedLog` offers the few attributes of ``storage.log.Log`` those rules read, over both
parts, so the same code judges the remote copy (:func:`choose`). Remote segments are read by
ranged GETs (one for the first batch's timestamp); local ones through the read-only view.

:func:`active_producers` is Kafka's ``lastRecordsOfActiveProducers`` for the whole log: the
newest producer snapshot (local, or the remote one at the remote end) replayed to the log end.
"""

from __future__ import annotations

import bisect
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import cast

from kafkatier.storage.cleaner.choose import LogToClean, cleanable
from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.log.batch_position import BatchPosition
from kafkatier.storage.log.loader import replay_batch
from kafkatier.storage.log.log import Log
from kafkatier.storage.log.segment import AnyBatch, LogSegment
from kafkatier.storage.producer.snapshot import snapshot_path
from kafkatier.storage.producer.state import ProducerStateManager
from kafkatier.storage.record.batch import RecordBatch
from kafkatier.storage.record.records import chunked_batches, iter_batches_read_at
from kafkatier.storage.wire import BATCH_HEADER_SIZE, NO_TIMESTAMP, OFFSET_AND_LENGTH
from kafkatier.tiering.errors import CorruptRemoteObjectError
from kafkatier.tiering.metadata.identity import RemotePartition
from kafkatier.tiering.metadata.manifest import RemoteSegment, object_key
from kafkatier.tiering.store.object_store import ObjectStore

HEAD_BYTES = 16 << 10
_MAGIC_AT = 16  # baseOffset(8) batchLength(4) partitionLeaderEpoch(4), then magic


class RemoteSegmentFile:
    """One FINISHED remote segment, with the ``LogSegment`` facts the choice rules read."""

    def __init__(self, store: ObjectStore, rp: RemotePartition, seg: RemoteSegment) -> None:
        self.store = store
        self.remote = seg
        self.key = object_key(rp, seg, "log")
        self.base_offset = seg.base_offset
        self.size = seg.files["log"].size if "log" in seg.files else 0
        self._head = b""

    @property
    def largest_timestamp(self) -> int:
        return self.remote.max_timestamp if self.remote.max_timestamp >= 0 else 0

    def read_bytes(self, position: int, size: int) -> bytes:
        """Bytes of the object; fewer than the manifest's size promises is a corrupt object
        (truncated, or another one under the key), never a short segment."""
        end = min(position + size, self.size)
        if end <= position:
            return b""
        data = self.store.get_bytes(self.key, position, end)
        if len(data) != end - position:
            raise CorruptRemoteObjectError(
                f"object shorter than the manifest's {self.size} bytes", key=self.key,
                position=position + len(data),
            )  # fmt: skip
        return data

    def _read_head(self, size: int) -> bytes:
        """The segment's first ``size`` bytes; up to ``HEAD_BYTES`` fetched once and kept: the
        choice rules ask for the first batch on every pass."""
        if size > HEAD_BYTES:
            return self.read_bytes(0, size)
        if len(self._head) < min(size, self.size):
            self._head = self.read_bytes(0, HEAD_BYTES)
        return self._head[:size]

    def scan_headers(self, position: int = 0) -> Iterator[BatchPosition]:
        """Only the first batch's position (all the choice rules ask for)."""
        if position != 0:
            raise ValueError("a remote segment is scanned from its start only")
        head = self._read_head(BATCH_HEADER_SIZE)
        if len(head) < BATCH_HEADER_SIZE:
            return
        base, length = OFFSET_AND_LENGTH.unpack_from(head, 0)
        yield BatchPosition(position, OFFSET_AND_LENGTH.size + length, base, -1, head[_MAGIC_AT])

    def batches(self, position: int = 0, *, end: int | None = None) -> Iterator[AnyBatch]:
        stop = self.size if end is None else min(end, self.size)
        if stop > position:
            data = self._read_head(stop)[position:] if position == 0 else self.read_bytes(
                position, stop - position)  # fmt: skip
            yield from iter_batches_read_at(data, position, file=self.key)


class _EndMarker:
    """The active segment of a log that has no local part: empty, at the remote end."""

    def __init__(self, base_offset: int) -> None:
        self.base_offset = base_offset
        self.size = 0
        self.largest_timestamp = NO_TIMESTAMP

    def scan_headers(self, position: int = 0) -> Iterator[BatchPosition]:
        return iter(())

    def batches(self, position: int = 0, *, end: int | None = None) -> Iterator[AnyBatch]:
        return iter(())


ViewSegment = RemoteSegmentFile | LogSegment


class CombinedLog:
    """Remote-only segments then local ones, as one log (module docstring)."""

    def __init__(
        self,
        remote: Sequence[RemoteSegmentFile],
        local: Sequence[LogSegment],
        *,
        config: LogConfig,
        log_start_offset: int,
        last_stable_offset: int,
        log_end_offset: int,
    ) -> None:
        end = remote[-1].remote.end_offset + 1 if remote else log_start_offset
        # As a log always has an active segment: without a local part, an empty one at the end
        # (so that, as in Kafka, the segment holding the log end offset is the active one).
        self.active_segment: ViewSegment | _EndMarker = local[-1] if local else _EndMarker(end)
        self.segments: list[ViewSegment | _EndMarker] = [*remote, *local]
        if not local:
            self.segments.append(self.active_segment)
        self.config = config
        self.log_start_offset = log_start_offset
        self.last_stable_offset = last_stable_offset
        self.log_end_offset = log_end_offset
        self._bases = [s.base_offset for s in self.segments]

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def segments_from(self, offset: int) -> list[ViewSegment | _EndMarker]:
        first = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        return self.segments[first:]


def choose(log: CombinedLog, first_dirty_offset: int | None, now_ms: int) -> LogToClean:
    """``storage.cleaner.choose.cleanable`` over the combined log: it reads only the attributes
    above."""
    return cleanable(cast(Log, log), first_dirty_offset, now_ms)


def active_producers(
    snapshots: Sequence[tuple[int, bytes]],
    local: Sequence[LogSegment],
    *,
    config: LogConfig,
    now_ms: int,
    log_start_offset: int,
    log_end_offset: int,
) -> dict[int, tuple[int | None, int]]:
    """Each producer's last data offset and epoch at the log end (module docstring).
    ``snapshots``: (offset, file bytes) candidates; the newest valid one wins."""
    scratch = Path(tempfile.mkdtemp(prefix="kafkatier-producers-"))
    try:
        for offset, data in snapshots:
            snapshot_path(scratch, offset).write_bytes(data)
        state = ProducerStateManager(scratch, clock=lambda: now_ms,
                                     producer_id_expiration_ms=config.producer_id_expiration_ms)
        state.load(log_start_offset, log_end_offset)
        for batch in _local_batches_from(local, state.map_end_offset):
            if isinstance(batch, RecordBatch):
                replay_batch(state, batch, None)
        out: dict[int, tuple[int | None, int]] = {}
        for pid, entry in state.producers.items():
            last = entry.last_data_offset
            out[pid] = (last if last >= 0 else None, entry.producer_epoch)
        return out
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _local_batches_from(local: Sequence[LogSegment], offset: int) -> Iterator[AnyBatch]:
    for i, seg in enumerate(local):
        following = local[i + 1].base_offset if i + 1 < len(local) else None
        if following is not None and following <= offset:
            continue
        for batch in chunked_batches(seg.read_bytes, seg.size, 0, 1 << 20, str(seg.log_path),
                                     growing=following is None):  # fmt: skip
            if batch.last_offset >= offset:
                yield batch
