"""The fault soak's invariants, checked by readers that share no code with kafkatier's.

Record batches are parsed by kafka-python's ``DefaultRecordBatch`` (its own CRC check included);
remote objects are fetched with plain boto3 straight from the S3 server (not through the fault
proxy, not through kafkatier's store) and checked against the SHA-256 the manifest records. The
only kafkatier format read here is the manifest's JSON, the remote side's commit point, and
``partition.metadata``'s ``topic_id`` line.

A partition's *view* is the union of its local segments and the remote segments of its own
incarnation (the manifest under ``<topic>-<topicId>/<partition>/``), record by record, each
offset once; ``read_committed`` is applied independently: transactional records count once
their producer's COMMIT marker follows, never after an ABORT, never while still open.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka.record.default_records import DefaultRecordBatch

BATCH_HEADER = 61  # bytes before a v2 batch's records (kafka-format.md §2)


@dataclass(frozen=True)
class Rec:
    offset: int
    key: bytes | None
    value: bytes | None
    producer_id: int
    transactional: bool
    control: int | None  # None for data; 0 ABORT, 1 COMMIT


@dataclass
class Batches:
    """The raw batches of one source (local segments, remote objects, a restored copy)."""

    by_base: dict[int, bytes] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def records(self) -> Iterator[Rec]:
        for base in sorted(self.by_base):
            yield from parse_batch(self.by_base[base])


def split_batches(data: bytes, where: str, into: Batches) -> None:
    """Every batch of a segment's bytes, CRC-checked by kafka-python, into ``into``."""
    pos = 0
    while pos + 12 <= len(data):
        size = 12 + int.from_bytes(data[pos + 8 : pos + 12], "big")
        if size < BATCH_HEADER or pos + size > len(data):
            into.problems.append(f"{where}: torn batch at byte {pos} ({size} bytes)")
            return
        raw = data[pos : pos + size]
        batch = DefaultRecordBatch(bytearray(raw))
        if not batch.validate_crc():
            into.problems.append(f"{where}: batch at offset {batch.base_offset} fails its CRC")
        into.by_base[batch.base_offset] = raw
        pos += size
    if pos != len(data):
        into.problems.append(f"{where}: {len(data) - pos} trailing bytes")


def parse_batch(raw: bytes) -> Iterator[Rec]:
    batch = DefaultRecordBatch(bytearray(raw))
    for record in batch:
        control = None
        if batch.is_control_batch:
            control = int.from_bytes(bytes(record.key)[2:4], "big")
        yield Rec(record.offset, bytes(record.key) if record.key is not None else None,
                  bytes(record.value) if record.value is not None else None,
                  batch.producer_id, batch.is_transactional, control)  # fmt: skip


def local_batches(partition_dir: Path) -> Batches:
    out = Batches()
    for path in sorted(partition_dir.glob("*.log")):
        split_batches(path.read_bytes(), str(path), out)
    return out


def topic_id(partition_dir: Path) -> str:
    for line in (partition_dir / "partition.metadata").read_text().splitlines():
        if line.startswith("topic_id:"):
            return line.split(":", 1)[1].strip()
    raise ValueError(f"{partition_dir}/partition.metadata has no topic_id")


def remote_batches(s3: Any, bucket: str, prefix: str, topic: str, tid: str, p: int) -> Batches:
    """The FINISHED segments of one incarnation's partition, each object's SHA-256 checked."""
    out = Batches()
    folder = f"{prefix}/{topic}-{tid}/{p}"
    try:
        body = s3.get_object(Bucket=bucket, Key=f"{folder}/manifest.json")["Body"].read()
    except s3.exceptions.NoSuchKey:
        return out
    for seg in json.loads(body)["segments"]:
        if seg["state"] != "COPY_SEGMENT_FINISHED":
            continue
        key = f"{folder}/{seg['base_offset']:020d}-{seg['attempt']}/log"
        data = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        if hashlib.sha256(data).hexdigest() != seg["files"]["log"]["sha256"]:
            out.problems.append(f"s3://{bucket}/{key}: SHA-256 differs from the manifest's")
        split_batches(data, f"s3://{bucket}/{key}", out)
    return out


def committed(records: Iterator[Rec]) -> tuple[list[Rec], list[str]]:
    """``read_committed`` over records in offset order (each offset once), and problems."""
    out: list[Rec] = []
    open_txn: dict[int, list[Rec]] = {}
    problems: list[str] = []
    last = -1
    for rec in records:
        if rec.offset <= last:
            problems.append(f"offset {rec.offset} after {last}: out of order or twice")
            continue
        last = rec.offset
        if rec.control is not None:
            pending = open_txn.pop(rec.producer_id, [])
            if rec.control == 1:
                out.extend(pending)
        elif rec.transactional:
            open_txn.setdefault(rec.producer_id, []).append(rec)
        else:
            out.append(rec)
    return out, problems


def union(*sources: Batches) -> tuple[list[Rec], list[str]]:
    """Every record of the sources, each offset once, in offset order; the problems found
    (CRC, SHA-256, torn batches, and the same offset holding different records)."""
    seen: dict[int, Rec] = {}
    problems = [p for s in sources for p in s.problems]
    for source in sources:
        for rec in source.records():
            old = seen.setdefault(rec.offset, rec)
            if old != rec:
                problems.append(f"offset {rec.offset}: two copies hold different records")
    return [seen[o] for o in sorted(seen)], problems


def gaps(records: list[Rec], start: int = 0) -> list[tuple[int, int]]:
    """Offset ranges missing from ``records`` (ascending offsets) from ``start`` on."""
    out, expect = [], start
    for rec in records:
        if rec.offset > expect:
            out.append((expect, rec.offset))
        expect = rec.offset + 1
    return out
