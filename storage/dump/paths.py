"""``kafkatier dump`` as a library: every Kafka file as a stream of plain dicts.

Modelled on Kafka's ``kafka-dump-log.sh`` (DumpLogSegments). Each item has a ``"type"`` and the
``"file"`` it comes from: ``file`` (a file begins), ``batch``, ``record``, ``indexEntry``,
``timeIndexEntry``, ``abortedTxn``, ``producerState``, ``checkpointEntry``, ``leaderEpoch``,
``partitionMetadata``, ``metaProperties``, ``cleanShutdown``, ``note`` and ``problem``. Values
are Python values (keys and values stay ``bytes``); :func:`to_json` gives the JSON form, which
for batches and records has exactly the fields of ``items.JSON_FIELDS``. Items are
produced one at a time from memory-mapped files, so memory use does not grow with the log. A
torn or corrupt batch yields a ``problem`` and ends that file; nothing is ever written.

Here: which files a path names, in what order. The items and their JSON form are in
``items.py``, ``.log`` files in ``log.py``, indexes and state files in ``state.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Final

from kafkatier.storage.dump.items import Item, Progress, problem
from kafkatier.storage.dump.log import dump_log
from kafkatier.storage.dump.state import (
    dump_index,
    dump_small_file,
    dump_snapshot,
    dump_txn_index,
)
from kafkatier.storage.errors import KafkaTierError
from kafkatier.storage.verify.files import (
    Kind,
    is_log_dir,
    is_partition_dir,
    parse_file_name,
    partition_dirs,
)

__all__ = ["NotDumpableError", "dump_file", "dump_paths"]

_SEGMENT_ORDER: Final = (Kind.LOG, Kind.INDEX, Kind.TIME_INDEX, Kind.TXN_INDEX, Kind.SNAPSHOT)


class NotDumpableError(ValueError):
    """A path that is not a Kafka file or directory (a usage error)."""


def dump_paths(
    paths: Iterable[Path], *, records: bool = False, progress: Progress | None = None
) -> Iterator[Item]:
    """Items for each path: a file, a partition dir (its files in offset order) or a log dir
    (root files, then each partition). Raises NotDumpableError/FileNotFoundError up front."""
    paths = [Path(p) for p in paths]
    for path in paths:
        if not path.exists():
            raise FileNotFoundError(f"no such file or directory: {path}")
        if path.is_file() and parse_file_name(path.name).kind is Kind.UNKNOWN:
            raise NotDumpableError(f"{path} is not a Kafka log, index, snapshot or checkpoint")
        if path.is_dir() and not (is_partition_dir(path) or is_log_dir(path)):
            raise NotDumpableError(f"{path} is neither a Kafka log dir nor a partition dir")
    for path in paths:
        for file in _files(path):
            yield from dump_file(file, records=records, progress=progress)


def _files(path: Path) -> Iterator[Path]:
    if path.is_file():
        yield path
    elif is_partition_dir(path):
        yield from _partition_files(path)
    else:
        root = [p for p in sorted(path.iterdir()) if p.is_file()]
        yield from (p for p in root if parse_file_name(p.name).kind is not Kind.UNKNOWN)
        for directory in partition_dirs(path):
            yield from _partition_files(directory)


def _partition_files(directory: Path) -> list[Path]:
    def order(path: Path) -> tuple[int, int, str]:
        name = parse_file_name(path.name)
        if name.offset is None:
            return (1, 0, path.name)
        return (0, name.offset, str(_SEGMENT_ORDER.index(name.kind)) + name.temp_suffix)

    known = [p for p in directory.iterdir() if p.is_file()]
    return sorted((p for p in known if parse_file_name(p.name).kind is not Kind.UNKNOWN), key=order)


def dump_file(
    path: Path, *, records: bool = False, progress: Progress | None = None
) -> Iterator[Item]:
    name = parse_file_name(path.name)
    file = str(path)
    yield {"type": "file", "file": file, "kind": name.kind.value, "size": path.stat().st_size}
    try:
        if name.kind is Kind.LOG:
            yield from dump_log(path, records, progress)
        elif name.kind in (Kind.INDEX, Kind.TIME_INDEX):
            yield from dump_index(path, name.kind, name.offset or 0)
        elif name.kind is Kind.TXN_INDEX:
            yield from dump_txn_index(path, name.offset or 0)
        elif name.kind is Kind.SNAPSHOT:
            yield from dump_snapshot(path)
        else:
            yield from dump_small_file(path, name.kind)
    except KafkaTierError as exc:
        position = exc.context.get("position")
        yield problem(file, position if isinstance(position, int) else None, exc.message)
