"""The sink's own durable state: one JSON file per sink at the log-dir root, plus a lock file.

``<log dir>/kafkatier-sink.<sink id>.json`` (a file, never a directory, so a Kafka broker still
loads the log dir; written with ``fsutil.atomic_write``: tmp file, fsync, rename, fsync dir)::

    {"version": 4, "sink_id": "events", "producer_id": 123, "producer_epoch": 4,
     "producer_generation": 0, "previous_producer_id": null,
     "query_id": "<Spark query id>", "last_committed_batch": 17,
     "wal": {"batch_id": 17, "producer_id": 123, "producer_epoch": 4, "files": [...],
             "topics": ["events"], "parts": [0, 3, 1200, 40, 1, ...], "spans": [0, 0, 4096, ...]},
     "deferred": [{"batch_id": 15, ...}, {"batch_id": 16, ...}],
     "inflight": null, "unflushed_commit": null}

(one top-level key per line). ``wal`` is the last decided batch (:class:`kafkatier.sink.wal.Wal`):
saving it, with ``last_committed_batch``, is the commit point of the sink's protocol (see
:mod:`kafkatier.sink.sink`). ``deferred`` are the earlier decided batches whose partitions may not
be durable yet, oldest first (:mod:`kafkatier.sink.flushes`); version 4 files, written when a flush
followed every batch, have none. Version 3 files, written before the write-ahead log, kept the
transaction being written in ``inflight`` (its ``commit_decided`` flag was their commit point, with
each partition's log end offset after the data in ``ends``) and the last committed batch whose
COMMIT markers were not yet durable in ``unflushed_commit``: they still load, and the next start
ends what they describe as they would have; later versions never write them. Version 2 files (no
``ends``, no ``unflushed_commit``) load too. The producer id is derived from the sink id and
``producer_generation``, so it is stable across restarts; the epoch is bumped by every new sink
instance and fences the older ones (Kafka's ``InitProducerId`` with a ``transactional.id``).

Epoch exhaustion (Kafka's producer id rotation, KIP-360): an instance starting at the last epoch a
client may hold (``MAX_EPOCH - 1``) moves to the id of the next generation at epoch 0, and keeps
the old id in ``previous_producer_id`` until the old id's open transaction (if any) is ended. That
one save fences every older instance (they compare id and epoch) and survives a crash at any later
point: the next start finds ``previous_producer_id`` and ends its transaction, as Kafka aborts it
with the fencing epoch ``MAX_EPOCH`` (a marker's epoch may exceed the partition's, never be below
it). Version 1 files (written before rotation existed) load as generation 0, no previous id.

``<log dir>/kafkatier-sink.<sink id>.lock`` is an exclusive ``fcntl`` lock held for a whole
micro-batch, so two instances of one sink never interleave their steps.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from kafkatier.sink.wal import Wal
from kafkatier.storage.errors import CheckpointError, InvalidProducerEpochError
from kafkatier.storage.fsutil import (
    ATOMIC_NAME_BYTES,
    FileVersion,
    atomic_write,
    file_version,
    fitted_name,
)

FILE_PREFIX: Final = "kafkatier-sink."
VERSION: Final = 5
# 1: no producer_generation, previous id; 2: no ends, no unflushed_commit; 3: no wal; 4: no
# deferred
READABLE_VERSIONS: Final = frozenset({1, 2, 3, 4, VERSION})
MAX_EPOCH: Final = 32767  # producer epochs are int16; a client holds at most MAX_EPOCH - 1


class ProducerFencedError(InvalidProducerEpochError):
    """A newer instance of the same sink has started: this one must stop writing."""


@dataclass
class InFlight:
    """The micro-batch transaction being written; ``commit_decided`` is the commit point."""

    batch_id: int
    commit_decided: bool = False
    partitions: list[tuple[str, int]] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)
    """Per entry of ``partitions``: its log end offset after the batch's data, which is where
    the batch's COMMIT marker goes (empty when unknown: version 2 files)."""

    def end_offsets(self) -> dict[tuple[str, int], int]:
        """Partition -> ``ends`` entry; empty unless every partition has one."""
        if len(self.ends) != len(self.partitions):
            return {}
        return dict(zip(self.partitions, self.ends, strict=True))

    def to_dict(self) -> dict[str, Any]:
        return {
            "batch_id": self.batch_id,
            "commit_decided": self.commit_decided,
            "partitions": [[topic, partition] for topic, partition in self.partitions],
            "ends": list(self.ends),
        }

    @classmethod
    def from_dict(cls, body: dict[str, Any]) -> InFlight:
        partitions = [(str(t), int(p)) for t, p in body["partitions"]]
        ends = [int(e) for e in body.get("ends", [])]
        if ends and len(ends) != len(partitions):
            raise ValueError("inflight ends do not match its partitions")
        return cls(int(body["batch_id"]), bool(body["commit_decided"]), partitions, ends)


@dataclass
class SinkState:
    """What ``kafkatier-sink.<sink id>.json`` holds (see the module docstring)."""

    sink_id: str
    producer_id: int
    producer_epoch: int = -1
    query_id: str | None = None
    last_committed_batch: int = -1
    inflight: InFlight | None = None
    producer_generation: int = 0
    previous_producer_id: int | None = None
    unflushed_commit: InFlight | None = None
    wal: Wal | None = None
    deferred: list[Wal] = field(default_factory=list)

    @property
    def decided(self) -> list[Wal]:
        """Every decided batch whose partitions may not be durable yet, oldest first."""
        return [*self.deferred, *([] if self.wal is None else [self.wal])]

    def producers_to_recover(self, epoch: int) -> list[tuple[int, int]]:
        """(producer id, marker epoch) whose open transactions a recovering instance at
        ``epoch`` ends: the rotated-out id first, with the fencing epoch Kafka aborts it with."""
        current = [(self.producer_id, epoch)]
        if self.previous_producer_id is None:
            return current
        return [(self.previous_producer_id, MAX_EPOCH), *current]

    def to_json(self) -> bytes:
        """One top-level key per line; values in compact JSON (the C encoder: a decided batch of
        thousands of partitions costs microseconds, not the pure-Python ``indent`` encoder's ms)."""
        body: dict[str, Any] = {
            "version": VERSION,
            "sink_id": self.sink_id,
            "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch,
            "query_id": self.query_id,
            "last_committed_batch": self.last_committed_batch,
            "inflight": None if self.inflight is None else self.inflight.to_dict(),
            "producer_generation": self.producer_generation,
            "previous_producer_id": self.previous_producer_id,
            "unflushed_commit": (
                None if self.unflushed_commit is None else self.unflushed_commit.to_dict()
            ),
        }
        lines = [f"{json.dumps(key)}: {json.dumps(body[key])}" for key in sorted(body)]
        lines.append(f'"deferred": [{", ".join(wal.json for wal in self.deferred)}]')
        lines.append(f'"wal": {"null" if self.wal is None else self.wal.json}')
        return ("{\n " + ",\n ".join(lines) + "\n}\n").encode("utf-8")

    @classmethod
    def from_json(cls, raw: bytes, path: Path) -> SinkState:
        try:
            body = json.loads(raw)
            if body.pop("version") not in READABLE_VERSIONS:
                raise ValueError("unknown version")
            for key in ("inflight", "unflushed_commit"):
                if body.get(key) is not None:
                    body[key] = InFlight.from_dict(body[key])
            if body.get("wal") is not None:
                body["wal"] = Wal.from_dict(body["wal"])
            body["deferred"] = [Wal.from_dict(wal) for wal in body.get("deferred", [])]
            return cls(**body)
        except (ValueError, KeyError, TypeError) as exc:
            raise CheckpointError(f"unreadable sink bookkeeping: {exc}", file=str(path)) from exc


def derive_producer_id(sink_id: str, generation: int = 0) -> int:
    """A stable, non-negative int64 producer id for ``sink_id`` (below 2**62, far from -1).

    The generation is blake2b's personalization (all zeros, the default, for generation 0), so
    generation 0 keeps the ids of sinks created before ids could rotate."""
    person = generation.to_bytes(16, "big")
    digest = hashlib.blake2b(sink_id.encode("utf-8"), digest_size=8, person=person).digest()
    return int.from_bytes(digest, "big") & ((1 << 62) - 1)


def state_path(log_dir: Path, sink_id: str) -> Path:
    """``kafkatier-sink.<sink id>.json`` (an id too long for a file name, such as a
    249-character topic's: its start and a hash, ``fitted_name``)."""
    return Path(log_dir) / fitted_name(f"{FILE_PREFIX}{sink_id}", ".json", room=ATOMIC_NAME_BYTES)


def lock_path(log_dir: Path, sink_id: str) -> Path:
    return Path(log_dir) / fitted_name(f"{FILE_PREFIX}{sink_id}", ".lock")


def load_state(log_dir: Path, sink_id: str) -> SinkState:
    """The stored state, or a fresh one (epoch -1: no instance has started yet)."""
    path = state_path(log_dir, sink_id)
    if not path.exists():
        return SinkState(sink_id=sink_id, producer_id=derive_producer_id(sink_id))
    return SinkState.from_json(path.read_bytes(), path)


def save_state(log_dir: Path, state: SinkState) -> None:
    """Durably replace the bookkeeping file (rename + fsync of file and directory)."""
    atomic_write(state_path(log_dir, state.sink_id), state.to_json())


class StateFile:
    """One sink instance's view of its bookkeeping file: the state it saved last, for as long
    as the file is the one it wrote (a newer instance's save replaces the file, so its inode
    changes), so a batch does not parse a thousand partitions' write-ahead record again only to
    check that it is not fenced. The caller never changes a state in place after saving it."""

    def __init__(self, log_dir: Path, sink_id: str) -> None:
        self.log_dir, self.sink_id = log_dir, sink_id
        self._state: SinkState | None = None
        self._stamp: tuple[int, int, int] | None = None

    def load(self) -> SinkState:
        stamp = self._file_stamp()
        if self._state is None or stamp is None or stamp != self._stamp:
            self._state, self._stamp = load_state(self.log_dir, self.sink_id), stamp
        return self._state

    def save(self, state: SinkState) -> None:
        self.forget()  # unknown until the save is done
        save_state(self.log_dir, state)
        self._state, self._stamp = state, self._file_stamp()

    def forget(self) -> None:
        self._state = self._stamp = None

    def _file_stamp(self) -> FileVersion | None:
        return file_version(state_path(self.log_dir, self.sink_id))


def bump_epoch(state: SinkState) -> None:
    """A new sink instance: the next epoch, which fences every older instance; once the epochs
    are exhausted, the next generation's producer id at epoch 0 instead."""
    if state.producer_epoch + 1 < MAX_EPOCH:
        state.producer_epoch += 1
    else:
        rotate_producer_id(state)


def rotate_producer_id(state: SinkState) -> None:
    """Move to a new producer id at epoch 0, remembering the old one (see the module docstring).

    Deterministic, so a crash before the state is saved leads to the same id next time."""
    if state.previous_producer_id is not None:  # 32766 starts that all died before recovery
        raise InvalidProducerEpochError(
            "producer epoch exhausted while the previous producer id's transactions are not "
            "known to be ended; fix: let one sink instance complete its recovery",
            producer_id=state.producer_id,
            producer_epoch=state.producer_epoch,
        )
    generation = state.producer_generation + 1
    while derive_producer_id(state.sink_id, generation) == state.producer_id:
        generation += 1
    state.previous_producer_id = state.producer_id
    state.producer_id = derive_producer_id(state.sink_id, generation)
    state.producer_epoch = 0
    state.producer_generation = generation


@contextlib.contextmanager
def exclusive_lock(log_dir: Path, sink_id: str, *, wait: bool = True) -> Iterator[bool]:
    """Hold ``kafkatier-sink.<sink id>.lock`` exclusively (blocks until it is free); with
    ``wait=False``, yields False at once where an instance holds it."""
    path = lock_path(log_dir, sink_id)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)  # closing releases the lock
