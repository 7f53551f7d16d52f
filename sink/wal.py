"""The sink's write-ahead log: where a micro-batch's encoded batches are, durable before its
commit decision, so that the decision can be carried out after any crash.

The staging files the encode job writes (:mod:`kafkatier.sink.stage`) are the log's data: once
they are fsynced, the driver records the decision with a :class:`Wal` in the bookkeeping file
(:mod:`kafkatier.sink.bookkeeping`), and only then appends to the partitions, each partition's
batches and its COMMIT marker in one write. Nothing of an undecided batch ever reaches a
partition, so a crash before the decision leaves nothing to abort, and a consumer reading
uncommitted data never sees a batch that Spark will replay.

The record (JSON, one per decided batch, kept until a flush makes its partitions durable:
:mod:`kafkatier.sink.flushes`)::

    {"batch_id": 18, "producer_id": 123, "producer_epoch": 4,
     "files": ["<log dir>/kafkatier-sink.events.wal.18-....task-0-0.kbatches", ...],
     "topics": ["events"], "parts": [0, 3, 1200, 40, 2, ...],
     "spans": [0, 0, 4096, 1, 512, 2048, ...], "starts": [5120, ...],
     "topic_ids": ["wAm4qXD0T1ChZn9XzJ6i2A"]}

``parts``, five integers a partition: its topic (index into ``topics``), partition, the
producer's first sequence in it, the records, and how many spans; ``spans``, three a span: file
(index into ``files``), position, length; each partition's spans in task order, one partition's
after the other's; ``starts``, a partition's log end offset at the decision, and ``topic_ids``,
a topic's id then: a replay never completes a batch in a partition whose log start has passed
where the batch began (retention or DeleteRecords removed it: Kafka never writes below the log
start) or in a topic deleted since (another id, or none), whose rows would come back in a
topic that never had them.

The files stay until the partitions are durable (a syncfs after this batch or a later one:
:mod:`kafkatier.sink.flushes`); while any of them exists, the next start completes every
partition of the record whose producer state shows it incomplete, the records of several
batches oldest first (:func:`kafkatier.sink.append.replay_all`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Final

from kafkatier.storage.fsutil import delete_if_exists, fsync_dir, fsync_file

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


PART_FIELDS: Final = 5  # topic index, partition, first sequence, records, spans
SPAN_FIELDS: Final = 3  # file index, position, length


@dataclass(frozen=True)
class Wal:
    """A decided micro-batch: its producer, staging files and partitions (module docstring).

    Kept as flat integer columns, as written: ``parts`` holds :data:`PART_FIELDS` integers a
    partition, ``spans`` :data:`SPAN_FIELDS` a span, the partitions' spans one after the other
    (a thousand partitions cost the bookkeeping file's JSON a few flat lists, not thousands of
    small ones)."""

    batch_id: int
    producer_id: int
    producer_epoch: int
    files: list[str]
    topics: list[str]
    parts: list[int]
    spans: list[int]
    starts: list[int] = field(default_factory=list)
    """Per partition (``parts``' order), its log end offset at the decision: where the batch's
    records begin (-1: unknown; empty in records written before it was kept)."""
    topic_ids: list[str] = field(default_factory=list)
    """Per topic (``topics``' order), its topic id at the decision ("": none yet)."""

    @cached_property
    def json(self) -> str:
        """The record in compact JSON, encoded once: a batch waiting for its flush is saved
        again with every later decision (``SinkState.deferred``)."""
        return json.dumps(self.to_dict())

    def to_dict(self) -> dict[str, Any]:
        return {
            "batch_id": self.batch_id,
            "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch,
            "files": self.files,
            "topics": self.topics,
            "parts": self.parts,
            "spans": self.spans,
            "starts": self.starts,
            "topic_ids": self.topic_ids,
        }

    @classmethod
    def from_dict(cls, body: dict[str, Any]) -> Wal:
        wal = cls(int(body["batch_id"]), int(body["producer_id"]), int(body["producer_epoch"]),
                  [str(f) for f in body["files"]], [str(t) for t in body["topics"]],
                  list(body["parts"]), list(body["spans"]), list(body.get("starts", [])),
                  [str(t) for t in body.get("topic_ids", [])])  # fmt: skip
        spans = sum(wal.parts[PART_FIELDS - 1 :: PART_FIELDS])
        if len(wal.parts) % PART_FIELDS or spans * SPAN_FIELDS != len(wal.spans):
            raise ValueError("write-ahead record: partitions and spans do not match")
        if wal.starts and len(wal.starts) * PART_FIELDS != len(wal.parts):
            raise ValueError("write-ahead record: partitions and their starts do not match")
        if wal.topic_ids and len(wal.topic_ids) != len(wal.topics):
            raise ValueError("write-ahead record: topics and their ids do not match")
        if not all(isinstance(v, int) for v in (*wal.parts, *wal.spans, *wal.starts)):
            raise ValueError("write-ahead record: a partition or span field is not an integer")
        files, topics = len(wal.files), len(wal.topics)
        if any(not 0 <= f < files for f in wal.spans[::SPAN_FIELDS]) or any(
            not 0 <= t < topics for t in wal.parts[::PART_FIELDS]
        ):
            raise ValueError("write-ahead record: a span names no file or a partition no topic")
        return wal

    @property
    def partitions(self) -> list[WalPartition]:
        found = []
        at = 0
        for i in range(0, len(self.parts), PART_FIELDS):
            topic, partition, first, records, count = self.parts[i : i + PART_FIELDS]
            flat = self.spans[at : at + count * SPAN_FIELDS]
            at += count * SPAN_FIELDS
            spans = [(flat[j], flat[j + 1], flat[j + 2]) for j in range(0, len(flat), 3)]
            found.append(WalPartition(self.topics[topic], partition, first, records, spans))
        return found

    def pending(self) -> bool:
        """Whether its partitions may not be durable yet: its files are removed only after."""
        return any(os.path.exists(path) for path in self.files)

    def spans_of(self, part: WalPartition) -> list[tuple[str, int, int]]:
        return [(self.files[f], position, length) for f, position, length in part.spans]

    def only(self, count: int) -> Wal:
        """The record of the first ``count`` partitions alone (crash tests cut a recovery)."""
        spans = sum(self.parts[PART_FIELDS - 1 : count * PART_FIELDS : PART_FIELDS])
        return replace(self, parts=self.parts[: count * PART_FIELDS],
                       spans=self.spans[: spans * SPAN_FIELDS])  # fmt: skip


def sync_files(paths: list[str], directories: list[str]) -> None:
    """Make staging files durable: each file (written whole before), then the ``directories``
    whose entries name them or their folders, so the names survive too."""
    for path in paths:
        fsync_file(Path(path))
    for directory in directories:
        fsync_dir(Path(directory))


def remove_files(paths: list[str]) -> None:
    """The staging files, once the partitions they fed are durable (no directory fsync: a
    removal lost in a crash leaves files whose batch recovery finds complete)."""
    for path in paths:
        delete_if_exists(Path(path), sync=False)
