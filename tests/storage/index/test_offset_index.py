"""OffsetIndex: Kafka's byte layout, lookup and truncation, file lifetime, the real corpus."""

from __future__ import annotations

import bisect
import json
import os
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.memory_records import MemoryRecords

from kafkatier.storage.errors import CorruptIndexError, StorageError
from kafkatier.storage.index.base import PENDING_BYTES, IndexFullError, InvalidIndexEntryError
from kafkatier.storage.index.offset_index import OffsetIndex

VECTORS = Path(__file__).resolve().parents[2] / "data" / "vectors" / "index_entries.json"
CORPUS = Path(__file__).resolve().parents[3].parent / "shared" / "kafka-corpus"


def _index(tmp_path: Path, base: int = 0, max_size: int = 8 * 64) -> OffsetIndex:
    return OffsetIndex(tmp_path / f"{base:020d}.index", base, max_size)


# --------------------------------------------------------------------- bytes on disk


def test_entry_bytes_match_the_kafka_vector(tmp_path: Path) -> None:
    for case in json.loads(VECTORS.read_text())["offset_index"]:
        idx = _index(tmp_path, case["base_offset"])
        idx.append(case["offset"], case["position"])
        idx.close()  # trims, as Kafka's close does
        assert idx.path.read_bytes() == bytes.fromhex(case["hex"])
        reopened = OffsetIndex(idx.path, case["base_offset"], writable=False)
        assert list(reopened) == [(case["offset"], case["position"])]


def test_new_file_is_preallocated_with_zeros(tmp_path: Path) -> None:
    idx = _index(tmp_path, max_size=8 * 10 + 7)  # rounded down to whole entries
    assert idx.path.stat().st_size == 80 == idx.size_in_bytes
    assert idx.path.read_bytes() == bytes(80)
    assert (idx.entries, idx.max_entries, idx.last_offset) == (0, 10, 0)


def test_default_preallocation_is_ten_mebibytes(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "0.index", 0)
    assert idx.size_in_bytes == 10 * 1024 * 1024 and idx.max_entries == 1_310_720
    idx.close()
    assert idx.path.stat().st_size == 0


def test_max_index_size_below_one_entry_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        OffsetIndex(tmp_path / "0.index", 0, 7)


def test_trim_and_reopen(tmp_path: Path) -> None:
    idx = _index(tmp_path, base=1000)
    idx.append(1010, 0)
    idx.append(1020, 4200)
    idx.trim_to_valid_size()
    assert idx.path.stat().st_size == 16 and idx.max_entries == 2 and idx.is_full
    idx.close()
    again = OffsetIndex(idx.path, 1000)
    assert (again.entries, again.last_offset) == (2, 1020)
    assert again.lookup(1015) == (1010, 0)


def test_reopening_an_untrimmed_file_counts_the_zero_tail(tmp_path: Path) -> None:
    idx = _index(tmp_path, base=100, max_size=80)
    idx.append(110, 10)
    idx.append(120, 20)
    idx.flush()
    idx.close_handler()  # a crash: no trim
    again = OffsetIndex(idx.path, 100, writable=False)
    # Kafka trusts every slot: 10 entries, the last eight being (base offset, 0).
    assert again.entries == 10 and again.last_offset == 100
    assert list(again)[2:] == [(100, 0)] * 8
    again.sanity_check()  # last offset == base offset passes Kafka's check too
    # The unsorted tail sends Kafka's binary search to the last slot: a scan from position 0.
    assert again.lookup(125) == (100, 0)
    writable = OffsetIndex(idx.path, 100)
    with pytest.raises(IndexFullError):
        writable.append(130, 30)


# --------------------------------------------------------------------- append rules


def test_append_rules(tmp_path: Path) -> None:
    idx = _index(tmp_path, base=50, max_size=24)
    with pytest.raises(InvalidIndexEntryError):
        idx.append(49, 0)  # below the base: negative relative offset
    idx.append(50, 0)
    for bad in (50, 40):
        with pytest.raises(InvalidIndexEntryError) as err:
            idx.append(bad, 100)
        assert isinstance(err.value, CorruptIndexError) and isinstance(err.value, ValueError)
        assert err.value.context["file"] == str(idx.path)
    with pytest.raises(InvalidIndexEntryError):
        idx.append(50 + 2**31, 100)  # relative offset overflows int32
    idx.append(50 + 2**31 - 1, 100)
    assert idx.entries == 2 and idx.last_offset == 50 + 2**31 - 1


def test_is_full(tmp_path: Path) -> None:
    idx = _index(tmp_path, max_size=24)
    for i in range(3):
        assert not idx.is_full
        idx.append(i, i * 10)
    assert idx.is_full
    with pytest.raises(IndexFullError) as err:
        idx.append(3, 30)
    assert isinstance(err.value, ValueError)


def test_can_append_offset(tmp_path: Path) -> None:
    idx = _index(tmp_path, base=10)
    assert idx.can_append_offset(10) and idx.can_append_offset(10 + 2**31 - 1)
    assert not idx.can_append_offset(9) and not idx.can_append_offset(10 + 2**31)


# --------------------------------------------------------------------- lookup and truncation


def _filled(tmp_path: Path, offsets: list[int]) -> OffsetIndex:
    idx = OffsetIndex(tmp_path / "x.index", 1000, 8 * (len(offsets) + 1))
    for i, off in enumerate(offsets):
        idx.append(off, i * 7)
    return idx


def _model_lookup(offsets: list[int], target: int) -> tuple[int, int]:
    i = bisect.bisect_right(offsets, target) - 1
    return (1000, 0) if i < 0 else (offsets[i], i * 7)


@st.composite
def _offsets(draw: st.DrawFn) -> list[int]:
    # Up to 2500 entries so that both sides of Kafka's 1024-entry warm section are searched.
    count = draw(st.integers(0, 2500))
    rng = random.Random(draw(st.integers(0, 2**32)))
    start = 1000 + draw(st.integers(0, 3))
    out, cur = [], start
    for _ in range(count):
        out.append(cur)
        cur += rng.randint(1, 6)
    return out


@settings(max_examples=40, deadline=None)
@given(offsets=_offsets(), data=st.data())
def test_lookup_and_truncate_match_a_sorted_list(
    tmp_path_factory: pytest.TempPathFactory, offsets: list[int], data: st.DataObject
) -> None:
    tmp = tmp_path_factory.mktemp("idx")
    idx = _filled(tmp, offsets)
    hi = (offsets[-1] if offsets else 1000) + 5
    targets = data.draw(st.lists(st.integers(990, hi), max_size=30))
    for target in [*targets, *offsets[:3], *offsets[-3:]]:
        assert idx.lookup(target) == _model_lookup(offsets, target)
    cut = data.draw(st.integers(990, hi))
    idx.truncate_to(cut)
    kept = [o for o in offsets if o < cut]
    assert idx.entries == len(kept) and [o for o, _ in idx] == kept
    assert idx.last_offset == (kept[-1] if kept else 1000)
    for target in targets:
        assert idx.lookup(target) == _model_lookup(kept, target)
    idx.close()
    assert idx.path.stat().st_size == 8 * len(kept)


def test_truncate_to_cases(tmp_path: Path) -> None:
    idx = _filled(tmp_path, [1010, 1020, 1030])
    idx.truncate_to(1040)
    assert idx.entries == 3
    idx.truncate_to(1030)  # an exact hit drops that entry
    assert [o for o, _ in idx] == [1010, 1020]
    idx.truncate_to(1015)  # between entries keeps the lower one
    assert [o for o, _ in idx] == [1010]
    idx.append(1012, 5)  # appends resume after the new last offset
    idx.truncate_to(5)
    assert idx.entries == 0 and idx.last_offset == 1000
    assert idx.lookup(2000) == (1000, 0)


def test_entry_and_iteration(tmp_path: Path) -> None:
    idx = _filled(tmp_path, [1001, 1005])
    assert idx.entry(1) == (1005, 7) and list(idx) == [(1001, 0), (1005, 7)]
    with pytest.raises(IndexError):
        idx.entry(2)


def test_reset_and_resize(tmp_path: Path) -> None:
    idx = _index(tmp_path, max_size=80)
    idx.append(1, 1)
    idx.append(2, 2)
    idx.trim_to_valid_size()
    assert idx.size_in_bytes == 16
    assert idx.resize(80) and idx.max_entries == 10 and idx.entries == 2
    assert not idx.resize(87)  # same size after rounding down
    with pytest.raises(ValueError):
        idx.resize(8)  # would cut a valid entry
    idx.append(3, 3)
    idx.reset()
    assert idx.entries == 0 and idx.size_in_bytes == 80 and idx.path.stat().st_size == 80


def test_rename_keeps_working(tmp_path: Path) -> None:
    idx = _index(tmp_path, base=7)
    idx.append(8, 100)
    new = tmp_path / "00000000000000000007.index.swap"
    idx.rename_to(new)
    assert idx.path == new and new.exists() and not (tmp_path / f"{7:020d}.index").exists()
    idx.append(9, 200)  # the map follows the inode
    idx.trim_to_valid_size()  # the remap reopens the new name
    assert new.stat().st_size == 16 and idx.lookup(9) == (9, 200)
    idx.close()
    assert list(OffsetIndex(new, 7, writable=False)) == [(8, 100), (9, 200)]


def test_delete(tmp_path: Path) -> None:
    idx = _index(tmp_path)
    assert idx.delete() and not idx.path.exists()
    assert not idx.delete()


def test_closed_index_refuses_reads(tmp_path: Path) -> None:
    idx = _filled(tmp_path, [1001])
    idx.close()
    with pytest.raises(StorageError):
        idx.lookup(1001)


# --------------------------------------------------------------------- read-only and empty files


def test_read_only_mode_never_writes(tmp_path: Path) -> None:
    idx = _filled(tmp_path, [1001, 1002])
    idx.flush()
    idx.close_handler()  # untrimmed on purpose
    before = idx.path.read_bytes()
    os.chmod(idx.path, 0o444)
    ro = OffsetIndex(idx.path, 1000, writable=False)
    assert ro.entries == 3  # two entries and one zero slot
    for call in (lambda: ro.append(1003, 1), ro.reset, lambda: ro.resize(8)):
        with pytest.raises(StorageError):
            call()
    ro.trim_to_valid_size()  # every slot counts as an entry, so there is nothing to trim
    ro.flush()
    ro.close()
    assert idx.path.read_bytes() == before


def test_read_only_trim_of_a_trimmed_file_is_a_no_op(tmp_path: Path) -> None:
    idx = _filled(tmp_path, [1001])
    idx.close()
    ro = OffsetIndex(idx.path, 1000, writable=False)
    ro.trim_to_valid_size()  # Kafka's resize returns early when the size is already right
    assert ro.size_in_bytes == 8 == ro.valid_bytes


@pytest.mark.parametrize("writable", [True, False])
def test_empty_file(tmp_path: Path, writable: bool) -> None:
    path = tmp_path / "0.index"
    path.write_bytes(b"")
    idx = OffsetIndex(path, 42, writable=writable)
    assert (idx.entries, idx.max_entries, idx.last_offset) == (0, 0, 42)
    assert idx.lookup(100) == (42, 0) and list(idx) == []
    idx.sanity_check()
    idx.truncate_to(0)
    idx.close()
    if writable:
        again = OffsetIndex(path, 42, 80)
        again.reset()  # Kafka regrows the active segment's index at load
        again.append(43, 0)
        assert again.lookup(50) == (43, 0)


def test_missing_file_read_only_is_empty_and_not_created(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "0.index", 5, writable=False)
    assert not idx.exists and idx.entries == 0 and idx.lookup(9) == (5, 0)
    assert not idx.path.exists()
    idx.close()
    assert not idx.path.exists()


# --------------------------------------------------------------------- sanity check


def test_sanity_check_length_not_a_multiple(tmp_path: Path) -> None:
    path = tmp_path / "0.index"
    path.write_bytes(bytes.fromhex("00000001 00000000 0000".replace(" ", "")))
    idx = OffsetIndex(path, 0, writable=False)
    assert idx.entries == 1
    with pytest.raises(CorruptIndexError) as err:
        idx.sanity_check()
    assert err.value.context["file"] == str(path)


def test_sanity_check_last_offset_below_base(tmp_path: Path) -> None:
    path = tmp_path / "0.index"
    path.write_bytes(bytes.fromhex("00000001 00000000 ffffffff 00000010".replace(" ", "")))
    idx = OffsetIndex(path, 100, writable=False)
    assert idx.last_offset == 99  # the relative offset is a signed int32
    with pytest.raises(CorruptIndexError):
        idx.sanity_check()
    idx.truncate_to(101)  # in memory only: drops the bad last entry
    idx.sanity_check()


# --------------------------------------------------------------------- the real corpus


def _batches(log: Path) -> list[tuple[int, int, int]]:
    """(start position, base offset, last offset) of each batch, read by kafka-python."""
    records, pos, out = MemoryRecords(log.read_bytes()), 0, []
    while (batch := records.next_batch()) is not None:
        out.append((pos, batch.base_offset, batch.last_offset))
        pos += batch.size_in_bytes
    return out


def test_every_corpus_offset_index(tmp_path: Path) -> None:
    if not CORPUS.is_dir():
        pytest.skip(f"Kafka corpus not found at {CORPUS}")
    paths = sorted(CORPUS.rglob("*.index"))
    assert paths, "corpus has no .index files"
    checked = 0
    for path in paths:
        idx = OffsetIndex(path, int(path.name.split(".")[0]), writable=False)
        idx.sanity_check()
        entries = list(idx)
        assert len(entries) == path.stat().st_size // 8
        offsets = [o for o, _ in entries]
        log = path.with_suffix(".log")
        if entries and log.exists():  # a missing .log is a hole noted in _MISSING.txt
            starts = {p: last for p, _, last in _batches(log)}
            lasts = set(starts.values())
            assert offsets == sorted(set(offsets)), path
            for offset, position in entries:
                # Kafka indexes (last offset of an append, its start position); an append may
                # hold several batches, so the batch at the position ends at or before it.
                assert position in starts and starts[position] <= offset, path
                assert offset in lasts, path
                assert idx.lookup(offset) == (offset, position)
            checked += 1
        idx.close()
    assert checked > 100


def test_read_only_view_survives_the_writer_trimming_the_file(tmp_path: Path) -> None:
    """A reader's view of an active segment's preallocated index must not be a map: the writer
    trims the file at roll/close, and a mapped page past the new end would SIGBUS the reader."""
    path = tmp_path / "00000000000000000000.index"
    writer = OffsetIndex(path, 0, max_index_size=64 * 1024)
    for i in range(1, 11):
        writer.append(i * 10, i * 100)
    writer.flush()  # the entries in the file (a writer keeps its last ones in memory until then)
    reader = OffsetIndex(path, 0, max_index_size=64 * 1024, writable=False)
    assert reader.entries == 64 * 1024 // 8  # Kafka trusts every slot of an untrimmed file
    before = [reader.lookup(t) for t in (0, 55, 10_000)]
    writer.trim_to_valid_size()
    assert path.stat().st_size == 10 * 8
    # its own copy: the far end is still readable (no SIGBUS) and answers do not change
    assert reader.entry(reader.entries - 1) == (0, 0)
    assert reader.entry(4) == (50, 500)
    assert [reader.lookup(t) for t in (0, 55, 10_000)] == before
    writer.close()


# --------------------------------------------------------------------- entries kept in memory


def _file_entries(path: Path, count: int) -> list[tuple[int, int]]:
    data = path.read_bytes()
    return [
        (int.from_bytes(data[i : i + 4], "big"), int.from_bytes(data[i + 4 : i + 8], "big"))
        for i in range(0, 8 * count, 8)
    ]


def test_entries_reach_the_file_a_page_at_a_time_or_when_read(tmp_path: Path) -> None:
    """A writer keeps its last entries in memory (index/base.py): the file holds them once a
    page's worth gathered, or once anything in the process reads, flushes or trims them."""
    index = _index(tmp_path, max_size=8 * 2048)
    per_page = PENDING_BYTES // 8
    for i in range(1, per_page):
        index.append(i, i * 10)
    assert index.entries == per_page - 1 and index.unwritten == per_page - 1
    assert _file_entries(index.path, 3) == [(0, 0)] * 3  # still zeros in the file
    index.append(per_page, per_page * 10)  # the page is full: written
    assert index.unwritten == 0
    assert _file_entries(index.path, per_page)[-2:] == [(per_page - 1, (per_page - 1) * 10),
                                                       (per_page, per_page * 10)]  # fmt: skip
    index.append(per_page + 1, 1)
    assert index.lookup(per_page + 5) == (per_page + 1, 1) and index.unwritten == 0  # a read
    index.append(per_page + 2, 2)
    index.flush()
    assert index.unwritten == 0 and _file_entries(index.path, per_page + 2)[-1] == (
        per_page + 2, 2)  # fmt: skip
    index.append(per_page + 3, 3)
    index.trim_to_valid_size()
    assert index.path.stat().st_size == 8 * (per_page + 3)
    assert _file_entries(index.path, per_page + 3)[-1] == (per_page + 3, 3)
    index.close()


def test_append_all_checks_every_entry_before_storing_any(tmp_path: Path) -> None:
    index = _index(tmp_path, max_size=8 * 4)
    index.append_all([(5, 50), (7, 70)])
    with pytest.raises(InvalidIndexEntryError):
        index.append_all([(9, 90), (8, 80)])  # the second goes backwards
    with pytest.raises(IndexFullError):
        index.append_all([(9, 90), (10, 100), (11, 110)])  # one more than the free slots
    assert list(index) == [(5, 50), (7, 70)] and index.last_offset == 7
    index.append_all([(9, 90), (10, 100)])
    assert list(index) == [(5, 50), (7, 70), (9, 90), (10, 100)]
    index.close()


def test_close_handler_drops_the_entries_kept_in_memory(tmp_path: Path) -> None:
    """Used before deletion, or where the loader rebuilds the indexes: nothing is written."""
    index = _index(tmp_path)
    index.append(3, 30)
    index.close_handler()
    assert _file_entries(index.path, 1) == [(0, 0)]


def test_append_packed_is_append_all_of_entries_the_caller_packed(tmp_path: Path) -> None:
    """A segment packs an append's entries itself and hands them over with their first and
    last offsets: the same bytes and checks as ``append_all`` (the first against the last
    entry, the range of relative offsets, the free slots), nothing stored on a refusal."""
    packed, listed = (OffsetIndex(tmp_path / f"{n}.index", 50, 8 * 4) for n in ("p", "l"))
    entries = [(55, 500), (57, 700)]
    listed.append_all(entries)
    raw = bytearray(b"".join(OffsetIndex.ENTRY.pack(o - 50, p) for o, p in entries))
    packed.append_packed(raw, 55, 57, 2)
    assert list(packed) == list(listed) == entries and packed.last_offset == 57
    for first, last, count, error in (
        (57, 58, 2, InvalidIndexEntryError),  # not after the last entry
        (58, 50 + 2**31, 2, InvalidIndexEntryError),  # the last does not fit the relative range
        (58, 60, 3, IndexFullError),  # one more than the free slots
    ):
        with pytest.raises(error):
            packed.append_packed(bytearray(8 * count), first, last, count)
    assert list(packed) == entries
    packed.close()
    listed.close()
