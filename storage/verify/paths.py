"""``kafkatier verify`` as a library: check Kafka log dirs, partition dirs or single files.

Nothing is modified: segments and indexes are opened read-only. What is checked, per file kind
(kafka-format.md §4-§9): every batch's framing, CRC and records; offsets strictly increasing
within and across segments; offset and time indexes against the batches they point to; producer
snapshots and transaction indexes against a replay of producer state (as far as compaction left
them checkable, see ``compaction``); the leader-epoch checkpoint against the batches'
leader epochs; ``partition.metadata``; and in a log dir ``meta.properties`` and the four offset
checkpoints, whose offsets must lie within each partition's log. Missing files are reported by
path, never a crash.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from kafkatier.storage.checkpoint.checkpoint_file import (
    LOG_START_OFFSET_CHECKPOINT,
    OffsetCheckpointFile,
)
from kafkatier.storage.checkpoint.metadata import (
    META_PROPERTIES_FILE,
    MetaProperties,
    PartitionMetadataFile,
    partition_dir_name,
)
from kafkatier.storage.errors import CheckpointError, CorruptSnapshotError
from kafkatier.storage.log.partition_count import count_faults, number_ranges, recorded_count
from kafkatier.storage.producer.snapshot import read_snapshot
from kafkatier.storage.verify.epochs import read_epoch_checkpoint
from kafkatier.storage.verify.files import (
    ROOT_CHECKPOINTS,
    Kind,
    is_log_dir,
    is_partition_dir,
    parse_file_name,
    partition_dirs,
)
from kafkatier.storage.verify.partition import (
    PartitionRange,
    Progress,
    verify_partition,
    verify_segment_file,
)
from kafkatier.storage.verify.problem import (
    Findings,
    Problem,
    VerifyStats,
    checkpoint_message,
)

__all__ = [
    "NotKafkaPathError",
    "log_bytes",
    "verify_file",
    "verify_log_dir",
    "verify_paths",
]


class NotKafkaPathError(ValueError):
    """A path that is neither a log dir, a partition dir nor a Kafka file (a usage error)."""


def verify_paths(
    paths: Iterable[Path], *, stats: VerifyStats | None = None, progress: Progress | None = None
) -> list[Problem]:
    """Check each path (log dir, partition dir or file); ``stats`` is filled in if given.

    Raises FileNotFoundError or :class:`NotKafkaPathError` for a path it cannot check at all.
    """
    found = Findings(stats=stats if stats is not None else VerifyStats())
    for path in map(Path, paths):
        if not path.exists():
            raise FileNotFoundError(f"no such file or directory: {path}")
        if path.is_file():
            verify_file(path, found)
        elif is_partition_dir(path):
            verify_partition(path, found, progress)
        elif is_log_dir(path):
            verify_log_dir(path, found, progress)
        else:
            raise NotKafkaPathError(f"{path} is neither a Kafka log dir nor a partition dir")
    return found.problems


def log_bytes(paths: Iterable[Path]) -> int:
    """Total size of the ``.log`` files under ``paths``: the work a progress bar measures."""
    total = 0
    for path in map(Path, paths):
        candidates = [path] if path.is_file() else path.rglob("*.log")
        total += sum(p.stat().st_size for p in candidates
                     if p.name.endswith(".log") and not _hidden(p, path))  # fmt: skip
    return total


def _hidden(found: Path, root: Path) -> bool:
    """Under a hidden dir of ``root`` (``kafkatier serve``'s ``.kafkatier-serve``), which
    verifying ``root`` does not walk."""
    return any(part.startswith(".") for part in found.relative_to(root).parts[:-1])


def verify_log_dir(path: Path, found: Findings, progress: Progress | None = None) -> None:
    ranges = {}
    for directory in partition_dirs(path):
        checked = verify_partition(directory, found, progress)
        if checked.topic_partition is not None:
            ranges[checked.topic_partition] = checked
    meta = path / META_PROPERTIES_FILE
    if meta.exists():
        verify_file(meta, found)
    else:
        found.add(
            meta,
            None,
            "missing: a broker cannot tell which cluster and node this log dir "
            "belongs to (KRaft brokers refuse to start)",
        )
    _check_counts(path, ranges, found)
    starts = _checkpoint(path / LOG_START_OFFSET_CHECKPOINT, found)
    for name in ROOT_CHECKPOINTS:
        offsets = starts if name == LOG_START_OFFSET_CHECKPOINT else _checkpoint(path / name, found)
        for tp, offset in offsets.items():
            if tp in ranges:
                _check_in_range(path / name, tp, offset, ranges[tp], starts, found)


def _check_counts(path: Path, partitions: Iterable[tuple[str, int]], found: Findings) -> None:
    """Each topic's partition directories against the count its file records (where it
    records one): a missing one, or a stray one past the count, which writers refuse."""
    by_topic: dict[str, set[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, set()).add(partition)
    for topic, present in sorted(by_topic.items()):
        recorded = recorded_count(path, topic, present)
        if recorded is None:
            continue
        missing, beyond = count_faults(present, recorded)
        for numbers, what in ((missing, "missing"), (beyond, "past that count")):
            if numbers:
                found.add(path / partition_dir_name(topic, numbers[0]), None,
                          f"topic {topic!r} records {recorded} partitions; the directories of "
                          f"partitions {number_ranges(numbers)} are {what}")  # fmt: skip


def _checkpoint(path: Path, found: Findings) -> dict[tuple[str, int], int]:
    if not path.exists():
        return {}
    found.stats.files += 1
    try:
        return OffsetCheckpointFile(path).read()
    except CheckpointError as exc:
        found.add(path, None, checkpoint_message(exc))
        return {}


def _check_in_range(
    path: Path,
    tp: tuple[str, int],
    offset: int,
    log: PartitionRange,
    starts: dict[tuple[str, int], int],
    found: Findings,
) -> None:
    """Checkpointed offsets lie in [log start, log end]; the log start offset itself may lie
    below the first segment (Kafka takes the larger of the two)."""
    if log.end is None or log.first_base is None:
        return  # the log end is unknown: its active segment is missing (reported)
    is_start = path.name == LOG_START_OFFSET_CHECKPOINT
    low = 0 if is_start else max(log.first_base, starts.get(tp, 0))
    if not low <= offset <= log.end:
        found.add(
            path,
            None,
            f"{tp[0]}-{tp[1]}: offset {offset} is outside the partition's log [{low}, {log.end}]",
            offset=offset,
        )


def verify_file(path: Path, found: Findings) -> None:
    """One file on its own: a segment file with its siblings, or a state/metadata file."""
    kind = parse_file_name(path.name).kind
    if kind in (Kind.LOG, Kind.INDEX, Kind.TIME_INDEX, Kind.TXN_INDEX):
        verify_segment_file(path, found)
        return
    if kind is Kind.UNKNOWN:
        raise NotKafkaPathError(f"{path} is not a Kafka log, index, snapshot or checkpoint file")
    found.stats.files += 1
    try:
        if kind is Kind.SNAPSHOT:
            read_snapshot(path)
        elif kind is Kind.LEADER_EPOCH:
            read_epoch_checkpoint(path, found)
        elif kind is Kind.PARTITION_METADATA:
            PartitionMetadataFile(path).read()
        elif kind is Kind.OFFSET_CHECKPOINT:
            OffsetCheckpointFile(path).read()
        elif kind is Kind.META_PROPERTIES:
            MetaProperties.read(path)
    except CorruptSnapshotError as exc:
        found.add(path, exc.context.get("position"), exc.message)
    except CheckpointError as exc:
        found.add(path, None, checkpoint_message(exc))
