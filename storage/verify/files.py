"""Which Kafka file a path is, by its name (kafka-format.md §0, §9.1), for ``dump`` and ``verify``.

A log dir holds root files (``meta.properties``, four offset checkpoints, the clean-shutdown
marker) and ``<topic>-<partition>`` dirs; a partition dir holds segment files named by a 20-digit
base offset (``.log .index .timeindex .txnindex``), ``.snapshot`` files named by the offset their
state ends at, ``leader-epoch-checkpoint`` and ``partition.metadata``. Anything else (KRaft's
``quorum-state`` and ``*.checkpoint`` snapshots, ``.lock``) is not a log file and is left alone.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from kafkatier.storage.checkpoint.checkpoint_file import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
)
from kafkatier.storage.checkpoint.leader_epoch import LEADER_EPOCH_CHECKPOINT
from kafkatier.storage.checkpoint.metadata import (
    CLEAN_SHUTDOWN_FILE,
    META_PROPERTIES_FILE,
    PARTITION_METADATA_FILE,
    parse_partition_dir_name,
)

ROOT_CHECKPOINTS: Final = (
    RECOVERY_POINT_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CLEANER_OFFSET_CHECKPOINT,
)
_SEGMENT_FILE: Final = re.compile(
    r"(\d{20})\.(log|index|timeindex|txnindex|snapshot)((?:\.deleted|\.cleaned|\.swap)?)", re.ASCII
)


class Kind(enum.Enum):
    LOG = ".log"
    INDEX = ".index"
    TIME_INDEX = ".timeindex"
    TXN_INDEX = ".txnindex"
    SNAPSHOT = ".snapshot"
    LEADER_EPOCH = "leader-epoch-checkpoint"
    PARTITION_METADATA = "partition.metadata"
    OFFSET_CHECKPOINT = "offset checkpoint"
    META_PROPERTIES = "meta.properties"
    CLEAN_SHUTDOWN = "clean-shutdown marker"
    UNKNOWN = "unknown"


SEGMENT_KINDS: Final = (Kind.LOG, Kind.INDEX, Kind.TIME_INDEX, Kind.TXN_INDEX)
_BY_SUFFIX: Final = {kind.value[1:]: kind for kind in (*SEGMENT_KINDS, Kind.SNAPSHOT)}
_BY_NAME: Final = {
    LEADER_EPOCH_CHECKPOINT: Kind.LEADER_EPOCH,
    PARTITION_METADATA_FILE: Kind.PARTITION_METADATA,
    META_PROPERTIES_FILE: Kind.META_PROPERTIES,
    CLEAN_SHUTDOWN_FILE: Kind.CLEAN_SHUTDOWN,
    **{name: Kind.OFFSET_CHECKPOINT for name in ROOT_CHECKPOINTS},
}


@dataclass(frozen=True, slots=True)
class FileName:
    """A parsed file name: its kind, the offset in a segment/snapshot name, a temporary suffix
    (``.deleted``, ``.cleaned``, ``.swap``) of an interrupted operation."""

    kind: Kind
    offset: int | None = None
    temp_suffix: str = ""


def parse_file_name(name: str) -> FileName:
    match = _SEGMENT_FILE.fullmatch(name)
    if match:
        return FileName(_BY_SUFFIX[match.group(2)], int(match.group(1)), match.group(3))
    return FileName(_BY_NAME.get(name, Kind.UNKNOWN))


def is_partition_dir(path: Path) -> bool:
    """A live ``<topic>-<partition>`` dir, or any dir that holds segment files."""
    if not path.is_dir():
        return False
    if parse_partition_dir_name(path.name) is not None:
        return True
    return any(parse_file_name(p.name).kind is Kind.LOG for p in path.iterdir())


def partition_dirs(log_dir: Path) -> list[Path]:
    """The live partition dirs of a log dir, by name (``-delete``/``-future`` dirs excluded)."""
    return sorted(
        p for p in log_dir.iterdir() if p.is_dir() and parse_partition_dir_name(p.name) is not None
    )


def is_log_dir(path: Path) -> bool:
    """A dir with log-dir root files or partition dirs (and no segments of its own)."""
    if not path.is_dir() or is_partition_dir(path):
        return False
    return any(
        parse_file_name(p.name).kind in (Kind.META_PROPERTIES, Kind.OFFSET_CHECKPOINT)
        for p in path.iterdir()
    ) or bool(partition_dirs(path))


@dataclass
class PartitionFiles:
    """A partition dir's Kafka files by kind: segment files by base offset and extension."""

    directory: Path
    segments: dict[int, dict[Kind, Path]] = field(default_factory=dict)
    snapshots: dict[int, Path] = field(default_factory=dict)
    leftovers: list[Path] = field(default_factory=list)
    others: dict[Kind, Path] = field(default_factory=dict)
    misnamed: list[Path] = field(default_factory=list)  # a segment's suffix, no base offset

    @property
    def log_bases(self) -> list[int]:
        return sorted(base for base, files in self.segments.items() if Kind.LOG in files)

    @property
    def orphan_bases(self) -> list[int]:
        """Bases with index files but no ``.log``: a segment whose data is gone."""
        return sorted(base for base, files in self.segments.items() if Kind.LOG not in files)


def list_partition_files(directory: Path) -> PartitionFiles:
    found = PartitionFiles(directory)
    for path in sorted(directory.iterdir()):
        if not path.is_file():
            continue
        name = parse_file_name(path.name)
        if name.temp_suffix:
            found.leftovers.append(path)
        elif name.kind is Kind.SNAPSHOT and name.offset is not None:
            found.snapshots[name.offset] = path
        elif name.kind in SEGMENT_KINDS and name.offset is not None:
            found.segments.setdefault(name.offset, {})[name.kind] = path
        elif path.suffix in (".log", ".index", ".timeindex", ".txnindex"):
            found.misnamed.append(path)
        elif name.kind is not Kind.UNKNOWN:
            found.others[name.kind] = path
    return found
