"""Checks of one segment: its ``.log`` batch by batch, then its indexes against what the log holds.

A ``.log`` must be whole batches back to back (kafka-format.md §1, §9.3): framing, CRC, records
that decode, offsets strictly increasing from the segment's base offset. The offset and time
indexes (§4, §5) are then checked against the facts gathered from the scan, as Kafka's
DumpLogSegments verifies them, widened for what brokers really write (see each check).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kafkatier.storage import wire
from kafkatier.storage.errors import KafkaTierError
from kafkatier.storage.log.segment import AnyBatch, LogSegment
from kafkatier.storage.record.record import parse_control_key, parse_end_txn_marker
from kafkatier.storage.verify.problem import Findings
from kafkatier.storage.wire import ControlType

BatchHook = Callable[[AnyBatch], None]


@dataclass
class SegmentFacts:
    """Per-batch facts of a scanned segment, in file order, for index and cross-segment checks.

    ``end`` is where whole, valid batches stop: index entries beyond it concern bytes that were
    already reported as torn or corrupt.
    """

    base_offset: int
    size: int
    positions: list[int] = field(default_factory=list)
    bases: list[int] = field(default_factory=list)
    lasts: list[int] = field(default_factory=list)
    max_ts: list[int] = field(default_factory=list)
    running_max: list[int] = field(default_factory=list)
    end: int = 0
    corrupt: int = 0

    def add(self, batch: AnyBatch, base: int) -> None:
        self.positions.append(batch.position)
        self.bases.append(base)
        self.lasts.append(batch.last_offset)
        self.max_ts.append(batch.max_timestamp)
        before = self.running_max[-1] if self.running_max else wire.NO_TIMESTAMP
        self.running_max.append(max(before, batch.max_timestamp))

    @property
    def damaged(self) -> bool:
        """Bytes that hold no sound batch: whatever Kafka derived from them cannot be checked."""
        return self.corrupt > 0 or self.end < self.size

    @property
    def next_offset(self) -> int | None:
        return self.lasts[-1] + 1 if self.lasts else None

    @property
    def max_timestamp(self) -> int:
        return self.running_max[-1] if self.running_max else wire.NO_TIMESTAMP

    def batch_at(self, position: int) -> int | None:
        """Index of the batch starting exactly at ``position``."""
        i = bisect.bisect_left(self.positions, position)
        return i if i < len(self.positions) and self.positions[i] == position else None

    def batch_ending_at(self, offset: int) -> int | None:
        """Index of the batch whose last offset is ``offset``."""
        i = bisect.bisect_left(self.lasts, offset)
        return i if i < len(self.lasts) and self.lasts[i] == offset else None

    def batch_holding(self, offset: int) -> int | None:
        """Index of the batch whose offset range contains ``offset``."""
        i = bisect.bisect_left(self.lasts, offset)
        return i if i < len(self.lasts) and self.bases[i] <= offset else None


def scan_log(
    segment: LogSegment, found: Findings, previous_next: int | None, hook: BatchHook | None
) -> SegmentFacts:
    """Scan every batch; ``hook`` sees each batch whose CRC holds, in order."""
    facts = SegmentFacts(segment.base_offset, segment.size)
    log = segment.log_path
    position = 0
    try:
        for batch in segment.batches():
            position = batch.position
            valid = _check_batch(batch, log, found, facts, previous_next)
            position += batch.size_in_bytes
            if valid:
                previous_next = batch.last_offset + 1
                if hook is not None:
                    hook(batch)
        facts.end = position
    except KafkaTierError as exc:
        found.add(
            log,
            position,
            f"unreadable batch: {exc.message}; the rest of the file is "
            "not checked (Kafka's recovery truncates the segment here)",
        )
        facts.end = position
        return facts
    if position < segment.size:
        found.add(
            log,
            position,
            f"incomplete batch at the end: {segment.size - position} bytes "
            "left that do not hold a whole batch (a torn write; Kafka's recovery "
            "truncates them)",
        )
    return facts


def _check_batch(
    batch: AnyBatch, log: Path, found: Findings, facts: SegmentFacts, previous_next: int | None
) -> bool:
    """Record one batch's facts and report what is wrong with it; False if its CRC fails."""
    found.stats.batches += 1
    if not batch.is_valid():
        found.add(log, batch.position, f"corrupt batch: stored CRC {batch.crc} does not match "
                  f"the computed {batch.compute_crc()}")  # fmt: skip
        facts.add(batch, batch.base_offset if batch.magic >= 2 else batch.last_offset)
        facts.corrupt += 1
        return False
    first = _check_records(batch, log, found)
    base = batch.base_offset if batch.magic >= 2 or first is None else first
    facts.add(batch, base)
    for message in _offset_problems(batch, base, facts, previous_next):
        found.add(log, batch.position, message, offset=base)
    return True


def _offset_problems(
    batch: AnyBatch, base: int, facts: SegmentFacts, previous_next: int | None
) -> list[str]:
    """Offsets rise strictly from the segment's base offset and fit its relative range."""
    problems = []
    if len(facts.bases) == 1 and base < facts.base_offset:
        problems.append(f"first batch starts at offset {base}, below the segment's base offset "
                        f"{facts.base_offset}")  # fmt: skip
    if previous_next is not None and base < previous_next:
        problems.append(f"offsets go backwards: batch starts at {base} but offset "
                        f"{previous_next - 1} was already used")  # fmt: skip
    if batch.last_offset < base:
        problems.append(f"last offset {batch.last_offset} is below the base offset {base}")
    if batch.last_offset - facts.base_offset > wire.INT32_MAX:
        problems.append(f"offset {batch.last_offset} does not fit the segment's 32-bit relative "
                        "offsets")  # fmt: skip
    return problems


_MARKERS = (ControlType.ABORT, ControlType.COMMIT)


def _check_records(batch: AnyBatch, log: Path, found: Findings) -> int | None:
    """Decode every record (a control batch's keys and markers too, as dump and a consumer
    read them); their offsets must rise within the batch's range. Returns the first
    record's offset (a legacy batch's base offset), None if there is none or they do not decode."""
    first: int | None = None
    previous = -1
    control = batch.magic >= 2 and batch.is_control
    try:
        for record in batch.records():
            if control and parse_control_key(record.key) in _MARKERS:  # as a consumer parses it
                parse_end_txn_marker(record.value)
            if first is None:
                first = record.offset
            elif record.offset <= previous:
                found.add(
                    log,
                    batch.position,
                    f"record offset {record.offset} does not follow {previous} within the batch",
                    offset=record.offset,
                )
            previous = record.offset
            found.stats.records += 1
    except KafkaTierError as exc:
        found.add(log, batch.position, f"records do not decode: {exc.message}")
        return None
    if first is not None and previous > batch.last_offset:
        found.add(
            log,
            batch.position,
            f"record offset {previous} is beyond the batch's last offset {batch.last_offset}",
            offset=previous,
        )
    return first
