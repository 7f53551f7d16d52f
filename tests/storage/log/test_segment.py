"""LogSegment: appends, sparse offset/time indexes, lookups, truncation, roll and close
(kafka-format.md §4, §5, §9). Expected index contents come from a model of Kafka's rules, file
contents are cross-read with kafka-python (``crash_writer.read_segment_file``)."""

from __future__ import annotations

import itertools
import os
import random
import tempfile
from pathlib import Path

import pytest
from crash_writer import read_segment_file
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkatier.storage.errors import CorruptRecordError, StorageError
from kafkatier.storage.log.batch_position import BatchInfo
from kafkatier.storage.log.segment import LogSegment
from kafkatier.storage.record.batch import RecordBatch
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record
from kafkatier.storage.wire import INT32_MAX

BASE = 100


def make(base: int, timestamps: list[int], value_size: int = 40) -> bytes:
    recs = [Record(base + i, ts, b"k%d" % i, b"v" * value_size) for i, ts in enumerate(timestamps)]
    return build_batch(recs)


def append(seg: LogSegment, batches: list[bytes]) -> None:
    """One segment append of several batches, as Log.write_indexed does."""
    infos, data = [], b""
    for raw in batches:
        b = RecordBatch(raw)
        infos.append(BatchInfo(len(data), b.size_in_bytes, b.last_offset, b.max_timestamp))
        data += raw
    seg.append(data, infos)


def fill(seg: LogSegment, spec: list[list[int]], rng: random.Random | None = None) -> list[bytes]:
    """Batches with the given record timestamps from the segment's next offset, appended one or
    two per append; returns them in order."""
    rng = rng or random.Random(0)
    out, offset, i = [], seg.read_next_offset(), 0
    while i < len(spec):
        group = []
        for _ in range(min(rng.choice((1, 1, 2)), len(spec) - i)):
            group.append(make(offset, spec[i], rng.randrange(10, 300)))
            offset += len(spec[i])
            i += 1
        append(seg, group)
        out += group
    return out


def index_model(batches: list[bytes], interval: int, start: int = 0) -> tuple[list, list]:
    """Kafka's entries (§4, §5): an offset entry (last offset, start) for a batch when more than
    ``interval`` bytes were appended since the last indexed batch; a time entry with it when the
    running max timestamp grew (its offset: the first batch that carried that max)."""
    offsets, times = [], []
    pos, since, best = start, 0, (-1, -1)
    for raw in batches:
        b = RecordBatch(raw)
        if b.max_timestamp > best[0]:
            best = (b.max_timestamp, b.last_offset)
        if since > interval:
            offsets.append((b.last_offset, pos))
            if best[0] > (times[-1][0] if times else -1):
                times.append(best)
            since = 0
        since += b.size_in_bytes
        pos += b.size_in_bytes
    return offsets, times


def final_time_entry(batches: list[bytes]) -> tuple[int, int]:
    best = (-1, -1)
    for raw in batches:
        b = RecordBatch(raw)
        if b.max_timestamp > best[0]:
            best = (b.max_timestamp, b.last_offset)
    return best


@settings(max_examples=25, deadline=None)
@given(
    spec=st.lists(st.lists(st.integers(-1, 50), min_size=1, max_size=4), min_size=1, max_size=30),
    interval=st.sampled_from([0, 100, 400, 4096]),
    seed=st.integers(0, 1000),
)
def test_sparse_indexes_follow_kafka_rules(spec: list[list[int]], interval: int, seed: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        seg = LogSegment(Path(tmp), BASE, index_interval_bytes=interval, max_index_size=4096)
        batches = fill(seg, spec, random.Random(seed))
        offsets, times = index_model(batches, interval)
        assert list(seg.offset_index) == offsets
        assert list(seg.time_index) == times
        for offset, position in seg.offset_index:  # every entry points at a batch start
            assert RecordBatch(seg.read_bytes(position, 61 + 10**5)).last_offset == offset
        seg.on_become_inactive()
        best = final_time_entry(batches)
        assert seg.time_index.last_entry == (best if best[0] >= 0 else (-1, BASE))
        assert seg.offset_index.path.stat().st_size == 8 * len(offsets)
        assert seg.time_index.path.stat().st_size == 12 * seg.time_index.entries
        seg.close()


def test_append_read_back_and_translate(tmp_path: Path) -> None:
    seg = LogSegment(tmp_path, BASE, index_interval_bytes=200)
    batches = fill(seg, [[1, 2, 3], [4], [5, 6], [7, 8, 9, 10], [11]] * 6)
    assert (tmp_path / "00000000000000000100.log").read_bytes() == b"".join(batches)
    stored = read_segment_file(seg.log_path)  # kafka-python reads the same batches
    assert [(b.base_offset, b.last_offset) for b in stored] == [
        (RecordBatch(r).base_offset, RecordBatch(r).last_offset) for r in batches
    ]
    assert seg.read_next_offset() == stored[-1].last_offset + 1
    for b in stored:
        for offset in range(b.base_offset, b.last_offset + 1):
            found = seg.translate_offset(offset)
            assert found is not None
            assert (found.position, found.base_offset, found.size) == (
                b.position,
                b.base_offset,
                b.size,
            )
    assert seg.translate_offset(stored[-1].last_offset + 1) is None
    assert [bytes(b.buffer) for b in seg.batches()] == batches


def test_empty_segment_next_offset_is_base(tmp_path: Path) -> None:
    seg = LogSegment(tmp_path, 42)
    assert seg.read_next_offset() == 42
    assert seg.translate_offset(42) is None
    assert seg.max_timestamp_and_offset == (-1, 42)


def test_close_trims_and_reopen_trusts_files(tmp_path: Path) -> None:
    seg = LogSegment(tmp_path, BASE, index_interval_bytes=100)
    batches = fill(seg, [[10], [30, 5], [20], [40], [40], [1]] * 4)
    entries, times = list(seg.offset_index), list(seg.time_index)
    assert seg.offset_index.path.stat().st_size == 10 * 1024 * 1024  # preallocated while active
    seg.close()
    assert seg.offset_index.path.stat().st_size == 8 * len(entries)
    best = final_time_entry(batches)
    reopened = LogSegment(tmp_path, BASE, index_interval_bytes=100)
    assert list(reopened.offset_index) == entries
    assert list(reopened.time_index) == (times if times[-1] == best else [*times, best])
    assert reopened.max_timestamp_and_offset == best  # Kafka reads it from the time index
    assert reopened.size == sum(len(b) for b in batches)


def test_truncate_to_drops_the_batch_holding_the_offset(tmp_path: Path) -> None:
    seg = LogSegment(tmp_path, BASE, index_interval_bytes=100)
    batches = fill(seg, [[1, 2], [50], [3, 4, 5], [60], [7]] * 4)
    stored = read_segment_file(seg.log_path)
    cut = stored[7]
    removed = seg.truncate_to(cut.base_offset + 1)  # inside batch 7: the whole batch goes
    assert removed == sum(len(b) for b in batches) - cut.position
    assert seg.size == cut.position == seg.log_path.stat().st_size
    assert seg.read_next_offset() == cut.base_offset
    assert all(o < cut.base_offset for o, _ in seg.offset_index)
    assert all(o < cut.base_offset for _, o in seg.time_index)
    assert seg.max_timestamp_and_offset == final_time_entry(batches[:7])
    assert seg.truncate_to(10**9) == 0


def test_find_offset_by_timestamp_matches_brute_force(tmp_path: Path) -> None:
    rng = random.Random(7)
    spec = [[rng.randrange(1000) for _ in range(rng.randint(1, 4))] for _ in range(40)]
    seg = LogSegment(tmp_path, BASE, index_interval_bytes=150)
    fill(seg, spec, rng)
    records = [(r[0], r[1]) for b in read_segment_file(seg.log_path) for r in b.records]
    for target in [*range(-1, 1001, 37), 999, 1000]:
        for start in (BASE, BASE + 13, BASE + 60):
            expected = next((o for o, ts in records if ts >= target and o >= start), None)
            assert seg.find_offset_by_timestamp(target, start) == expected, (target, start)


def test_time_waited_for_roll_uses_first_batch_timestamp_even_after_reopen(
    tmp_path: Path,
) -> None:
    seg = LogSegment(tmp_path, BASE, created_ms=0)
    fill(seg, [[1000, 1500], [900]])
    assert seg.time_waited_for_roll(lambda: 10**9, message_timestamp=5000) == 3500
    seg.close()
    reopened = LogSegment(tmp_path, BASE, created_ms=0)
    assert reopened.time_waited_for_roll(lambda: 10**9, message_timestamp=5000) == 3500
    untimed = LogSegment(tmp_path, 500, created_ms=1000)
    fill(untimed, [[-1]])  # no timestamps: the wall clock since the segment was created
    assert untimed.time_waited_for_roll(lambda: 4000, message_timestamp=5000) == 3000


def test_relative_offset_must_fit_int32(tmp_path: Path) -> None:
    seg = LogSegment(tmp_path, BASE)
    assert seg.can_convert_to_relative_offset(BASE + INT32_MAX)
    assert not seg.can_convert_to_relative_offset(BASE + INT32_MAX + 1)
    assert not seg.can_convert_to_relative_offset(BASE - 1)
    with pytest.raises(StorageError):
        append(seg, [make(BASE + INT32_MAX + 1, [1])])
    assert seg.size == 0 and seg.log_path.stat().st_size == 0


def test_full_index_mid_append_skips_entries(tmp_path: Path) -> None:
    """A many-batch append may fill a tiny index; entries are skipped, nothing fails."""
    seg = LogSegment(tmp_path, BASE, index_interval_bytes=0, max_index_size=24)
    batches = fill(seg, [[i] for i in range(10)], random.Random(1))
    # 24 bytes: 3 offset slots, 2 time slots of which one is kept for the roll/close entry, so
    # after one entry the time index is full and both stop (Kafka would roll at that point).
    assert (seg.offset_index.entries, seg.time_index.entries) == (1, 1)
    seg.on_become_inactive()  # the reserved slot still takes the final max-timestamp entry
    assert seg.time_index.last_entry == final_time_entry(batches)
    assert seg.size == sum(len(b) for b in batches)
    for offset, position in seg.offset_index:
        assert RecordBatch(seg.read_bytes(position, 10**5)).last_offset == offset


def test_header_scan_stops_at_partial_tail_and_rejects_bad_length(tmp_path: Path) -> None:
    seg = LogSegment(tmp_path, BASE)
    batches = fill(seg, [[1], [2]])
    with open(seg.log_path, "ab") as f:
        f.write(batches[0][:30])  # a torn third batch
    seg = LogSegment(tmp_path, BASE)
    assert [h.base_offset for h in seg.scan_headers()] == [BASE, BASE + 1]
    assert seg.read_next_offset() == BASE + 2
    with open(seg.log_path, "r+b") as f:
        f.seek(len(batches[0]) + 8)
        f.write((5).to_bytes(4, "big"))  # batchLength 5 < 14: corrupt
    seg = LogSegment(tmp_path, BASE)
    with pytest.raises(CorruptRecordError) as info:
        list(seg.scan_headers())
    assert info.value.position == len(batches[0])


def test_change_suffix_and_delete(tmp_path: Path) -> None:
    seg = LogSegment(tmp_path, BASE, suffix=".cleaned")
    fill(seg, [[1], [2]])
    seg.change_suffix(".swap")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00000000000000000100.index.swap",
        "00000000000000000100.log.swap",
        "00000000000000000100.timeindex.swap",
    ]
    seg.change_suffix("")
    assert seg.read_next_offset() == BASE + 2
    seg.delete()
    assert os.listdir(tmp_path) == []


def test_a_read_only_segment_without_indexes_scans_and_touches_nothing(tmp_path: Path) -> None:
    """What a reader opens for the active segment (``open_without_indexes``): its indexes read
    as empty, lookups scan the batches and find what the indexed segment finds, and no file in
    the directory is created, changed or removed (no scratch directory either)."""
    from kafkatier.storage.log.readonly import open_without_indexes

    seg = LogSegment(tmp_path, 100, index_interval_bytes=1)
    append(seg, [make(100 + 10 * i, [1000 + i] * 10) for i in range(20)])
    seg.close()
    indexed = LogSegment(tmp_path, 100, writable=False)
    (tmp_path / "00000000000000000100.index").write_bytes(b"\xff" * 64)  # a half-written index
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    scratch = set(Path(tempfile.gettempdir()).iterdir())
    view = open_without_indexes(tmp_path, 100)
    assert view.offset_index.entries == 0 and view.time_index.entries == 0
    found = view.translate_offset(157)
    assert found is not None and found.base_offset == 150 and found.last_offset == 159
    assert view.find_offset_by_timestamp(1013, 100) == 230
    assert indexed.find_offset_by_timestamp(1013, 100) == 230
    view.close()
    indexed.close()
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    assert set(Path(tempfile.gettempdir()).iterdir()) <= scratch
    with pytest.raises(ValueError, match="cannot be writable"):
        LogSegment(tmp_path, 100, read_indexes=False)


def test_write_behind_hints_cover_the_appends_in_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every ``WRITEBACK_BYTES`` appended, the kernel is asked to start writing them back:
    consecutive ranges from where the last hint ended, restarting below a truncation."""
    import kafkatier.storage.log.segment as segment_module

    hints: list[tuple[int, int]] = []
    monkeypatch.setattr(segment_module, "WRITEBACK_BYTES", 1000)
    monkeypatch.setattr(segment_module.fsutil, "start_writeback",
                        lambda fd, offset, n: hints.append((offset, n)))  # fmt: skip
    seg = LogSegment(tmp_path, BASE, index_interval_bytes=100)
    fill(seg, [[1, 2], [3], [4, 5, 6]] * 8)
    assert hints and hints[0][0] == 0 and all(n >= 1000 for _, n in hints)
    assert all(a + n == b for (a, n), (b, _) in itertools.pairwise(hints))
    assert seg.size - (hints[-1][0] + hints[-1][1]) < 1000 + 400  # at most a step and a batch
    cut = read_segment_file(seg.log_path)[3]
    seg.truncate_to(cut.base_offset)
    hints.clear()
    fill(seg, [[1, 2], [3], [4, 5, 6]] * 8)
    assert hints[0][0] == cut.position  # from the cut, not past the end of the file


def test_start_writeback_is_a_hint_that_never_fails(tmp_path: Path) -> None:
    from kafkatier.storage.fsutil import start_writeback

    path = tmp_path / "f"
    path.write_bytes(b"x" * 65536)
    fd = os.open(path, os.O_RDWR)
    try:
        start_writeback(fd, 0, 65536)
    finally:
        os.close(fd)
    start_writeback(fd, 0, 1)  # a closed descriptor: nothing happens
