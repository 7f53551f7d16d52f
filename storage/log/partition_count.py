"""A topic's partition count as a writer must take it: Kafka keeps the count in its metadata,
kafkatier in the topic's file (``topic_files``, stamped at creation) beside the directories.

Read from the directories alone, a missing last partition (moved by hand, a partial restore)
would make writers place keys by a smaller count, and a missing other one would be created
again empty, its offsets starting over at 0, and a stray directory past the recorded count (an
aborted copy, a ``mkdir``) would grow the topic, its keys placed by another count. All are
refused in one line naming the directories; a topic created before counts were recorded is
checked against its highest partition's number.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from kafkatier.storage.checkpoint.metadata import (
    PARTITION_METADATA_FILE,
    PartitionMetadataFile,
    partition_dir_name,
)
from kafkatier.storage.config.topic_files import TopicConfigStore
from kafkatier.storage.errors import StorageError


def checked_count(
    topic: str, found: Iterable[int], recorded: int | None, record: Path, log_dir: Path
) -> int:
    """The count of ``topic``, whose partitions ``found`` are on disk in ``log_dir`` and whose
    ``record`` file names ``recorded`` (None: no count there); a missing one raises."""
    present = set(found)
    beyond = count_faults(present, recorded)[1] if recorded is not None else []
    if beyond:  # a stray directory would grow the topic: keys placed by another count
        raise StorageError(
            f"topic {topic!r} has {recorded} partitions (recorded in {record}) but {log_dir} "
            f"also holds the directories of partitions {number_ranges(beyond)}; fix: remove "
            "them (kafkatier never adds partitions to a topic, as keys would move)"
        )
    count = max(max(present) + 1, recorded or 0)
    missing = count_faults(present, count)[0]
    if missing:
        where = (f"recorded in {record}" if recorded == count
                 else "its highest partition's number + 1")  # fmt: skip
        raise StorageError(
            f"topic {topic!r} has {count} partitions ({where}) but the directories of "
            f"partitions {number_ranges(missing)} are missing from {log_dir}; fix: put them back "
            "(or `kafkatier restore` them from the object store) before writing"
        )
    return count


def count_faults(present: set[int], count: int) -> tuple[list[int], list[int]]:
    """The partitions of a topic of ``count`` missing from ``present``, and those ``present``
    past the count."""
    return sorted(set(range(count)) - present), sorted(p for p in present if p >= count)


def number_ranges(numbers: list[int]) -> str:
    """``[0, 1, 2, 5]`` as ``0-2, 5``: thousands of missing partitions in one line."""
    spans: list[list[int]] = []
    for n in numbers:
        if spans and spans[-1][1] == n - 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def recorded_count(log_dir: Path, topic: str, partitions: Iterable[int]) -> int | None:
    """The partition count the topic's file records for the topic id in the first of
    ``partitions`` with a ``partition.metadata`` (None: none recorded for that id)."""
    for p in sorted(partitions):
        metadata = Path(log_dir) / partition_dir_name(topic, p) / PARTITION_METADATA_FILE
        if metadata.exists():
            topic_id = PartitionMetadataFile(metadata).read()
            return TopicConfigStore(Path(log_dir)).recorded_partitions(topic, topic_id)
    return None


def missing_partitions(log_dir: Path, topic: str, present: Iterable[int]) -> list[int]:
    """For a reader: the partitions below the count the topic's file records that
    ``present`` lacks. Without a recorded count nothing is missing: a reader of a partial
    restore (one partition restored into a new log dir) reads what is there."""
    present = set(present)
    return sorted(set(range(recorded_count(log_dir, topic, present) or 0)) - present)
