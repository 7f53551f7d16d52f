"""Checks of one partition dir: its segments in offset order, and the state files derived from them.

A partition (kafka-format.md §0) is segments with strictly increasing offsets (gaps are legal:
compaction), each with an offset and a time index; snapshots, transaction indexes and the
leader-epoch checkpoint must agree with what a replay of the batches gives. Files that are
missing are reported by path, and checks that would need them are skipped rather than guessed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kafkatier.storage.checkpoint.checkpoint_file import (
    CLEANER_OFFSET_CHECKPOINT,
    OffsetCheckpointFile,
)
from kafkatier.storage.checkpoint.leader_epoch import LEADER_EPOCH_CHECKPOINT
from kafkatier.storage.checkpoint.metadata import PartitionMetadataFile, parse_partition_dir_name
from kafkatier.storage.errors import CheckpointError
from kafkatier.storage.index.txn_index import TransactionIndex
from kafkatier.storage.log.segment import AnyBatch, LogSegment
from kafkatier.storage.verify.epochs import EpochCheck, read_epoch_checkpoint
from kafkatier.storage.verify.files import (
    Kind,
    PartitionFiles,
    list_partition_files,
    parse_file_name,
)
from kafkatier.storage.verify.index import check_offset_index, check_time_index, read_txn_index
from kafkatier.storage.verify.problem import Findings, checkpoint_message
from kafkatier.storage.verify.segment import BatchHook, SegmentFacts, scan_log
from kafkatier.storage.verify.state import StateReplay
from kafkatier.storage.wire import segment_file_name

Progress = Callable[[int], None]
"""Called with the number of ``.log`` bytes just checked."""


@dataclass(frozen=True)
class PartitionRange:
    """Where a partition's log starts and ends; ``end`` is None when the active segment's ``.log``
    is missing, so the log end offset is unknown."""

    topic_partition: tuple[str, int] | None
    first_base: int | None
    end: int | None


def verify_partition(
    directory: Path, found: Findings, progress: Progress | None = None
) -> PartitionRange:
    files = list_partition_files(directory)
    found.stats.partitions += 1
    found.stats.files += sum(len(f) for f in files.segments.values()) + len(files.snapshots)
    for path in files.leftovers:
        why = ("deleted, kept for readers until file.delete.delay.ms has passed (or left by an "
               "interrupted delete); Kafka removes it at startup" if path.name.endswith(".deleted")
               else "left over from an interrupted clean or swap (Kafka completes or discards "
               "it at startup)")  # fmt: skip
        found.add(path, None, why, severity="warning")
    for path in files.misnamed:  # writers refuse the partition, as Kafka's loader does
        found.add(path, None, "not a segment file name (<20-digit base offset> and a "
                  "segment's suffix): Kafka and kafkatier refuse to load the partition")
    _check_partition_metadata(files, found)
    epochs = _epoch_check(files, found)
    bases = sorted(files.segments)
    replay = StateReplay(directory, files.snapshots, bases[0] if bases else 0, found,
                         _cleaner_checkpoint(directory))  # fmt: skip
    previous_next: int | None = None
    last: SegmentFacts | None = None
    for base in bases:
        last = _partition_segment(files, base, base == bases[-1], previous_next, replay, epochs,
                                  found)  # fmt: skip
        if last is not None:
            previous_next = last.next_offset if last.next_offset is not None else previous_next
            if progress is not None:
                progress(last.size)
    end = None if last is None or last.damaged else max(previous_next or 0, bases[-1])
    replay.finish(end)
    first_base = bases[0] if bases else None
    return PartitionRange(parse_partition_dir_name(directory.name), first_base, end)


def _partition_segment(
    files: PartitionFiles,
    base: int,
    active: bool,
    previous_next: int | None,
    replay: StateReplay,
    epochs: EpochCheck,
    found: Findings,
) -> SegmentFacts | None:
    """One segment within its partition; None when its ``.log`` is missing."""
    log = files.directory / segment_file_name(base, ".log")
    if Kind.LOG not in files.segments[base]:
        _report_missing_log(files, base, found)
        replay.lose_state(str(log))
        _check_txn_file(files, base, replay, found)
        return None
    hole = _check_hole(files, previous_next, base, found)
    if hole is not None:
        replay.lose_state(str(hole))
    replay.start_segment(base)
    facts = check_segment(files.directory, base, active, previous_next, _both(replay, epochs),
                          found)  # fmt: skip
    if facts.damaged:
        replay.lose_state(str(log))
    _check_txn_file(files, base, replay, found)
    return facts


def _both(replay: StateReplay, epochs: EpochCheck) -> BatchHook:
    def hook(batch: AnyBatch) -> None:
        replay.apply(batch)
        epochs.apply(batch)

    return hook


def check_segment(
    directory: Path,
    base: int,
    active: bool,
    previous_next: int | None,
    hook: BatchHook | None,
    found: Findings,
) -> SegmentFacts:
    """Scan a segment's ``.log`` (``hook`` sees each sound batch) and check its offset and time
    indexes against it; ``previous_next`` is the offset the previous segment ended before."""
    found.stats.segments += 1
    segment = LogSegment(directory, base, writable=False)
    try:
        facts = scan_log(segment, found, previous_next, hook)
        for index, what in ((segment.offset_index, "offset"), (segment.time_index, "time")):
            if not index.exists:
                found.add(
                    index.path,
                    None,
                    f"{what} index missing (Kafka rebuilds it by "
                    "recovering the segment at startup)",
                    offset=base,
                )
        if segment.offset_index.exists:
            check_offset_index(segment.offset_index, facts, active, found)
        if segment.time_index.exists:
            check_time_index(segment.time_index, facts, active, found)
    finally:
        segment.close_handlers()
    return facts


def verify_segment_file(path: Path, found: Findings) -> None:
    """A ``.log``/``.index``/``.timeindex``/``.txnindex`` on its own: its segment is checked, as
    the active one if no later segment is beside it; state files are not compared."""
    base = parse_file_name(path.name).offset
    assert base is not None
    files = list_partition_files(path.parent)
    if Kind.LOG not in files.segments.get(base, {}):
        _report_missing_log(files, base, found)
        return
    found.stats.files += len(files.segments[base])
    check_segment(path.parent, base, base == max(files.segments), None, None, found)
    index = TransactionIndex(files.directory / segment_file_name(base, ".txnindex"), base)
    if index.exists:
        read_txn_index(index, found)


def _check_txn_file(files: PartitionFiles, base: int, replay: StateReplay, found: Findings) -> None:
    path = files.directory / segment_file_name(base, ".txnindex")
    index = TransactionIndex(path, base)
    stored = read_txn_index(index, found) if index.exists else []
    replay.check_txn_index(base, path, stored)


def _report_missing_log(files: PartitionFiles, base: int, found: Findings) -> None:
    others = ", ".join(sorted(p.name for p in files.segments[base].values()))
    found.add(
        files.directory / segment_file_name(base, ".log"),
        None,
        f"segment data missing: {others} exist without it, so offsets from {base} are a "
        "hole in the log",
        offset=base,
    )


def _check_hole(
    files: PartitionFiles, previous_next: int | None, base: int, found: Findings
) -> Path | None:
    """Offsets may jump between segments (compaction), but a snapshot inside the jump marks where
    a rolled segment began: that segment is gone with all its files. Returns its ``.log`` path."""
    if previous_next is None or base <= previous_next:
        return None
    lost = [s for s in files.snapshots if previous_next <= s < base and s not in files.segments]
    if not lost:
        return None
    log = files.directory / segment_file_name(lost[0], ".log")
    found.add(
        log,
        None,
        f"segment missing: offsets jump from {previous_next - 1} to {base}, and "
        f"the producer snapshot at {lost[0]} shows a segment began there",
        offset=lost[0],
    )
    return log


def _cleaner_checkpoint(directory: Path) -> int | None:
    """The log dir's record of where compaction of this partition ended (kafka-format.md §11.1);
    a malformed file is reported with the log dir's checkpoints, not here."""
    tp = parse_partition_dir_name(directory.name)
    if tp is None:
        return None
    try:
        return OffsetCheckpointFile(directory.parent / CLEANER_OFFSET_CHECKPOINT).read().get(tp)
    except CheckpointError:
        return None


def _check_partition_metadata(files: PartitionFiles, found: Findings) -> None:
    path = files.others.get(Kind.PARTITION_METADATA)
    if path is None:
        return  # written since Kafka 2.8 only
    found.stats.files += 1
    try:
        PartitionMetadataFile(path).read()
    except CheckpointError as exc:
        found.add(path, None, checkpoint_message(exc))


def _epoch_check(files: PartitionFiles, found: Findings) -> EpochCheck:
    path = files.directory / LEADER_EPOCH_CHECKPOINT
    if not path.exists():
        return EpochCheck(path, None, found)
    found.stats.files += 1
    try:
        return EpochCheck(path, read_epoch_checkpoint(path, found), found)
    except CheckpointError as exc:
        found.add(path, None, checkpoint_message(exc))
        return EpochCheck(path, [], found)
