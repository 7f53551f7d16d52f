"""The ``leader-epoch-checkpoint`` (kafka-format.md §8.3) read as written and checked against the
partition leader epochs the v2 batches carry.

The file is Kafka's checkpoint text format: a version line (0), an entry count, then one
``<epoch> <startOffset>`` line per entry, epochs and start offsets both strictly increasing. A
batch's ``partitionLeaderEpoch`` must be the epoch whose range holds its base offset.
"""

from __future__ import annotations

import bisect
import itertools
from pathlib import Path

from kafkatier.storage.checkpoint.checkpoint_file import (
    CheckpointFile,
    parse_java_int,
    split_java_whitespace,
)
from kafkatier.storage.checkpoint.leader_epoch import LEADER_EPOCH_CHECKPOINT_VERSION, EpochEntry
from kafkatier.storage.log.segment import AnyBatch
from kafkatier.storage.verify.problem import Findings


def _parse_epoch(line: str) -> EpochEntry | None:
    parts = split_java_whitespace(line)
    if len(parts) != 2:
        return None
    return EpochEntry(parse_java_int(parts[0]), parse_java_int(parts[1], (0, 2**63 - 1)))


def read_epoch_checkpoint(path: Path, found: Findings) -> list[EpochEntry]:
    """The entries as written (not as the cache would repair them), checked for order."""
    file: CheckpointFile[EpochEntry] = CheckpointFile(
        path,
        LEADER_EPOCH_CHECKPOINT_VERSION,
        lambda e: f"{e.epoch} {e.start_offset}",
        _parse_epoch,
    )
    entries = file.read()  # CheckpointError is the caller's to report
    for i, (previous, entry) in enumerate(itertools.pairwise(entries), start=4):
        if entry.epoch <= previous.epoch or entry.start_offset <= previous.start_offset:
            found.add(
                path,
                None,
                f"line {i}: entry {entry.epoch} {entry.start_offset} does "
                f"not follow {previous.epoch} {previous.start_offset}: epochs and start "
                "offsets must increase",
            )
    if any(e.epoch < 0 for e in entries):
        found.add(path, None, "negative leader epoch")
    return entries


class EpochCheck:
    """Every v2 batch's partition leader epoch (when set, >= 0) must be the epoch the
    checkpoint gives for its base offset; the first disagreement per segment is reported.
    ``entries`` is None when the file is missing."""

    def __init__(self, path: Path, entries: list[EpochEntry] | None, found: Findings) -> None:
        self.path, self.found, self.missing = path, found, entries is None
        self.starts = [e.start_offset for e in entries or ()]
        self.epochs = [e.epoch for e in entries or ()]
        self.reported: set[str | None] = set()

    def apply(self, batch: AnyBatch) -> None:
        epoch = batch.partition_leader_epoch
        if epoch < 0 or batch.file in self.reported:
            return
        if self.missing:
            self.missing = False
            self.reported.add(batch.file)
            self.found.add(
                self.path,
                None,
                f"missing, although batches carry leader epochs "
                f"(epoch {epoch} at {batch.file}:{batch.position})",
                offset=batch.base_offset,
            )
            return
        i = bisect.bisect_right(self.starts, batch.base_offset) - 1
        if i < 0:
            return  # below the cache's first entry: truncated from the start with the log start
        if self.epochs[i] != epoch:
            self.reported.add(batch.file)
            self.found.add(
                self.path,
                None,
                f"batch at {batch.file}:{batch.position} (offset "
                f"{batch.base_offset}) has leader epoch {epoch}, but the checkpoint "
                f"gives epoch {self.epochs[i]} from offset {self.starts[i]}",
                offset=batch.base_offset,
            )
