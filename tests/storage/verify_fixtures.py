"""A log dir written by kafkatier's own writer, for the verify/dump tests (imported by them; pytest
puts this folder on ``sys.path``), and the Kafka corpus location.

Partition ``events-0`` has several small segments of idempotent batches in every codec, two
transactional producers whose transactions interleave (one aborted while the other is open, so
the aborted entry's LSO is the other's first offset; one committed) and a plain producer;
``events-1`` holds plain batches only. The dir is closed cleanly: trimmed indexes, snapshots,
checkpoints.
"""

from __future__ import annotations

import itertools
import types
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import cramjam
import kafka.codec
import pytest

from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.log import Log
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record
from kafkatier.storage.wire import Codec

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "kafka-corpus"
TOPIC = "events"
IDEMPOTENT, TXN_A, TXN_B = 1000, 2000, 3000
T0 = 1_700_000_000_000


@contextmanager
def snappy_for_kafka_python() -> Iterator[None]:
    """kafka-python reads snappy through python-snappy, which is not installed; give it the same
    raw-block function from cramjam (kafka-python still parses the xerial framing itself)."""
    if kafka.codec.snappy is not None:
        yield
        return
    shim = types.SimpleNamespace(
        compress=lambda b: bytes(cramjam.snappy.compress_raw(b)),
        decompress=lambda b: bytes(cramjam.snappy.decompress_raw(b)),
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kafka.codec, "snappy", shim)
        yield


def corpus_log_dirs() -> list[Path]:
    """Every log dir of the corpus (a dir holding ``meta.properties``), in name order."""
    if not CORPUS.is_dir():
        return []
    return sorted({p.parent for p in CORPUS.rglob("meta.properties")})


def _records(n: int, start: int, headers: bool = False) -> list[Record]:
    hdrs = (("h", b"v"), ("nul", None)) if headers else ()
    return [
        Record(i, T0 + start + i, f"k{(start + i) % 7}".encode(), b"v" * (50 + i), hdrs)
        for i in range(n)
    ]


class _Producer:
    def __init__(self, log: Log, pid: int, transactional: bool = False) -> None:
        self.log, self.pid, self.seq, self.txn = log, pid, 0, transactional

    def send(self, n: int, codec: Codec, at: int) -> None:
        records = _records(n, at, headers=self.txn)
        data = build_batch(records, codec=codec, producer_id=self.pid, producer_epoch=0,
                           base_sequence=self.seq, transactional=self.txn)  # fmt: skip
        self.log.append(data)
        self.seq += n

    def end(self, commit: bool, at: int) -> None:
        self.log.write_txn_marker(self.pid, 0, commit=commit, timestamp=T0 + at)


def write_log_dir(path: Path) -> Path:
    """Write the log dir described in the module docstring; returns ``path``."""
    config = LogConfig(segment_bytes=1200, index_interval_bytes=300)
    with LogDirectory(path, config_for=lambda _topic: config) as log_dir:
        log = log_dir.get_or_create(TOPIC, 0)
        idem, a = _Producer(log, IDEMPOTENT), _Producer(log, TXN_A, True)
        b = _Producer(log, TXN_B, True)
        codecs = itertools.cycle(Codec)
        for step in range(12):
            idem.send(3, next(codecs), step * 10)
            log.append(build_batch(_records(2, step * 10 + 5), codec=next(codecs)))
            if step == 3:
                a.send(2, Codec.NONE, step * 10)
                b.send(2, Codec.LZ4, step * 10 + 1)
            if step == 5:
                a.send(1, Codec.GZIP, step * 10)
                a.end(commit=False, at=step * 10 + 2)  # aborted while b's txn is open
            if step == 8:
                b.end(commit=True, at=step * 10 + 3)
        other = log_dir.get_or_create(TOPIC, 1)
        for step in range(6):
            other.append(build_batch(_records(4, step * 10), codec=Codec.ZSTD))
    return path
