"""``append_committed_all``: the sink's committed appends of many partitions in one call of the C
library (``committed.c``) leave, round after round, the files (segments, indexes, snapshots),
offsets and producer state that ``Log.append_committed`` leaves partition by partition, under
topic settings that make its one-pass case add no index entry, some, one a batch, or meet a roll
(by size, by time, by full indexes), a new leader epoch or a topic codec the batches are not in:
partitions it does not take are handed back untouched, and appended the full way they match
too. The bytes it writes are read back by kafka-python (outside eyes on the sequences, offsets
and rewritten CRCs)."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest
from crash_writer import check_partition, read_partition

from kafkatier.storage import native
from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.log.commit_fields import (
    BATCH_START,
    FD,
    FIRST_SEQUENCE,
    LEADER_EPOCH,
    Carried,
    read_fields,
)
from kafkatier.storage.log.committed_all import CHUNK, Append, Later, append_committed_all
from kafkatier.storage.log.loader import open_log
from kafkatier.storage.log.log import Log
from kafkatier.storage.log.queued_writes import QueuedWrites
from kafkatier.storage.log.roll import time_roll_limit, time_rolls
from kafkatier.storage.log.validator import parse_incoming
from kafkatier.storage.producer.entry import AppendOrigin
from kafkatier.storage.record.batch import RecordBatch
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record

NOW = 1_700_000_000_000
PID = 7000
PARTITIONS = CHUNK + 6  # two calls of the library, the second part-full


pytestmark = pytest.mark.usefixtures("c_queues")


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> int:
        return self.now


def txn_batch(n: int, seq: int, ts: int, size: int, epoch: int = 0) -> bytes:
    records = [Record(i, ts + i, b"key%d" % (seq + i), b"v" * size) for i in range(n)]
    return build_batch(records, producer_id=PID, producer_epoch=epoch, base_sequence=seq,
                       transactional=True)  # fmt: skip


def new_log(root: Path, partition: int, clock: Clock, settings: dict[str, str]) -> Log:
    props = {"segment.index.bytes": "4096", **settings}
    config = LogConfig.from_properties(props, source="test")
    return open_log(root / f"t-{partition}", config, clock=clock)


def files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


# Topic settings, and the rounds (of eight) in which the partitions' leader epoch moves on;
# the last element: whether the library takes every partition (True), none (False) or some.
_NO_ENTRY = {"index.interval.bytes": "100000"}
CASES: dict[str, tuple[dict[str, str], tuple[int, ...], bool | str]] = {
    "no index entry due": (_NO_ENTRY, (), True),
    "an index entry every batch": ({"index.interval.bytes": "1"}, (), True),
    "some index entries": ({"index.interval.bytes": "900"}, (), True),
    "rolls by size": ({**_NO_ENTRY, "segment.bytes": "3000"}, (), "some"),
    "rolls by time": ({**_NO_ENTRY, "segment.ms": "250"}, (), "some"),
    "full indexes roll": ({"index.interval.bytes": "1", "segment.index.bytes": "64"}, (), "some"),
    "a new leader epoch": (_NO_ENTRY, (3, 6), "some"),
    "a topic codec": ({"compression.type": "lz4"}, (), False),
}


def _round_data(r: int, p: int, seq: int) -> tuple[bytes, int]:
    """Partition ``p``'s batches of round ``r`` from sequence ``seq`` (one to three, of several
    sizes, the largest timestamp in any of them) and how many records they hold."""
    rng = random.Random(r * 1000 + p)
    ts = NOW + 100 * (r + 1)
    data, records = b"", 0
    for _ in range(1 + (r + p) % 3):
        n = rng.randint(1, 6)
        data += txn_batch(n, seq + records, ts + rng.randint(-20, 20), rng.randint(10, 300))
        records += n
    return data, records


MODES = {"set at once": (False, False), "set later": (True, False), "carried": (True, True)}


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("case", list(CASES))
def test_many_partitions_at_once_leave_what_append_committed_leaves(
    tmp_path: Path, case: str, mode: str
) -> None:
    """... and, with ``later`` (``deferred``), the same once :meth:`Later.apply` has set the
    index and producer entries it kept, which until then no taken partition has; with
    ``carried``, the calls start from the state the last one left (checked against the state
    read from each log, round after round)."""
    deferred, carry = MODES[mode]
    carried = Carried() if carry else None
    settings, new_epochs, taken = CASES[case]
    clocks = [Clock(), Clock()]
    sides = [[new_log(tmp_path / s, p, clock, settings) for p in range(PARTITIONS)]
             for s, clock in zip("ab", clocks, strict=True)]  # fmt: skip
    for logs in sides:
        for log in logs:
            log.append(txn_batch(2, 0, NOW, 50))
            log.write_txn_marker(PID, 0, commit=True, timestamp=NOW)
    seqs = [2] * PARTITIONS
    counts = {"taken": 0, "left": 0, "carried": 0}
    for r in range(8):
        marker_ts = NOW + 100 * (r + 1) + (30, -30, 0)[r % 3]  # above the batches, below, among
        rounds = [_round_data(r, p, seqs[p]) for p in range(PARTITIONS)]
        for side, logs in enumerate(sides):
            clocks[side].now = NOW + 100 * (r + 1)
            for log in logs:
                log.leader_epoch += r in new_epochs
            batches = [parse_incoming(bytearray(data), AppendOrigin.CLIENT) for data, _ in rounds]
            if side == 0:
                for log, found in zip(logs, batches, strict=True):
                    log.append_committed(found, PID, 0, coordinator_epoch=r // 2,
                                         timestamp=marker_ts)  # fmt: skip
                continue
            later = Later() if deferred else None
            before = [_books(log) for log in logs]
            appends = [(logs[p], _views(batches[p]), seqs[p]) for p in range(PARTITIONS)]
            if carried is not None:
                counts["carried"] += _agrees(carried, appends, (PID, 0, marker_ts), r // 2)
            with QueuedWrites.open(PARTITIONS) as queued:
                left = append_committed_all(
                    appends, (PID, 0, marker_ts), queued, coordinator_epoch=r // 2, later=later,
                    carried=carried,
                )  # fmt: skip
                assert left == sorted(left)
                if later is not None:
                    assert [_books(log) for log in logs] == before
                    later.apply()
                    later.apply()  # a second call sets nothing twice
                for p in left:
                    logs[p].append_committed(batches[p], PID, 0, coordinator_epoch=r // 2,
                                             timestamp=marker_ts, queued=queued)  # fmt: skip
            counts["left"] += len(left)
            counts["taken"] += PARTITIONS - len(left)
        seqs = [seq + records for seq, (_, records) in zip(seqs, rounds, strict=True)]
        for a, b in zip(*sides, strict=True):
            assert a.producer_state.map_end_offset == b.producer_state.map_end_offset
            assert a.producer_state.last_entry(PID) == b.producer_state.last_entry(PID)
            assert [s.max_timestamp_and_offset for s in a.segments] == [
                s.max_timestamp_and_offset for s in b.segments
            ]
    if carried is not None and taken:
        assert counts["carried"], counts
    if taken == "some":
        assert counts["taken"] and counts["left"], counts
    else:
        assert counts["left" if taken else "taken"] == 0, counts
    for logs in sides:
        for log in logs:
            log.close()
    for p in range(PARTITIONS):
        assert files(tmp_path / "a" / f"t-{p}") == files(tmp_path / "b" / f"t-{p}"), p


def _agrees(carried: Carried, appends: list[Append], marker: tuple[int, int, int],
            coordinator_epoch: int) -> int:  # fmt: skip
    """How many logs ``carried`` has an entry for that a call would use; each one's
    kt_commit_in and free index slots are asserted to be what reading the log gives."""
    used = 0
    carried.begin((*marker[:2], coordinator_epoch))
    start = 0
    for log, batches, first_sequence in appends:
        entry = carried._logs.get(log)
        read = read_fields(log, batches, first_sequence, marker, coordinator_epoch, start)
        if read is not None:
            log.active_segment.unpin_unused()
        if entry is not None and read is not None and entry[0][LEADER_EPOCH] == log.leader_epoch:
            ints, _, (offsets, times), offset_free, time_free = entry
            expected = [*read[0]]
            expected[BATCH_START : FIRST_SEQUENCE + 1] = ints[BATCH_START : FIRST_SEQUENCE + 1]
            expected[FD] = ints[FD]
            assert ints == expected, log.directory
            assert (offset_free, time_free) == (offsets.free_slots, times.free_slots)
            assert read[1] == (offsets, times)
            used += 1
        start += len(batches)
    return used


def _books(log: Log) -> tuple[object, ...]:
    """What ``Later`` keeps of a partition's append: its index entries, producer entry, end."""
    active = log.active_segment
    entry = log.producer_state.last_entry(PID)
    return (active.offset_index.entries, active.time_index.entries, log.log_end_offset,
            None if entry is None else entry.last_seq)  # fmt: skip


def _one_partition(tmp_path: Path) -> Log:
    log = new_log(tmp_path, 0, Clock(), {"index.interval.bytes": "1"})
    log.append(txn_batch(2, 0, NOW, 50))
    log.write_txn_marker(PID, 0, commit=True, timestamp=NOW)
    return log


def test_sequences_offsets_and_crcs_are_assigned_as_kafka_reads_them(tmp_path: Path) -> None:
    """Batches encoded with any base sequence get the producer's next ones and their offsets;
    kafka-python reads every CRC as valid and the whole partition passes the log checks (the
    leader epoch: the equivalence case "a new leader epoch")."""
    log = _one_partition(tmp_path)
    data = txn_batch(3, 900, NOW + 5, 40) + txn_batch(4, 0, NOW + 6, 40)
    with QueuedWrites.open(1) as queued:
        batches = parse_incoming(bytearray(data), AppendOrigin.CLIENT)
        left = append_committed_all([(log, _views(batches), 2)], (PID, 0, NOW + 9), queued)
    assert left == []
    found = read_partition(log.directory)
    data_batches = [b for b in found if not b.control]  # each CRC checked by kafka-python
    assert [(b.last_seq, b.base_offset) for b in data_batches] == [(1, 0), (4, 3), (8, 6)]
    assert found[-1].control and found[-1].base_offset == 10 and found[-1].marker == (1, 0)
    entry = log.producer_state.last_entry(PID)
    assert entry is not None and entry.last_seq == 8 and log.log_end_offset == 11
    check_partition(log)
    log.close()


def _refused(log: Log, data: bytes, first_sequence: int = 2) -> None:
    batches = parse_incoming(bytearray(data), AppendOrigin.CLIENT)
    before = [bytes(b.buffer) for b in batches]
    end, size = log.log_end_offset, log.active_segment.size
    with QueuedWrites.open(1) as queued:
        assert append_committed_all([(log, _views(batches), first_sequence)], (PID, 0, NOW + 9),
                                    queued) == [0]  # fmt: skip
    assert [bytes(b.buffer) for b in batches] == before  # untouched
    assert (log.log_end_offset, log.active_segment.size) == (end, size)


def _not_transactional() -> bytes:
    record = Record(0, NOW, b"k", b"v")
    return build_batch([record], producer_id=PID, producer_epoch=0, base_sequence=2)


REFUSED: dict[str, Callable[[], bytes]] = {
    "another producer epoch": lambda: txn_batch(2, 2, NOW, 40, epoch=1),
    "not transactional": _not_transactional,
    "a batch over max.message.bytes": lambda: txn_batch(2, 2, NOW, 40)
    + txn_batch(1, 4, NOW, 20_000),
}


@pytest.mark.parametrize("data", list(REFUSED.values()), ids=list(REFUSED))
def test_a_partition_the_library_refuses_is_handed_back_untouched(
    tmp_path: Path, data: Callable[[], bytes]
) -> None:
    log = _one_partition(tmp_path)
    log.config = LogConfig.from_properties(
        {"max.message.bytes": "10000", "segment.index.bytes": "4096"}, source="test"
    )
    _refused(log, data())
    log.close()


def test_a_first_sequence_that_does_not_follow_the_producers_is_refused(tmp_path: Path) -> None:
    log = _one_partition(tmp_path)
    _refused(log, txn_batch(2, 7, NOW, 40), first_sequence=7)
    log.close()


def test_without_the_c_library_every_partition_is_handed_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = _one_partition(tmp_path)
    batches = parse_incoming(bytearray(txn_batch(2, 2, NOW, 40)), AppendOrigin.CLIENT)
    with QueuedWrites.open(1) as queued:
        monkeypatch.setattr(native, "native", lambda: None)
        assert append_committed_all([(log, _views(batches), 2)], (PID, 0, NOW), queued) == [0]
    assert log.log_end_offset == 3
    log.close()


@pytest.mark.parametrize("based", [-1, NOW, NOW - 300])
@pytest.mark.parametrize("jitter", [0, 70])
@pytest.mark.parametrize("waited", [0, 500, 1000])
def test_the_time_roll_limit_is_the_segment_ms_rule(
    tmp_path: Path, based: int, jitter: int, waited: int
) -> None:
    """``time_roll_limit``: a timestamp rolls by ``time_rolls`` exactly when it is past the
    limit; None where the segment waited by the clock long enough to roll whatever it holds."""
    clock = Clock()
    log = new_log(tmp_path, 0, clock, {"segment.ms": "600"})
    log.append(txn_batch(2, 0, NOW, 50))
    segment = log.active_segment
    segment.rolling_based_timestamp, segment.roll_jitter_ms = based, jitter
    segment.created_ms = NOW
    clock.now = NOW + waited
    limit = time_roll_limit(segment, log.config, clock)
    timestamps = [NOW + d for d in (-5, 0, 400, 529, 530, 531, 599, 600, 601, 10_000)]
    rolls = [time_rolls(segment, log.config, clock, ts) for ts in timestamps]
    if limit is None:
        assert all(rolls)
    else:
        assert rolls == [ts > limit for ts in timestamps]
    # Kafka's rule written out: waited (by timestamps, else by the clock) > segment.ms - jitter
    waits = [ts - based if based >= 0 else waited for ts in timestamps]
    assert rolls == [w > 600 - jitter for w in waits]
    assert (limit is None) == (based == -1 and waited > 600 - jitter)
    log.close()


def test_a_taken_partitions_bytes_are_stamped_in_place(tmp_path: Path) -> None:
    """The caller's bytes get the sequence, offset and CRC written (what the log holds), as
    ``assign_sequences`` and the log's offsets stamp a parsed batch's buffer."""
    log = _one_partition(tmp_path)
    data = bytearray(txn_batch(2, 40, NOW, 9))
    with QueuedWrites.open(1) as queued:
        assert append_committed_all([(log, [memoryview(data)], 2)], (PID, 0, NOW), queued) == []
    stamped = RecordBatch(memoryview(data))
    assert (stamped.base_sequence, stamped.base_offset) == (2, 3)
    stamped.ensure_valid()  # the CRC rewritten
    assert bytes(data) in log.active_segment.log_path.read_bytes()
    log.close()


def _views(batches: list[RecordBatch]) -> list[memoryview]:
    return [batch.buffer for batch in batches]
