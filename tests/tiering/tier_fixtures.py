"""Log dirs written by kafkatier's own writer for the tiering tests (imported by them).

A tiered topic gets small segments (``segment.bytes``) of plain, idempotent and transactional
batches (one aborted transaction, one committed), so every segment file kind exists: .log,
.index, .timeindex, .txnindex (where the abort is indexed) and a producer snapshot per roll.
"""

from __future__ import annotations

import itertools
from pathlib import Path

from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.log import Log
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record
from kafkatier.storage.wire import Codec
from kafkatier.tiering.metadata.identity import RemotePartition
from kafkatier.tiering.metadata.manifest_store import ManifestStore
from kafkatier.tiering.store.object_store import ObjectStore

T0 = 1_700_000_000_000
TIERED = {"remote.storage.enable": "true", "segment.bytes": "2000",
          "index.interval.bytes": "300", "retention.ms": "-1"}


def records(n: int, start: int) -> list[Record]:
    return [Record(i, T0 + start + i, f"k{start + i}".encode(), b"v" * (40 + i % 9), ())
            for i in range(n)]


def fill(log: Log, steps: int, start: int = 0) -> None:
    """Appends ``steps`` rounds: plain and idempotent batches, a transaction every 4th round
    (aborted every 8th), cycling codecs."""
    codecs = itertools.cycle(Codec)
    for step in range(start, start + steps):
        at = step * 10
        log.append(build_batch(records(3, at), codec=next(codecs)))
        if step % 4 == 3:
            pid = 5000 + step
            log.append(build_batch(records(2, at + 5), producer_id=pid, producer_epoch=0,
                                   base_sequence=0, transactional=True))
            log.write_txn_marker(pid, 0, commit=step % 8 != 7, timestamp=T0 + at + 8)


def write_tiered(
    path: Path, topic: str = "tiered", partitions: int = 1, steps: int = 40,
    overrides: dict[str, str] | None = None,
) -> Path:
    """A cleanly closed log dir with ``partitions`` partitions of a tiered topic."""
    with LogDirectory(path) as log_dir:
        log_dir.topic_configs.update(topic, {**TIERED, **(overrides or {})}, "test")
        for p in range(partitions):
            fill(log_dir.get_or_create(topic, p), steps + p)
    return path


def append_more(path: Path, topic: str, partition: int, steps: int, start: int) -> None:
    with LogDirectory(path) as log_dir:
        fill(log_dir.get_or_create(topic, partition), steps, start)


def only(store: ObjectStore, topic: str, partition: int) -> RemotePartition:
    """The one remote incarnation of ``topic``-``partition`` in ``store`` (the tests tier one
    incarnation of a topic unless they say otherwise); before any upload, the name-only place."""
    found = [rp for rp in ManifestStore(store).partitions(topic=topic) if rp.partition == partition]
    assert len(found) <= 1, f"several incarnations: {found}"
    return found[0] if found else RemotePartition.of(topic, partition, "")


def _flip(data: bytes) -> bytes:
    out = bytearray(data)
    out[len(out) // 2] ^= 0x04  # inside some batch's records
    return bytes(out)


CORRUPTIONS = {  # what may be under a segment's key instead of it: (its bytes, another's) -> bytes
    "flipped bit": lambda data, other: _flip(data),
    "truncated": lambda data, other: data[: len(data) - 7],
    "another segment under the key": lambda data, other: (other + data)[: len(data)],
}
