"""TimeIndex: Kafka's layout and TimeIndexTest expectations, maybe_append rules, the corpus."""

from __future__ import annotations

import bisect
import json
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.memory_records import MemoryRecords

from kafkatier.storage.errors import CorruptIndexError, StorageError
from kafkatier.storage.index.base import IndexFullError, InvalidIndexEntryError
from kafkatier.storage.index.time_index import TimeIndex

VECTORS = Path(__file__).resolve().parents[2] / "data" / "vectors"
CORPUS = Path(__file__).resolve().parents[3].parent / "shared" / "kafka-corpus"
KAFKA = json.loads((VECTORS / "time_index.json").read_text())


def _kafka_test_index(tmp_path: Path, filled: int = 0) -> TimeIndex:
    """The fixture of Kafka's TimeIndexTest: appendEntries(n) = maybeAppend(i*10, i*10 + base)."""
    base = KAFKA["base_offset"]
    idx = TimeIndex(tmp_path / f"{filled}.timeindex", base, KAFKA["max_entries"] * 12)
    for i in range(1, filled + 1):
        idx.maybe_append(i * 10, i * 10 + base)
    return idx


# --------------------------------------------------------------------- official expectations


def test_entry_bytes_match_the_kafka_vector(tmp_path: Path) -> None:
    for case in json.loads((VECTORS / "index_entries.json").read_text())["time_index"]:
        idx = TimeIndex(tmp_path / "v.timeindex", case["base_offset"], 1200)
        idx.maybe_append(case["timestamp"], case["offset"])
        idx.close()
        assert idx.path.read_bytes() == bytes.fromhex(case["hex"])
        idx.path.unlink()


def test_kafka_lookups(tmp_path: Path) -> None:
    idx = _kafka_test_index(tmp_path)
    empty = KAFKA["empty_lookup"]
    assert idx.lookup(empty["timestamp"]) == tuple(empty["expected"])
    idx = _kafka_test_index(tmp_path, KAFKA["filled_with"])
    for case in KAFKA["lookups"]:
        assert idx.lookup(case["timestamp"]) == tuple(case["expected"]), case
    for case in KAFKA["entries"]:
        assert idx.entry(case["slot"]) == tuple(case["expected"]), case


def test_kafka_append_when_full(tmp_path: Path) -> None:
    idx = _kafka_test_index(tmp_path, KAFKA["filled_with"])
    case = KAFKA["append_when_full"]
    assert idx.is_full  # 29 of 30 slots: the last is kept for the roll/close entry
    with pytest.raises(IndexFullError, match=r"segment\.index\.bytes=\d+ holds 30 of 12 bytes"):
        idx.maybe_append(*case["rejected_as_full"])  # the message names the setting
    ts, offset = case["rejected_offset_with_skip_full_check"]
    with pytest.raises(InvalidIndexEntryError):
        idx.maybe_append(ts, offset, skip_full_check=True)
    ts, offset = case["accepted_with_skip_full_check"]
    idx.maybe_append(ts, offset, skip_full_check=True)
    assert idx.entries == idx.max_entries == 30
    with pytest.raises(IndexFullError):  # no physical slot left, even when skipping the check
        idx.maybe_append(20000, 2000, skip_full_check=True)


def test_kafka_truncate_and_last_entry(tmp_path: Path) -> None:
    idx = _kafka_test_index(tmp_path, KAFKA["filled_with"])
    idx.truncate_to(KAFKA["truncate_to_removes_all"]["offset"])
    assert idx.entries == 0
    assert idx.last_entry == (-1, KAFKA["base_offset"])
    case = KAFKA["last_entry_after_one_append"]
    idx.maybe_append(*case["append"])
    assert idx.last_entry == tuple(case["expected"])


# --------------------------------------------------------------------- maybe_append rules


def test_only_larger_timestamps_are_written(tmp_path: Path) -> None:
    idx = TimeIndex(tmp_path / "0.timeindex", 100, 120)
    idx.maybe_append(-1, 100)  # equal to the initial (-1, base) entry: skipped
    assert idx.entries == 0
    idx.maybe_append(5, 101)
    idx.maybe_append(5, 103)  # equal timestamp: silently skipped
    assert list(idx) == [(5, 101)]
    with pytest.raises(InvalidIndexEntryError):
        idx.maybe_append(9, 100)  # offset going backwards
    with pytest.raises(InvalidIndexEntryError) as err:
        idx.maybe_append(4, 104)  # timestamp going backwards
    assert err.value.context["file"] == str(idx.path)
    idx.maybe_append(5, 101)  # re-offering the last entry (roll, then close) is fine
    idx.maybe_append(7, 101)  # same offset, larger timestamp: written
    assert list(idx) == [(5, 101), (7, 101)] and idx.last_entry == (7, 101)
    with pytest.raises(InvalidIndexEntryError):
        idx.maybe_append(8, 100 + 2**31)  # relative offset overflow


def test_is_full_reserves_one_slot_and_default_size(tmp_path: Path) -> None:
    idx = TimeIndex(tmp_path / "0.timeindex", 0)
    assert idx.max_entries == 873_813 and idx.size_in_bytes == 10_485_756
    idx.close()
    small = TimeIndex(tmp_path / "1.timeindex", 0, 36)
    small.maybe_append(1, 1)
    assert not small.is_full
    small.maybe_append(2, 2)
    assert small.is_full


# --------------------------------------------------------------------- lookups against a model


@st.composite
def _entries(draw: st.DrawFn) -> list[tuple[int, int]]:
    # Up to 1500 entries: both sides of the 682-entry warm section are searched.
    count = draw(st.integers(0, 1500))
    rng = random.Random(draw(st.integers(0, 2**32)))
    ts, off, out = draw(st.integers(0, 10**12)), 500, []
    for _ in range(count):
        out.append((ts, off))
        ts += rng.randint(1, 1000)
        off += rng.randint(0, 3)  # several entries may share an offset
    return out


@settings(max_examples=40, deadline=None)
@given(entries=_entries(), data=st.data())
def test_lookup_and_truncate_match_a_sorted_list(
    tmp_path_factory: pytest.TempPathFactory, entries: list[tuple[int, int]], data: st.DataObject
) -> None:
    idx = TimeIndex(tmp_path_factory.mktemp("t") / "x.timeindex", 500, 12 * (len(entries) + 2))
    for ts, off in entries:
        idx.maybe_append(ts, off)
    stamps = [ts for ts, _ in entries]

    def model(kept: list[tuple[int, int]], target: int) -> tuple[int, int]:
        i = bisect.bisect_right([ts for ts, _ in kept], target) - 1
        return (-1, 500) if i < 0 else kept[i]

    lo, hi = (stamps[0] - 5, stamps[-1] + 5) if stamps else (-5, 5)
    targets = data.draw(st.lists(st.integers(lo, hi), max_size=30)) + stamps[:2] + stamps[-2:]
    for target in targets:
        assert idx.lookup(target) == model(entries, target)
    cut = data.draw(st.integers(495, (entries[-1][1] if entries else 500) + 3))
    idx.truncate_to(cut)
    kept = [e for e in entries if e[1] < cut]
    assert list(idx) == kept and idx.last_entry == (kept[-1] if kept else (-1, 500))
    for target in targets:
        assert idx.lookup(target) == model(kept, target)


# --------------------------------------------------------------------- files


def test_trim_reopen_and_resize_refreshes_last_entry(tmp_path: Path) -> None:
    idx = TimeIndex(tmp_path / "0.timeindex", 0, 120)
    idx.maybe_append(10, 1)
    idx.maybe_append(20, 2)
    idx.trim_to_valid_size()
    assert idx.path.stat().st_size == 24
    assert idx.resize(120) and idx.last_entry == (20, 2)
    idx.close()
    assert idx.path.stat().st_size == 24
    again = TimeIndex(idx.path, 0, writable=False)
    assert again.last_entry == (20, 2) and again.lookup(15) == (10, 1)


def test_untrimmed_reopen_counts_the_zero_tail(tmp_path: Path) -> None:
    idx = TimeIndex(tmp_path / "0.timeindex", 7, 60)
    idx.maybe_append(10, 8)
    idx.flush()
    idx.close_handler()
    again = TimeIndex(idx.path, 7, writable=False)
    assert again.entries == 5 and again.last_entry == (0, 7)
    with pytest.raises(CorruptIndexError):  # last timestamp 0 < first timestamp 10
        again.sanity_check()


def test_read_only_and_missing_and_empty(tmp_path: Path) -> None:
    ro = TimeIndex(tmp_path / "absent.timeindex", 3, writable=False)
    assert not ro.exists and ro.lookup(10) == (-1, 3) and ro.last_entry == (-1, 3)
    with pytest.raises(StorageError):
        ro.maybe_append(1, 3)
    assert not ro.path.exists()
    empty = tmp_path / "empty.timeindex"
    empty.write_bytes(b"")
    idx = TimeIndex(empty, 3)
    idx.sanity_check()
    assert idx.is_full  # no slots until the segment resizes it
    idx.reset()
    idx.maybe_append(1, 3)
    assert idx.lookup(1) == (1, 3)


def test_rename_then_append(tmp_path: Path) -> None:
    idx = TimeIndex(tmp_path / "0.timeindex", 0, 120)
    idx.maybe_append(1, 1)
    idx.rename_to(tmp_path / "0.timeindex.deleted")
    idx.maybe_append(2, 2)
    idx.close()
    assert (tmp_path / "0.timeindex.deleted").stat().st_size == 24
    assert idx.delete() and not idx.path.exists()


def test_sanity_check_failures(tmp_path: Path) -> None:
    bad_length = tmp_path / "a.timeindex"
    bad_length.write_bytes(bytes(13))
    with pytest.raises(CorruptIndexError):
        TimeIndex(bad_length, 0, writable=False).sanity_check()
    below_base = tmp_path / "b.timeindex"
    below_base.write_bytes(bytes.fromhex("0000000000000005 ffffffff"))
    with pytest.raises(CorruptIndexError) as err:
        TimeIndex(below_base, 10, writable=False).sanity_check()
    assert err.value.context["file"] == str(below_base)


# --------------------------------------------------------------------- the real corpus


def _batch_ranges(log: Path) -> list[tuple[int, int, int]]:
    """(base offset, last offset, max timestamp) per batch, read by kafka-python."""
    records, out = MemoryRecords(log.read_bytes()), []
    while (batch := records.next_batch()) is not None:
        out.append((batch.base_offset, batch.last_offset, batch.max_timestamp))
    return out


def test_every_corpus_time_index() -> None:
    if not CORPUS.is_dir():
        pytest.skip(f"Kafka corpus not found at {CORPUS}")
    paths = sorted(CORPUS.rglob("*.timeindex"))
    assert paths, "corpus has no .timeindex files"
    checked = 0
    for path in paths:
        idx = TimeIndex(path, int(path.name.split(".")[0]), writable=False)
        idx.sanity_check()
        entries = list(idx)
        stamps = [ts for ts, _ in entries]
        assert stamps == sorted(set(stamps)), path  # strictly increasing (DumpLogSegments)
        log = path.with_suffix(".log")
        if log.exists():  # a missing .log is a hole noted in _MISSING.txt
            batches = _batch_ranges(log)
            bases = [b for b, _, _ in batches]
            for ts, offset in entries:
                # The entry's offset lies in the batch that carried the max timestamp (Kafka
                # versions differ on whether it is the batch's last offset or the record's own).
                first, last, max_ts = batches[bisect.bisect_right(bases, offset) - 1]
                assert first <= offset <= last and max_ts == ts, (path, ts, offset)
                assert idx.lookup(ts) == (ts, offset)
            # What a restarted broker takes as the segment's largest timestamp (§5, §14.9).
            assert idx.last_entry[0] == max((b[2] for b in batches), default=-1), path
            checked += bool(entries)
        idx.close()
    assert checked > 100


def test_maybe_append_all_is_maybe_append_of_each_checked_first(tmp_path: Path) -> None:
    """A segment offers the entries of one append at once: repeats of the last timestamp are
    skipped as ``maybe_append`` skips them, and one going backwards stores none of them."""
    one, many = (TimeIndex(tmp_path / f"{n}.timeindex", 0, 12 * 8) for n in ("one", "many"))
    offered = [(100, 1), (100, 2), (150, 3), (150, 3), (170, 5)]
    for ts, offset in offered:
        one.maybe_append(ts, offset)
    many.maybe_append_all(offered)
    assert list(many) == list(one) == [(100, 1), (150, 3), (170, 5)]
    assert many.last_entry == one.last_entry == (170, 5)
    with pytest.raises(InvalidIndexEntryError):
        many.maybe_append_all([(180, 6), (175, 7)])
    assert list(many) == [(100, 1), (150, 3), (170, 5)]
    one.close()
    many.close()


def test_append_packed_is_maybe_append_all_of_entries_the_caller_packed(tmp_path: Path) -> None:
    """A segment packs the entries of one append itself (each timestamp above the last) and
    hands them over with the first and last: the bytes ``maybe_append_all`` stores, and its
    refusals of a first entry that goes back in timestamp or offset, or does not fit."""
    one, packed = (TimeIndex(tmp_path / f"{n}.timeindex", 10, 12 * 5) for n in ("one", "packed"))
    entries = [(100, 11), (150, 13)]
    one.maybe_append_all(entries)
    raw = bytearray(b"".join(TimeIndex.ENTRY.pack(ts, o - 10) for ts, o in entries))
    packed.append_packed(raw, entries[0], entries[-1], 2)
    assert list(packed) == list(one) == entries and packed.last_entry == (150, 13)
    for first, last, count, error in (
        ((150, 14), (160, 15), 1, InvalidIndexEntryError),  # the timestamp does not grow
        ((160, 12), (170, 15), 1, InvalidIndexEntryError),  # the offset goes back
        ((160, 14), (170, 10 + 2**31), 2, InvalidIndexEntryError),  # beyond the relative range
        ((160, 14), (180, 16), 3, IndexFullError),  # one slot is held back: 2 free
    ):
        with pytest.raises(error):
            packed.append_packed(bytearray(12 * count), first, last, count)
    assert list(packed) == entries
    one.close()
    packed.close()
