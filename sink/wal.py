"""The sink's write-ahead log: where a micro-batch's encoded batches are, durable before its
commit decision, so that the decision can be carried out after any crash.

The staging files the encode job writes (:mod:`kafkatier.sink.stage`) are the log's data: once
they are fsynced, the driver records the decision with a :class:`Wal` in the bookkeeping file
(:mod:`kafkatier.sink.bookkeeping`), and only then appends to the partitions, each partition's
batches and its COMMIT marker in one write. Nothing of an undecided batch ever reaches a
partition, so a crash before the decision leaves nothing to abort, and a consumer reading
uncommitted data never sees a batch that Spark will replay.

The record (JSON, one per decided batch, replaced by the next)::

    {"batch_id": 18, "producer_id": 123, "producer_epoch": 4,
     "files": ["<log dir>/kafkatier-sink.events.wal.18-....task-0-0.kbatches", ...],
     "partitions": [["events", 3, 1200, 40, [[0, 0, 4096], [1, 512, 2048]]], ...]}

per partition: topic, partition, the producer's first sequence in it, the records, and the
spans (file index, position, length) of its batches in task order. The files stay until the
partitions are durable (a syncfs after the batch; :mod:`kafkatier.sink.sink`); while any of
them exists, the next start completes every partition of the record whose producer state shows
it incomplete (:func:`kafkatier.sink.append.replay`).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafkatier.storage.fsutil import fsync_dir

Span = tuple[int, int, int]
"""(index into :attr:`Wal.files`, position, length) of batches in a staging file."""


@dataclass(frozen=True)
class WalPartition:
    """One partition's part of a decided batch."""

    topic: str
    partition: int
    first_sequence: int
    records: int
    spans: list[Span]

    def to_list(self) -> list[Any]:
        return [self.topic, self.partition, self.first_sequence, self.records,
                [list(span) for span in self.spans]]  # fmt: skip

    @classmethod
    def from_list(cls, body: list[Any]) -> WalPartition:
        topic, partition, first, records, spans = body
        return cls(str(topic), int(partition), int(first), int(records),
                   [(int(f), int(p), int(n)) for f, p, n in spans])  # fmt: skip


@dataclass(frozen=True)
class Wal:
    """A decided micro-batch: its producer, staging files and partitions (module docstring)."""

    batch_id: int
    producer_id: int
    producer_epoch: int
    files: list[str]
    partitions: list[WalPartition]

    def to_dict(self) -> dict[str, Any]:
        return {
            "batch_id": self.batch_id,
            "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch,
            "files": list(self.files),
            "partitions": [p.to_list() for p in self.partitions],
        }

    @classmethod
    def from_dict(cls, body: dict[str, Any]) -> Wal:
        files = [str(f) for f in body["files"]]
        partitions = [WalPartition.from_list(p) for p in body["partitions"]]
        if any(not 0 <= span[0] < len(files) for p in partitions for span in p.spans):
            raise ValueError("a write-ahead span names no file")
        return cls(int(body["batch_id"]), int(body["producer_id"]),
                   int(body["producer_epoch"]), files, partitions)  # fmt: skip

    def pending(self) -> bool:
        """Whether its partitions may not be durable yet: its files are removed only after."""
        return any(os.path.exists(path) for path in self.files)

    def spans_of(self, part: WalPartition) -> list[tuple[str, int, int]]:
        return [(self.files[f], position, length) for f, position, length in part.spans]


def sync_files(paths: list[str], directories: list[str]) -> None:
    """Make staging files durable: each file (written whole before), then the ``directories``
    whose entries name them or their folders, so the names survive too."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    for directory in directories:
        fsync_dir(Path(directory))


def remove_files(paths: list[str]) -> None:
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
