"""Leader epochs (KIP-320) through ``kafkatier serve``, seen by unmodified clients.

A partition written in epochs 0 and 1 (offsets 0-9) is consumed to its end by a group member,
which keeps polling. The partition is then rewritten as after an unclean leader change: epoch 1
ended at 8, and epoch 2 wrote offsets 8-10. The member's next fetch carries the epoch it knows
(1) and is fenced (FENCED_LEADER_EPOCH); it refreshes Metadata (epoch 2) and validates its
position with OffsetForLeaderEpoch, which says epoch 1 ended at 8: it must not skip epoch 2's
records 8 and 9. A server without epochs would let it fetch on at 10 and it would silently miss
them. kafka-python goes on from the divergence, 8; librdkafka validates the position it is
fetching from and re-reads what it must, and so does Apache Kafka's Java consumer (the reference
implementation of KIP-320): all see 8, 9 and 10 of epoch 2 and nothing of the old log after the
rewrite.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from group_clients import GROUPS, MEMBERS, poll_until

from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record

TOPIC = "epochs"


def write(log_dir: Path, epochs: list[tuple[int, int, int]], tag: bytes) -> None:
    """One record a batch; ``epochs``: (epoch, first offset, end offset) in order."""
    with LogDirectory(log_dir) as ld:
        ld.create_partitions(TOPIC, 1)
        log = ld.get(TOPIC, 0)
        assert log is not None
        for epoch, first, end in epochs:
            log.leader_epoch = epoch
            for offset in range(first, end):
                record = Record(offset, 1_000 + offset, b"k", tag + b"%d" % offset)
                log.append(build_batch([record]))


def rewrite_after_unclean_election(log_dir: Path) -> None:
    """The partition again, same topic id: epoch 1 ended at 8, epoch 2 wrote 8-10. Built
    beside the log dir and renamed in, so no fetch sees it half-written."""
    part, staging = log_dir / f"{TOPIC}-0", log_dir.parent / "staging"
    (staging / part.name).mkdir(parents=True)
    shutil.copy(part / "partition.metadata", staging / part.name / "partition.metadata")
    write(staging, [(0, 0, 5), (1, 5, 8), (2, 8, 11)], b"new-")
    part.rename(log_dir.parent / "old")
    (staging / part.name).rename(part)


@pytest.mark.parametrize("client", ["kafka-python", "confluent-kafka", "java"])
def test_a_member_fenced_by_a_new_epoch_does_not_skip_its_records(
    tmp_path: Path, serve: Any, client: str
) -> None:
    log_dir = tmp_path / "logs"
    write(log_dir, [(0, 0, 5), (1, 5, 10)], b"old-")
    with serve(log_dir, **GROUPS) as port:
        member = MEMBERS[client](port, "g", [TOPIC])
        try:
            rows = poll_until([member], lambda r: {9} <= {row[2] for row in r[0]}, "offset 9")
            assert [row[4] for row in rows[0]][-1] == b"old-9"
            rewrite_after_unclean_election(log_dir)
            after = poll_until([member], lambda r: {10} <= {row[2] for row in r[0]},
                               "epoch 2's records")[0]  # fmt: skip
        finally:
            member.close()
    assert all(row[4].startswith(b"new-") for row in after), after
    got = [(row[2], row[4]) for row in after if row[2] >= 8]
    assert got == [(8, b"new-8"), (9, b"new-9"), (10, b"new-10")], after
    if client == "kafka-python":  # it resumes at the divergence itself
        assert [row[2] for row in after] == [8, 9, 10]
