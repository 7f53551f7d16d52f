"""The driver's side of a micro-batch: check the encoded batches before the commit decision,
write them with their COMMIT markers after it, and complete a decided batch after a crash.

The driver is the single writer of every partition. Before the decision it reads each
partition's batches from the staging files and checks them as the leader's parser does
(``parse_incoming``: framing, CRCs; a loaded file's batches all at once in the C library,
``StagingFiles.batches``) and against the records the executors say they encoded, so that
nothing it decides to commit can fail to parse later. After the decision it gives each
batch the partition's next sequence (:func:`kafkatier.sink.stage.assign_sequences`) and writes
the partition's batches and the COMMIT marker in one ``Log.append_committed``. Parsed batches up
to :data:`KEPT_BYTES` are kept between the two steps; the rest are read again.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Final, NamedTuple

from kafkatier.sink.encode import CHUNK_BYTES
from kafkatier.sink.pieces import Encoded, PartitionSpans
from kafkatier.sink.stage import CheckedFile, StagingFiles, assign_sequences
from kafkatier.sink.wal import Wal, WalPartition
from kafkatier.storage.errors import (
    CheckpointError,
    CorruptRecordError,
    LogWriteError,
    StorageError,
)
from kafkatier.storage.log.commit_fields import Carried
from kafkatier.storage.log.committed_all import Later, append_committed_all
from kafkatier.storage.log.log import Log
from kafkatier.storage.log.queued_writes import QueuedWrites
from kafkatier.storage.log.validator import parse_incoming
from kafkatier.storage.producer.entry import AppendOrigin
from kafkatier.storage.record.batch import RecordBatch
from kafkatier.storage.wire import NO_SEQUENCE

KEPT_BYTES: Final = 64 * 1024 * 1024
SPACE_MARGIN: Final = 1 << 20
SEQUENCE_SPACE: Final = 1 << 31
logger = logging.getLogger("kafkatier.sink")
Spans = Sequence[tuple[str, int, int]]
Pieces = list[list[RecordBatch]]


class Checked(NamedTuple):
    """A partition's batches, checked: its spans, first sequence, the parsed pieces if kept (a
    tuple: one is built per partition and batch), and the batches' bytes (``views``) where
    they are held in memory as one piece, which the C library's appends take. Where the
    batches are all checked in loaded staging files there are no parsed pieces: a
    ``RecordBatch`` a batch is built only for a partition that goes the full way."""

    group: PartitionSpans
    first_sequence: int
    pieces: Pieces | None
    views: list[memoryview] | None = None


def check_all(
    encoded: Encoded, sequences: dict[tuple[str, int], int], files: StagingFiles
) -> list[Checked]:
    """Every partition's batches parsed and counted (raises on the first fault, naming the
    staging file); ``sequences``: the producer's next sequence per partition."""
    kept = 0
    checked = []
    if encoded.size <= KEPT_BYTES:
        files.load(encoded.paths)
    loaded = {path: files.checked(path) for path in encoded.paths}
    for group in encoded.groups:
        first = sequences.get((group.topic, group.partition), 0)
        views = _checked_views(loaded, group)
        if views is not None:
            checked.append(Checked(group, first, None, views))
            continue
        pieces = list(read_pieces(files, group.spans))
        records = sum([b.records_count for piece in pieces for b in piece])
        if records != group.records:
            raise CorruptRecordError(
                f"{records} records where the executors encoded {group.records} for "
                f"{group.topic}-{group.partition}",
                file=group.spans[0][0],
            )
        size = sum(length for _, _, length in group.spans)
        keep = kept + size <= KEPT_BYTES
        kept += size if keep else 0
        whole = [batch.buffer for batch in pieces[0]] if keep and len(pieces) == 1 else None
        checked.append(Checked(group, first, pieces if keep else None, whole))
    return checked


def _checked_views(
    loaded: dict[str, CheckedFile | None], group: PartitionSpans
) -> list[memoryview] | None:
    """The partition's batches' bytes where every span is whole batches checked in a loaded
    file (``loaded``: ``StagingFiles.checked`` of each path), they make one piece
    (:func:`read_pieces`' rule) and their records are the executors' count; None otherwise (the
    parse then names any fault)."""
    records, size, views = 0, 0, []
    for path, position, length in group.spans:
        found = loaded[path]
        taken = None if found is None else found.take(position, length)
        if taken is None:
            return None
        records += taken[0]
        views += taken[1]
        size += length
    if records != group.records or (size > CHUNK_BYTES and len(group.spans) > 1):
        return None
    return views


def read_pieces(files: StagingFiles, spans: Spans) -> Iterator[list[RecordBatch]]:
    """The spans' batches, parsed, in pieces of at most ``CHUNK_BYTES`` (one span may exceed
    it: a task's piece is at most that already)."""
    piece: list[RecordBatch] = []
    size = 0
    for path, position, length in spans:
        if piece and size + length > CHUNK_BYTES:
            yield piece
            piece, size = [], 0
        checked = files.batches(path, position, length)
        piece += checked if checked is not None else _parse_span(files, path, position, length)
        size += length
    if piece:
        yield piece


def _parse_span(files: StagingFiles, path: str, position: int, length: int) -> list[RecordBatch]:
    try:
        return parse_incoming(files.view(path, position, length), AppendOrigin.CLIENT, file=path)
    except StorageError as exc:  # its position is the span's: say where in the file
        raise exc.moved(position) from None


def check_space(log_dir: Path, checked: list[Checked]) -> None:
    """Refuse, before the decision, a batch the log dir's filesystem has no room for: once
    decided, a batch that cannot be written waits in the write-ahead log until there is room,
    with some partitions holding it and others not. A new block of each partition's file, its
    marker and a little more are counted beside the batches' bytes; other writers can still
    fill the disk meanwhile, and the batch then waits."""
    fs = os.statvfs(log_dir)
    free = fs.f_bavail * fs.f_frsize
    need = sum(n for c in checked for _, _, n in c.group.spans)
    need += len(checked) * (fs.f_bsize + 128) + SPACE_MARGIN
    if free < need:
        raise LogWriteError.of(
            f"cannot write the batch's {len(checked)} partitions ({need} bytes with the "
            f"filesystem's blocks, {free} free)",
            OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)),
            file=str(log_dir),
        )


def to_wal(
    batch_id: int, producer_id: int, epoch: int, checked: list[Checked],
    placed: Callable[[str, int], tuple[int, str]] | None = None,
) -> Wal:  # fmt: skip
    """The write-ahead record of a checked batch (see :mod:`kafkatier.sink.wal`); ``placed``:
    a partition's log end offset and its topic's id now."""
    files: dict[str, int] = {}
    topics: dict[str, int] = {}
    ids: dict[str, str] = {}
    parts: list[int] = []
    spans: list[int] = []
    starts: list[int] = []
    for c in checked:
        group = c.group
        parts += (topics.setdefault(group.topic, len(topics)), group.partition,
                  c.first_sequence, group.records, len(group.spans))  # fmt: skip
        for path, position, length in group.spans:
            spans += (files.setdefault(path, len(files)), position, length)
        if placed is not None:
            start, ids[group.topic] = placed(group.topic, group.partition)
            starts.append(start)
    return Wal(batch_id, producer_id, epoch, list(files), list(topics), parts, spans, starts,
               [ids[t] for t in topics] if placed is not None else [])  # fmt: skip


def write_all(
    checked: list[Checked],
    log_for: Callable[[str, int], Log],
    files: StagingFiles,
    marker: tuple[int, int, int],
    after_append: Callable[[], None] | None = None,
    later: Later | None = None,
    carried: Carried | None = None,
) -> None:
    """Each partition's batches with their sequences and its COMMIT marker (``marker``:
    producer id, the marker's epoch, its timestamp); their bytes written by a thread of their
    own where it can (``QueuedWrites``), all of them before this returns. The partitions whose
    batches are all in memory go first, many at a time in one call of the C library
    (``append_committed_all``), the others one after the other. ``after_append``: the crash
    tests' hook after each partition, which needs the partition's bytes in its file then (the
    library's calls then take one partition each, and wait for its write; a crash among queued
    writes leaves what a crash after one of them leaves, fewer partitions written). ``later``:
    where the library's appends leave their logs' index and producer entries
    (``append_committed_all``'s), which the caller applies before it touches the logs again.
    ``carried``: what the library's calls carry from one batch to the next
    (``append_committed_all``'s); a partition appended the full way is forgotten there."""
    queued = QueuedWrites.open(len(checked))
    with queued or contextlib.nullcontext():
        if queued is not None:
            checked = _write_at_once(checked, log_for, marker, queued, after_append, later,
                                     carried)  # fmt: skip
        for c in checked:
            pieces = c.pieces if c.pieces is not None else read_pieces(files, c.group.spans)
            log = log_for(c.group.topic, c.group.partition)
            if carried is not None:
                carried.forget(log)
            write_partition(log, pieces, c.first_sequence, marker,
                            queued=queued if after_append is None else None)  # fmt: skip
            if after_append is not None:
                after_append()


def _write_at_once(
    checked: list[Checked], log_for: Callable[[str, int], Log], marker: tuple[int, int, int],
    queued: QueuedWrites, after_append: Callable[[], None] | None, later: Later | None,
    carried: Carried | None,
) -> list[Checked]:  # fmt: skip
    """The partitions whose batches' bytes are held (``Checked.views``), appended by one call
    of the C library (``append_committed_all``: their sequences assigned there; with
    ``after_append``, one partition a call, its write awaited before the hook); returns the
    others and those it did not take, whose batches are untouched."""
    whole: list[Checked] = []
    rest: list[Checked] = []
    appends = []
    for c in checked:
        if c.views is None:
            rest.append(c)
        else:
            whole.append(c)
            appends.append((log_for(c.group.topic, c.group.partition), c.views, c.first_sequence))
    if not whole:
        return rest
    if after_append is None:
        left = append_committed_all(appends, marker, queued, later=later, carried=carried)
    else:

        def after_one() -> None:
            queued.wait()
            after_append()

        left = append_committed_all(appends, marker, queued, after_chunk=after_one, chunk=1,
                                    later=later, carried=carried)  # fmt: skip
    return [whole[i] for i in left] + rest


def write_partition(
    log: Log, pieces: Iterator[list[RecordBatch]] | Pieces, first: int,
    marker: tuple[int, int, int], skip_records: int = 0, queued: QueuedWrites | None = None,
) -> None:  # fmt: skip
    """The pieces' batches from sequence ``first`` on (the first ``skip_records`` records are in
    the log already), the last piece with the COMMIT marker (its write may go to ``queued``)."""
    producer_id, epoch, timestamp = marker
    sequence, held = first, None
    for piece in pieces:
        if held is not None:
            log.append_batches(held)
        sequence = assign_sequences(piece, sequence)
        held = _not_in_log(piece, first, skip_records, log)
    log.append_committed(held or [], producer_id, epoch, timestamp=timestamp, queued=queued)


def _not_in_log(piece: list[RecordBatch], first: int, skip: int, log: Log) -> list[RecordBatch]:
    """The batches of ``piece`` past the first ``skip`` records of the transaction."""
    if not skip:
        return piece
    kept = []
    for batch in piece:
        done = (batch.base_sequence - first) % SEQUENCE_SPACE + batch.records_count
        if done > skip:
            if done - batch.records_count < skip:
                raise CheckpointError(
                    f"{log.topic}-{log.partition} holds part of a record batch of the sink's "
                    f"decided transaction (sequence {batch.base_sequence})",
                    file=str(log.directory),
                )
            kept.append(batch)
    return kept


def replay_all(
    wals: Sequence[Wal], log_for: Callable[[str, int], Log], marker_epoch: Callable[[Wal], int],
    timestamp: int, topic_id: Callable[[str], str | None] | None = None,
) -> int:  # fmt: skip
    """:func:`replay` of every decided batch whose partitions may not be durable (``wals``,
    oldest first: a partition's batches follow each other in its log), each partition's
    records of the later ones counted for the earlier ones; ``marker_epoch``: the fencing epoch
    for a record's producer. Returns how many partitions were completed, batch by batch."""
    after: dict[int, Counter[tuple[str, int]]] = {}  # producer -> records of the newer ones
    laters = []
    for wal in reversed(wals):  # each record's partitions read once
        newer = after.setdefault(wal.producer_id, Counter())
        laters.append(newer.copy())
        newer.update({(p.topic, p.partition): p.records for p in wal.partitions})
    return sum(replay(wal, log_for, marker_epoch(wal), timestamp, later, topic_id)
               for wal, later in zip(wals, reversed(laters), strict=True))  # fmt: skip


def replay(wal: Wal, log_for: Callable[[str, int], Log], marker_epoch: int,
           timestamp: int, later: Mapping[tuple[str, int], int] | None = None,
           topic_id: Callable[[str], str | None] | None = None) -> int:  # fmt: skip
    """Complete every partition of the decided batch ``wal`` whose producer state shows it
    incomplete (after a crash: its batches, or their end, and the marker are missing); returns
    how many were completed. ``later``: per partition, the records later decided batches put
    after this one's (:func:`replay_all`): where the partition holds some of them, this batch
    and its marker are there before them. A partition's last batch gets its marker at
    ``marker_epoch`` (the fencing epoch); an earlier one at its own, as the batches after it
    carry that epoch too and a partition refuses them after a newer one. ``topic_id``: a
    topic's id now (None: no such topic); a partition the batch may no longer go to
    (:func:`_deleted_since`, :func:`_expired`) is left as it is."""
    completed = 0
    with StagingFiles() as files:
        for index, part in enumerate(wal.partitions):
            if _deleted_since(wal, part, topic_id):  # before log_for, which would create it
                continue
            log = log_for(part.topic, part.partition)
            if _expired(wal, index, part, log):
                continue
            after = 0 if later is None else later.get((part.topic, part.partition), 0)
            epoch = wal.producer_epoch if after else marker_epoch
            present = records_present(log, wal, part, after)
            entry = log.producer_state.last_entry(wal.producer_id)
            if present >= part.records:
                open_txn = entry is not None and entry.current_txn_first_offset is not None
                if present > part.records or not open_txn:
                    continue
                log.write_txn_marker(wal.producer_id, epoch, commit=True, timestamp=timestamp)
            else:
                pieces = read_pieces(files, wal.spans_of(part))
                write_partition(log, pieces, part.first_sequence,
                                (wal.producer_id, epoch, timestamp), present)  # fmt: skip
            completed += 1
    return completed


def _deleted_since(
    wal: Wal, part: WalPartition, topic_id: Callable[[str], str | None] | None
) -> bool:
    """Whether the decided batch's topic was deleted since (no topic, or another id): its rows
    would come back in a topic that never had them (``kafkatier.sink.wal``)."""
    if not wal.topic_ids or topic_id is None:
        return False
    then = wal.topic_ids[wal.topics.index(part.topic)]
    now = topic_id(part.topic)
    if not then or now == then:
        return False
    logger.warning("sink batch %d: %s-%d not completed: the topic was deleted%s since the batch "
                   "was decided", wal.batch_id, part.topic, part.partition,
                   "" if now is None else " and created again")  # fmt: skip
    return True


def _expired(wal: Wal, index: int, part: WalPartition, log: Log) -> bool:
    """Whether ``log``'s start moved past where the batch's ``index``-th partition began:
    retention or DeleteRecords removed its records, whose absence in the producer state and
    the segments looked like a lost write (``kafkatier.sink.wal``)."""
    start = wal.starts[index] if wal.starts else -1
    if start < 0 or log.log_start_offset <= start:
        return False
    logger.warning("sink batch %d: %s-%d not completed: its log start %d is past offset %d, "
                   "where the batch began (retention or DeleteRecords removed its records)",
                   wal.batch_id, part.topic, part.partition, log.log_start_offset,
                   start)  # fmt: skip
    return True


def records_present(log: Log, wal: Wal, part: WalPartition, later: int = 0) -> int:
    """How many of the batch's records ``log`` holds, by its producer state: the records from
    the batch's first sequence to the producer's last (more than the batch's where ``later``
    records of later decided batches follow them). A newer epoch than the batch's means a
    recovery already completed the partition (only a partition's last marker carries that
    epoch). Without an entry for the producer (a loader drops one idle for
    ``producer.id.expiration.ms`` when it loads a snapshot taken after the batch), the
    partition's batches say."""
    entry = log.producer_state.last_entry(wal.producer_id)
    if entry is None:
        return records_written(log, wal, part)
    if entry.producer_epoch < wal.producer_epoch:
        return 0
    if entry.producer_epoch > wal.producer_epoch:
        return part.records
    if entry.last_seq == NO_SEQUENCE:
        return 0
    present = (entry.last_seq - part.first_sequence + 1) % SEQUENCE_SPACE
    if present > part.records + later:
        raise CheckpointError(
            f"{log.topic}-{log.partition}: the producer's last sequence {entry.last_seq} is past "
            f"the sink's decided batch {wal.batch_id} (sequences {part.first_sequence} on, "
            f"{part.records} records)",
            file=str(log.directory),
        )
    return present


def records_written(log: Log, wal: Wal, part: WalPartition) -> int:
    """The batch's records in ``log`` by reading it, newest segment first, down to the segment
    holding the batch's first record batch: its producer's data batches at its epoch whose
    sequences fall in the batch's range."""
    found = 0
    for segment in reversed(log.segments):
        first_seen = False
        for batch in segment.batches():
            if (
                isinstance(batch, RecordBatch)
                and not batch.is_control
                and batch.producer_id == wal.producer_id
                and batch.producer_epoch == wal.producer_epoch
            ):
                relative = (batch.base_sequence - part.first_sequence) % SEQUENCE_SPACE
                if relative < part.records:
                    found += batch.records_count
                    first_seen = first_seen or relative == 0
        if first_seen:
            break
    return found
