"""Key compaction with Kafka's rules (kafka-format.md §11), one behaviour per test."""

from __future__ import annotations

from pathlib import Path

import pytest
from cleaner_fixtures import (
    ManualClock,
    append,
    committed_records,
    compact_config,
    latest_by_key,
    open_log,
    segment_batches,
)
from kafka.record.default_records import DefaultRecordBatch

from kafkatier.storage.cleaner.choose import cleanable
from kafkatier.storage.cleaner.compact import compact_log, group_segments
from kafkatier.storage.cleaner.segment_store import SegmentInfo
from kafkatier.storage.log.log import Log
from kafkatier.storage.record.batch import RecordBatch
from kafkatier.storage.verify.paths import verify_paths
from kafkatier.storage.wire import ATTR_DELETE_HORIZON, ControlType

DAY = 86_400_000


def all_batches(log: Log) -> list[RecordBatch]:
    return [b for s in log.segments for b in segment_batches(s)]


def offsets_and_values(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for b in all_batches(log) for r in b.records()]


def fill(log: Log, clock: ManualClock, rounds: int, keys: int) -> None:
    for i in range(rounds):
        append(log, [(b"k%d" % (i % keys), b"v%d" % i)], timestamp=clock.now)


def test_keeps_latest_per_key_at_original_offsets_and_drops_keyless(tmp_path: Path) -> None:
    clock = ManualClock()
    log_dir, log = open_log(tmp_path, compact_config(segment_bytes=1500), clock)
    fill(log, clock, 100, 6)
    append(log, [(None, b"no key"), (b"k0", b"last")], timestamp=clock.now)
    log.roll()
    before = offsets_and_values(log)
    result = compact_log(log, now_ms=clock.now, first_dirty_offset=None)
    expected = {}
    for offset, key, value in before:
        if key is not None:
            expected[key] = (offset, key, value)
    assert offsets_and_values(log) == sorted(expected.values())
    assert result.cleaned and result.end_offset == log.log_end_offset == 102
    assert result.records_removed == 102 - 6
    assert result.bytes_after == log.size_in_bytes < result.bytes_before
    log_dir.close()
    assert verify_paths([tmp_path]) == []


def test_fully_retained_batches_are_copied_byte_for_byte(tmp_path: Path) -> None:
    clock = ManualClock()
    log_dir, log = open_log(tmp_path, compact_config(), clock)
    append(log, [(b"a", b"1"), (b"b", b"2")], timestamp=clock.now)
    append(log, [(b"a", b"3"), (b"c", b"4")], timestamp=clock.now + 5)
    log.roll()
    original = [bytes(b.buffer) for b in all_batches(log)]
    compact_log(log, now_ms=clock.now, first_dirty_offset=None)
    out = all_batches(log)
    assert bytes(out[1].buffer) == original[1]
    first = DefaultRecordBatch(bytes(out[0].buffer))
    assert first.validate_crc()
    assert (first.base_offset, first.last_offset_delta, first.records_count) == (0, 1, 1)
    assert [(r.offset, r.key, r.value) for r in first] == [(1, b"b", b"2")]
    log_dir.close()


def test_tombstone_gets_a_delete_horizon_then_goes(tmp_path: Path) -> None:
    clock = ManualClock()
    config = compact_config(delete_retention_ms=DAY)
    log_dir, log = open_log(tmp_path, config, clock)
    append(log, [(b"a", b"1"), (b"b", b"2")], timestamp=clock.now - 10)
    append(log, [(b"a", None)], timestamp=clock.now - 5)
    log.roll()
    first = compact_log(log, now_ms=clock.now, first_dirty_offset=None)
    assert (first.tombstones_kept, first.tombstones_dropped) == (1, 0)
    tomb = all_batches(log)[-1]
    assert tomb.attributes & ATTR_DELETE_HORIZON
    assert tomb.delete_horizon_ms == tomb.base_timestamp == clock.now + DAY
    theirs = DefaultRecordBatch(bytes(tomb.buffer))
    assert [(r.offset, r.timestamp, r.value) for r in theirs] == [(2, clock.now - 5, None)]
    assert theirs.max_timestamp == clock.now - 5
    early = compact_log(log, now_ms=clock.now + DAY - 1, first_dirty_offset=0)
    assert early.tombstones_kept == 1 and any(r[1] == b"a" for r in offsets_and_values(log))
    done = compact_log(log, now_ms=clock.now + DAY, first_dirty_offset=0)
    assert done.tombstones_dropped == 1
    assert offsets_and_values(log) == [(1, b"b", b"2")]
    log_dir.close()
    assert verify_paths([tmp_path]) == []


def test_nothing_at_or_beyond_the_lso_or_in_the_active_segment_changes(tmp_path: Path) -> None:
    clock = ManualClock()
    log_dir, log = open_log(tmp_path, compact_config(segment_bytes=800), clock)
    fill(log, clock, 20, 2)
    append(log, [(b"k0", b"txn")], timestamp=clock.now, producer=(7, 0, 0), transactional=True)
    fill(log, clock, 20, 2)
    lso = log.last_stable_offset
    assert lso == 20
    tail_before = [(r.offset, r.value) for r in committed_records(log) if r.offset >= lso]
    raw_after_lso = [bytes(b.buffer) for b in all_batches(log) if b.base_offset >= lso]
    facts = cleanable(log, None, clock.now)
    assert facts.first_uncleanable <= lso
    result = compact_log(log, now_ms=clock.now, first_dirty_offset=None)
    assert result.end_offset <= lso
    assert [bytes(b.buffer) for b in all_batches(log) if b.base_offset >= lso] == raw_after_lso
    assert [(r.offset, r.value) for r in committed_records(log) if r.offset >= lso] == tail_before
    log_dir.close()


def test_aborted_data_goes_and_markers_follow_kafkas_lifecycle(tmp_path: Path) -> None:
    clock = ManualClock()
    log_dir, log = open_log(tmp_path, compact_config(delete_retention_ms=1000), clock)
    append(log, [(b"a", b"committed")], timestamp=clock.now, producer=(1, 0, 0), transactional=True)
    log.write_txn_marker(1, 0, commit=True)
    append(log, [(b"a", b"aborted")], timestamp=clock.now, producer=(2, 0, 0), transactional=True)
    log.write_txn_marker(2, 0, commit=False)
    append(log, [(b"z", b"x")], timestamp=clock.now)
    log.roll()
    compact_log(log, now_ms=clock.now, first_dirty_offset=None)
    kinds = [(b.base_offset, b.records_count, b.is_control) for b in all_batches(log)]
    # the aborted batch is its producer's last data batch: kept empty, so its ABORT stays too
    assert kinds == [(0, 1, False), (1, 1, True), (2, 0, False), (3, 1, True), (4, 1, False)]
    seg = log.segments[0]
    assert [t.last_offset for t in seg.txn_index.all_entries()] == [3]
    visible = [(r.key, r.value) for r in committed_records(log)]
    assert visible == [(b"a", b"committed"), (b"z", b"x")]
    log_dir.close()
    assert verify_paths([tmp_path]) == []


def test_spent_commit_marker_gets_a_horizon_then_goes(tmp_path: Path) -> None:
    clock = ManualClock()
    log_dir, log = open_log(tmp_path, compact_config(delete_retention_ms=1000), clock)
    append(log, [(b"a", b"1")], timestamp=clock.now, producer=(1, 0, 0), transactional=True)
    log.write_txn_marker(1, 0, commit=True)
    append(log, [(b"b", b"1")], timestamp=clock.now, producer=(1, 0, 1), transactional=True)
    log.write_txn_marker(1, 0, commit=True)
    append(log, [(b"a", b"2"), (b"b", b"2")], timestamp=clock.now)
    log.roll()
    compact_log(log, now_ms=clock.now, first_dirty_offset=None)
    # pass 1 still reads the superseded txn batch, so its COMMIT is kept as it is
    assert [b.base_offset for b in all_batches(log) if b.is_control] == [1, 3]
    assert 0 not in [b.base_offset for b in all_batches(log)]
    compact_log(log, now_ms=clock.now, first_dirty_offset=0)
    markers = [b for b in all_batches(log) if b.is_control]
    # pass 2: the first txn has nothing left, its COMMIT is spent; the second txn's batch is
    # its producer's last data batch (kept empty), so that COMMIT is still needed
    assert [m.delete_horizon_ms for m in markers] == [clock.now + 1000, None]
    assert markers[0].control_record() == (ControlType.COMMIT, 0)
    compact_log(log, now_ms=clock.now + 999, first_dirty_offset=0)
    assert [b.base_offset for b in all_batches(log) if b.is_control] == [1, 3]
    compact_log(log, now_ms=clock.now + 1000, first_dirty_offset=0)
    assert [b.base_offset for b in all_batches(log) if b.is_control] == [3]
    assert latest_by_key(committed_records(log)) == {b"a": (4, b"2"), b"b": (5, b"2")}
    log_dir.close()
    assert verify_paths([tmp_path]) == []


def test_last_batch_of_a_producer_is_kept_empty_and_sequences_survive(tmp_path: Path) -> None:
    clock = ManualClock()
    config = compact_config()
    log_dir, log = open_log(tmp_path, config, clock)
    append(log, [(b"a", b"1"), (b"b", b"1")], timestamp=clock.now, producer=(5, 2, 0))
    append(log, [(b"a", b"2"), (b"b", b"2")], timestamp=clock.now)
    log.roll()
    compact_log(log, now_ms=clock.now, first_dirty_offset=None)
    empty = all_batches(log)[0]
    assert (empty.base_offset, empty.last_offset, empty.records_count) == (0, 1, 0)
    assert (empty.size_in_bytes, empty.base_timestamp, empty.base_sequence) == (61, -1, 0)
    assert (empty.producer_id, empty.producer_epoch) == (5, 2)
    log_dir.close()
    for snapshot in (tmp_path / "compacted-0").glob("*.snapshot"):
        snapshot.unlink()  # producer state must now come from the cleaned log itself
    log_dir, log = open_log(tmp_path, config, clock)
    entry = log.producer_state.last_entry(5)
    assert entry is not None and (entry.producer_epoch, entry.last_seq) == (2, 1)
    append(log, [(b"c", b"1")], timestamp=clock.now, producer=(5, 2, 2))
    log_dir.close()
    assert verify_paths([tmp_path]) == []


def test_dirty_ratio_and_lags_decide_eligibility(tmp_path: Path) -> None:
    clock = ManualClock()
    config = compact_config(
        segment_bytes=400, min_cleanable_dirty_ratio=0.5, max_compaction_lag_ms=10 * DAY
    )
    log_dir, log = open_log(tmp_path, config, clock)
    fill(log, clock, 40, 3)
    facts = cleanable(log, None, clock.now)
    sizes = {s.base_offset: s.size for s in log.segments}
    assert facts.first_dirty == 0
    assert facts.first_uncleanable == log.active_segment.base_offset
    assert facts.clean_bytes == 0
    assert facts.cleanable_bytes == sum(sizes.values()) - log.active_segment.size
    assert facts.cleanable_ratio == 1.0 and facts.eligible
    middle = log.segments[len(log.segments) // 2].base_offset
    later = cleanable(log, middle, clock.now)
    clean = sum(v for k, v in sizes.items() if k < middle)
    assert later.clean_bytes == clean
    ratio = later.cleanable_bytes / (clean + later.cleanable_bytes)
    assert later.cleanable_ratio == pytest.approx(ratio)
    assert later.eligible == (later.cleanable_ratio > 0.5)
    at_end = cleanable(log, log.active_segment.base_offset, clock.now)
    assert not at_end.eligible and not at_end.need_compaction_now
    assert cleanable(log, 10**9, clock.now).first_dirty == 0  # checkpoint beyond the end: reset
    young = compact_config(segment_bytes=400, min_compaction_lag_ms=DAY)
    log.config = young
    assert cleanable(log, None, clock.now).first_uncleanable == 0  # all segments too young
    assert cleanable(log, None, clock.now + DAY + 1).first_uncleanable > 0
    log.config = config
    stale = cleanable(log, log.segments[-2].base_offset, clock.now + 11 * DAY)
    assert stale.need_compaction_now and stale.eligible
    log_dir.close()


def test_group_limits_are_kafkas() -> None:
    def info(base: int, size: int, index: int = 0) -> SegmentInfo:
        return SegmentInfo(base, size, index, index, 0)

    segs = [info(0, 40), info(10, 50), info(20, 20), info(30, 100), info(40, 1)]
    groups = group_segments(segs, 100, 1000, 50)
    assert [[s.base_offset for s in g] for g in groups] == [[0, 10], [20], [30], [40]]
    by_index = group_segments([info(0, 1, 8), info(5, 1, 8), info(9, 1, 8)], 100, 16, 20)
    assert [[s.base_offset for s in g] for g in by_index] == [[0, 5], [9]]
    wide = group_segments([info(0, 1), info(2**31, 1)], 100, 100, 2**31 + 5)
    assert len(wide) == 2
    # an empty segment joins the group whatever offsets follow it; the next one may not
    gap = group_segments([info(0, 1), info(10, 0), info(2**31 + 20, 1)], 100, 100, 2**31 + 40)
    assert [[s.base_offset for s in g] for g in gap] == [[0, 10], [2**31 + 20]]


def test_cleaned_segments_are_regrouped(tmp_path: Path) -> None:
    clock = ManualClock()
    log_dir, log = open_log(tmp_path, compact_config(segment_bytes=1000), clock)
    fill(log, clock, 200, 4)
    log.roll()
    count = len(log.segments)
    compact_log(log, now_ms=clock.now, first_dirty_offset=None)
    compact_log(log, now_ms=clock.now, first_dirty_offset=0)
    assert len(log.segments) < count // 4
    assert latest_by_key(committed_records(log)) == {
        b"k%d" % k: (196 + k, b"v%d" % (196 + k)) for k in range(4)
    }
    log_dir.close()
    assert verify_paths([tmp_path]) == []


def test_small_map_cleans_in_several_passes_with_the_same_result(tmp_path: Path) -> None:
    clock = ManualClock()
    results = []
    for budget, name in ((24 * 8, "small"), (24 * 4096, "large")):
        config = compact_config(segment_bytes=600, log_cleaner_dedupe_buffer_size=budget)
        log_dir, log = open_log(tmp_path / name, config, clock)
        for i in range(120):
            append(log, [(b"k%d" % ((i * 7) % 30), b"v%d" % i)], timestamp=clock.now)
        log.roll()
        result = compact_log(log, now_ms=clock.now, first_dirty_offset=None)
        results.append((result, offsets_and_values(log)))
        log_dir.close()
        assert verify_paths([tmp_path / name]) == []
    (small, small_out), (large, large_out) = results
    assert small.passes > 1 and large.passes == 1
    assert small.end_offset == large.end_offset == 120
    assert small_out == large_out
    for result in (small, large):  # Kafka's CleanerStats: the map builds' time within the whole
        assert 0 < result.index_seconds < result.elapsed_seconds


@pytest.mark.parametrize("path", ["chunks", "batches", "records"])
def test_a_batch_with_more_keys_than_the_map_holds_is_cleaned_part_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    """Kafka's map takes each put's offset as its latest, so a full map ends the pass inside the
    batch that filled it (``SkimpyOffsetMap.put``, ``Cleaner.buildOffsetMapForSegment``): a
    batch with more keys than the map holds still gets cleaned, over several passes."""
    from kafkatier.storage.cleaner import fast as cleaner_fast

    if path != "chunks":
        monkeypatch.setattr(cleaner_fast, "ENABLED", False)
    if path == "records":
        monkeypatch.setattr(cleaner_fast, "scan", lambda _batch: None)
    clock = ManualClock()
    config = compact_config(log_cleaner_dedupe_buffer_size=24 * 8)  # 8 slots, 7 keys a pass
    log_dir, log = open_log(tmp_path, config, clock)
    append(log, [(b"k%02d" % i, b"old") for i in range(20)], timestamp=clock.now)
    append(log, [(b"k00", b"new")], timestamp=clock.now)
    log.roll()
    result = compact_log(log, now_ms=clock.now, first_dirty_offset=None)
    assert result.cleaned and result.end_offset == 21 and result.passes == 3
    survivors = latest_by_key(committed_records(log))
    assert survivors == {b"k00": (20, b"new")} | {
        b"k%02d" % i: (i, b"old") for i in range(1, 20)
    }
    assert len(offsets_and_values(log)) == 20
    log_dir.close()
    assert verify_paths([tmp_path]) == []


def test_memory_stays_within_the_map_budget_plus_a_constant(tmp_path: Path) -> None:
    """Thousands of keys through a 1,000-slot map: several passes, and the traced peak during
    cleaning is the map plus a small constant, whatever the number of keys."""
    import tracemalloc

    budget = 24 * 1000
    config = compact_config(segment_bytes=64 << 10, log_cleaner_dedupe_buffer_size=budget)
    clock = ManualClock()
    log_dir, log = open_log(tmp_path / "warm", config, clock)  # first calls load numba code
    fill(log, clock, 20, 5)
    log.roll()
    compact_log(log, now_ms=clock.now, first_dirty_offset=None)
    log_dir.close()
    peaks = []
    for keys in (2000, 4000):
        log_dir, log = open_log(tmp_path / str(keys), config, clock)
        for start in range(0, keys, 50):
            batch = [(b"key-%07d" % i, b"v" * 40) for i in range(start, start + 50)]
            append(log, batch, timestamp=clock.now)
        append(log, [(b"key-%07d" % 0, b"new")], timestamp=clock.now)
        log.roll()
        tracemalloc.start()
        try:
            result = compact_log(log, now_ms=clock.now, first_dirty_offset=None)
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
        assert result.passes == -(-(keys + 1) // 900)  # map capacity: 1000 slots x 0.9
        survivors = latest_by_key(committed_records(log))
        assert len(survivors) == keys and survivors[b"key-%07d" % 0] == (keys, b"new")
        log_dir.close()
    assert all(peak < budget + (3 << 19) for peak in peaks), peaks  # 1.5 MiB; 1.05 measured
    assert peaks[1] - peaks[0] < 256 << 10, peaks  # twice the keys, not twice the memory


def _varied_log(path: Path, clock: ManualClock, log_append_time: bool) -> tuple[object, Log]:
    """Compressed and plain batches, headers, tombstones, keyless records, a transaction."""
    import random

    from kafkatier.storage.record.builder import build_batch
    from kafkatier.storage.record.record import Record
    from kafkatier.storage.wire import Codec

    settings = {"segment_bytes": 3000, "delete_retention_ms": 100}
    if log_append_time:
        settings["message_timestamp_type"] = "LogAppendTime"
    log_dir, log = open_log(path, compact_config(**settings), clock)
    rng = random.Random(5)
    sequence = 0
    for i in range(120):
        records = [
            Record(j, clock.now + rng.randint(-50, 50),
                   None if rng.random() < 0.1 else b"key-%d" % rng.randint(0, 15),
                   None if rng.random() < 0.2 else b"value-%d" % i * rng.randint(1, 4),
                   (("h", b"x" * j),) if rng.random() < 0.2 else ())
            for j in range(rng.randint(1, 6))
        ]  # fmt: skip
        codec = rng.choice(list(Codec))
        txn = i % 17 == 3
        log.append(build_batch(records, codec=codec, producer_id=4 if txn else -1,
                               producer_epoch=0 if txn else -1,
                               base_sequence=sequence if txn else -1,
                               transactional=txn))  # fmt: skip
        if txn:
            sequence += len(records)
            log.write_txn_marker(4, 0, commit=i % 2 == 0)
        clock.now += 7
    log.roll()
    return log_dir, log


@pytest.mark.parametrize("log_append_time", [False, True])
def test_vectorised_path_writes_what_the_record_path_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, log_append_time: bool
) -> None:
    from kafkatier.storage.cleaner import fast as cleaner_fast
    outputs = []
    for path in ("chunks", "batches", "records"):  # whole chunks, per batch, record at a time
        if path != "chunks":
            monkeypatch.setattr(cleaner_fast, "ENABLED", False)
        if path == "records":
            monkeypatch.setattr(cleaner_fast, "scan", lambda _batch: None)
        clock = ManualClock()
        log_dir, log = _varied_log(tmp_path / path, clock, log_append_time)
        results = [compact_log(log, now_ms=clock.now, first_dirty_offset=None)]
        results.append(compact_log(log, now_ms=clock.now + 100, first_dirty_offset=0))
        outputs.append(([s.log_path.read_bytes() for s in log.segments], results))
        log_dir.close()
        assert verify_paths([tmp_path / path]) == []
    assert outputs[0] == outputs[1] == outputs[2]
    assert outputs[0][1][0].tombstones_kept > 0 and outputs[0][1][1].tombstones_dropped > 0


def test_not_cleanable_returns_cleaned_false_and_touches_nothing(tmp_path: Path) -> None:
    clock = ManualClock()
    log_dir, log = open_log(tmp_path, compact_config(min_cleanable_dirty_ratio=0.5), clock)
    fill(log, clock, 30, 3)  # all in the active segment: nothing is cleanable
    before = [s.log_path.read_bytes() for s in log.segments]
    result = compact_log(log, now_ms=clock.now, first_dirty_offset=None)
    assert not result.cleaned and result.passes == 0 and result.end_offset == 0
    assert result.bytes_before == result.bytes_after == log.size_in_bytes
    assert [s.log_path.read_bytes() for s in log.segments] == before
    log_dir.close()


def test_segment_store_reads_in_bounded_chunks_that_grow_for_big_batches(tmp_path: Path) -> None:
    from kafkatier.storage.cleaner.segment_store import LocalSegmentStore

    clock = ManualClock()
    log_dir, log = open_log(tmp_path, compact_config(), clock)
    for i in range(12):
        append(log, [(b"k%d" % i, b"v" * (40 if i % 3 else 3000))], timestamp=clock.now)
    store = LocalSegmentStore(log, io_buffer_size=100)
    base = log.segments[0].base_offset
    got = [bytes(b.buffer) for b in store.read_batches(base)]
    assert got == [bytes(b.buffer) for b in segment_batches(log.segments[0])]
    assert next(b.base_offset for b in store.read_batches(base, 7)) <= 7
    log_dir.close()
