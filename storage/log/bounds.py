"""What a reader may read of one partition now, from its files alone: log start, high watermark
(the log end offset: a single always-leader replica) and last stable offset (LSO).

The LSO lives in a writer's memory only, so :func:`scan_bounds` rebuilds it from the files: it
takes the open transactions recorded in the newest producer snapshot (``<offset>.snapshot``,
written at every roll, so usually at the last segment's base) and scans the batch headers from
that offset to the end of the log (only transaction markers are read whole), opening a
transaction at a producer's first transactional data batch and closing it at its COMMIT/ABORT
marker. LSO = the first offset of the earliest transaction still open, else the log end. Without
a usable snapshot the scan starts at the log start. The last segment's headers are read once
(``tail.py``), for the log end and for its transactions: planning over a thousand small
partitions costs one small read each. The ABORT markers seen in the scan are returned too: a
writer appends the marker to the ``.log`` before it indexes the aborted transaction in
``.txnindex``, so a reader that trusted only the ``.txnindex`` could, for a moment, see the
marker (and the LSO past it) but not the entry, and show aborted data as committed. Readers use
both sources.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

from kafkatier.storage.errors import CorruptSnapshotError
from kafkatier.storage.index.txn_index import AbortedTxn
from kafkatier.storage.log.header_table import Header
from kafkatier.storage.log.readonly import ReadOnlyPartition
from kafkatier.storage.log.tail import LogFile
from kafkatier.storage.log.tail_cache import TailCache, TailState
from kafkatier.storage.log.txn_tracker import track_txn
from kafkatier.storage.producer.snapshot import SNAPSHOT_SUFFIX, decode_snapshot
from kafkatier.storage.wire import BATCH_HEADER, BATCH_HEADER_SIZE


@dataclass(frozen=True)
class PartitionBounds:
    """What a reader may read of one partition at one moment."""

    log_start: int
    high_watermark: int  # the log end offset: a single always-leader replica
    last_stable: int
    aborted: tuple[AbortedTxn, ...] = ()  # ABORT markers seen by the tail scan
    size_bytes: int = 0  # of the segments holding [log_start, high_watermark), if asked for

    def latest(self, committed: bool) -> int:
        """Kafka's end offset for a consumer of that isolation level."""
        return self.last_stable if committed else self.high_watermark

    def aborted_in(self, start: int, end: int) -> tuple[AbortedTxn, ...]:
        return tuple(t for t in self.aborted if t.last_offset >= start and t.first_offset < end)


def scan_bounds(
    part: ReadOnlyPartition, committed: bool, tails: TailCache | None = None
) -> PartitionBounds:
    """Log start, high watermark and LSO of ``part``, read from the files (module docstring).
    The last segment's headers are framed once, for its end and its transactions; a caller that
    reads again and again (``kafkatier serve``, a streaming query) keeps what they said in
    ``tails`` and pays only for what was appended since (``tail_cache.py``). Without
    transactions to follow (``read_uncommitted``), only the end is read, from the last segment's
    index on (``ReadOnlyPartition.log_end_offset``)."""
    if not committed:
        end = part.log_end_offset()
        return PartitionBounds(part.log_start_offset, end, end)
    if not part.bases:  # no segment at all (a remote-only partition mirrored by serve): the
        start = part.log_start_offset  # snapshot at the start may hold transactions still open
        open_txns = _snapshot_state(part, start)[1].values()
        return PartitionBounds(start, start, min([start, *open_txns]))
    with part.last_log() as log, _tail_state(part, log, tails) as state:
        new = state.frame(log)
        end = part.end_of(state.last_offset)
        start, ongoing = _snapshot_state(part, end)
        aborted: list[AbortedTxn] = []
        for base in part.bases_from(start)[:-1]:  # closed segments: indexed
            segment = part.segment(base)
            found = segment.translate_offset(start)
            for at in segment.scan_headers(found.position) if found is not None else ():
                if at.magic >= 2:
                    fields = BATCH_HEADER.unpack(segment.read_bytes(at.position, BATCH_HEADER_SIZE))
                    header = Header(at, fields[5], fields[9])
                    track_txn(header, segment.read_bytes, str(segment.log_path), ongoing, aborted)
        state.track(log, (start, tuple(sorted(ongoing.items()))), new)
        lso = min([end, *state.ongoing.values()])
        return PartitionBounds(part.log_start_offset, end, lso, (*aborted, *state.aborted))


def _tail_state(
    part: ReadOnlyPartition, log: LogFile, tails: TailCache | None
) -> AbstractContextManager[TailState]:
    """The last segment's state kept in ``tails``, else a new one for this scan alone."""
    if tails is None:
        return nullcontext(TailState(part.bases[-1], 0))
    return tails.state(part.path, part.bases[-1], log)


def _snapshot_state(part: ReadOnlyPartition, end: int) -> tuple[int, dict[int, int]]:
    """(offset, producer id -> first offset of its open transaction) from the newest readable
    snapshot within the log, else (log start, nothing open)."""
    usable = [o for o in part.snapshots if part.log_start_offset <= o <= end]
    for offset in reversed(usable):
        path = part.file(offset, SNAPSHOT_SUFFIX)
        try:
            with open(path, "rb") as src:
                entries = decode_snapshot(src.read(), file=path)
        except (FileNotFoundError, IsADirectoryError, CorruptSnapshotError):
            continue  # deleted by the writer meanwhile, or torn: an older one will do
        ongoing = {
            e.producer_id: e.current_txn_first_offset
            for e in entries
            if e.current_txn_first_offset >= 0
        }
        return offset, ongoing
    return part.log_start_offset, {}
