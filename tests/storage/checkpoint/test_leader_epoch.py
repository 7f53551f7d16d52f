"""Expectations follow Kafka's LeaderEpochFileCacheTest scenarios and the rules of
LeaderEpochFileCache.java (kafka-format.md §8.3), worked out by hand."""

from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkatier.storage.checkpoint.leader_epoch import LEADER_EPOCH_CHECKPOINT, LeaderEpochFileCache
from kafkatier.storage.errors import CheckpointError, StorageError

CORPUS = Path(__file__).resolve().parents[3].parent / "shared" / "kafka-corpus"


def _cache(tmp_path: Path, *entries: tuple[int, int]) -> LeaderEpochFileCache:
    cache = LeaderEpochFileCache(tmp_path / LEADER_EPOCH_CHECKPOINT)
    for epoch, offset in entries:
        cache.assign(epoch, offset)
    return cache


def test_fresh_single_leader_file_text(tmp_path):
    cache = _cache(tmp_path)
    assert cache.entries == [] and cache.latest_epoch is None
    assert cache.assign(0, 0) is True
    assert not cache.path.exists()  # nothing is written before flush
    cache.flush()
    assert cache.path.read_bytes() == b"0\n1\n0 0\n"
    assert LeaderEpochFileCache(cache.path).entries == [(0, 0)]
    assert not (tmp_path / (LEADER_EPOCH_CHECKPOINT + ".tmp")).exists()


def test_flush_writes_empty_file_once_and_then_only_when_dirty(tmp_path):
    cache = _cache(tmp_path)
    cache.flush()
    assert cache.path.read_bytes() == b"0\n0\n"
    cache.path.write_bytes(b"0\n0\n\n")  # not rewritten while clean
    cache.flush()
    assert cache.path.read_bytes() == b"0\n0\n\n"
    cache.assign(3, 7)
    assert cache.dirty
    cache.flush()
    assert not cache.dirty
    assert cache.path.read_bytes() == b"0\n1\n3 7\n"


def test_same_epoch_is_not_reassigned_to_a_later_offset(tmp_path):
    cache = _cache(tmp_path, (2, 6))
    assert cache.assign(2, 7) is False
    assert cache.assign(2, 6) is False
    assert cache.entries == [(2, 6)]


def test_same_epoch_with_lower_offset_replaces_it(tmp_path):
    cache = _cache(tmp_path, (1, 2), (2, 6))
    assert cache.assign(2, 4) is True
    assert cache.entries == [(1, 2), (2, 4)]
    assert cache.assign(2, 1) is True  # (1, 2) starts after 1 and is dropped too
    assert cache.entries == [(2, 1)]


def test_new_epoch_with_lower_start_truncates_conflicts(tmp_path):
    cache = _cache(tmp_path, (2, 6))
    assert cache.assign(3, 5) is True
    assert cache.entries == [(3, 5)]


def test_lower_epoch_with_higher_offset_drops_later_epochs(tmp_path):
    # Kafka assigns whenever the epoch differs from the latest; entries with epoch >= new go.
    cache = _cache(tmp_path, (1, 0), (5, 100))
    assert cache.assign(3, 200) is True
    assert cache.entries == [(1, 0), (3, 200)]


def test_increasing_epochs_append(tmp_path):
    cache = _cache(tmp_path, (0, 0), (1, 255), (2, 1944))
    assert cache.entries == [(0, 0), (1, 255), (2, 1944)]
    assert cache.latest_epoch == 2
    assert cache.latest_entry == (2, 1944)
    assert cache.earliest_entry == (0, 0)
    assert cache.epoch_entry(1) == (1, 255) and cache.epoch_entry(7) is None
    assert (cache.previous_epoch(2), cache.previous_epoch(0)) == (1, None)
    assert (cache.next_epoch(0), cache.next_epoch(2)) == (1, None)


@pytest.mark.parametrize(("epoch", "offset"), [(-1, 0), (0, -1)])
def test_negative_values_rejected(tmp_path, epoch, offset):
    cache = _cache(tmp_path, (1, 5))
    with pytest.raises(StorageError, match="invalid partition leader epoch"):
        cache.assign(epoch, offset)
    assert cache.entries == [(1, 5)]


@pytest.mark.parametrize(
    ("end", "expected"),
    [
        (12, [(2, 6), (3, 8), (4, 11)]),
        (11, [(2, 6), (3, 8)]),
        (9, [(2, 6), (3, 8)]),
        (8, [(2, 6)]),
        (6, []),
        (0, []),
        (-1, [(2, 6), (3, 8), (4, 11)]),  # undefined end offset: nothing happens
    ],
)
def test_truncate_from_end(tmp_path, end, expected):
    cache = _cache(tmp_path, (2, 6), (3, 8), (4, 11))
    assert cache.truncate_from_end(end) is (expected != [(2, 6), (3, 8), (4, 11)])
    assert cache.entries == expected


@pytest.mark.parametrize(
    ("start", "expected"),
    [
        (5, [(2, 6), (3, 8), (4, 11)]),
        (6, [(2, 6), (3, 8), (4, 11)]),  # exclusive: the entry at 6 stays
        (7, [(2, 7), (3, 8), (4, 11)]),
        (8, [(3, 8), (4, 11)]),
        (9, [(3, 9), (4, 11)]),
        (11, [(4, 11)]),
        (15, [(4, 15)]),
    ],
)
def test_truncate_from_start(tmp_path, start, expected):
    cache = _cache(tmp_path, (2, 6), (3, 8), (4, 11))
    cache.truncate_from_start(start)
    assert cache.entries == expected


def test_truncation_is_flushed_on_request(tmp_path):
    cache = _cache(tmp_path, (2, 6), (3, 8), (4, 11))
    cache.flush()
    cache.truncate_from_start(9)
    cache.truncate_from_end(11)
    assert LeaderEpochFileCache(cache.path).entries == [(2, 6), (3, 8), (4, 11)]
    cache.flush()
    assert cache.path.read_text() == "0\n1\n3 9\n"


def test_entries_in_range_leaves_cache_alone(tmp_path):
    cache = _cache(tmp_path, (2, 6), (3, 8), (4, 11))
    cache.flush()
    assert cache.entries_in_range(7, 11) == [(2, 7), (3, 8)]
    assert cache.entries_in_range(-1, 9) == [(2, 6), (3, 8)]
    assert cache.entries == [(2, 6), (3, 8), (4, 11)]
    assert not cache.dirty


@pytest.mark.parametrize(
    ("offset", "epoch"),
    [(-1, None), (0, 1), (4, 1), (5, 3), (9, 3), (10, 5), (10**12, 5)],
)
def test_epoch_for_offset(tmp_path, offset, epoch):
    assert _cache(tmp_path, (1, 0), (3, 5), (5, 10)).epoch_for_offset(offset) == epoch


@pytest.mark.parametrize(
    ("requested", "expected"),
    [
        (-1, (-1, -1)),  # UNDEFINED_EPOCH
        (0, (0, 10)),  # below every cached epoch: the first start offset
        (1, (1, 13)),
        (2, (2, 17)),
        (3, (2, 17)),  # largest epoch <= 3 is 2; it ended where epoch 4 began
        (4, (4, 21)),  # the latest epoch ends at the log end offset
        (5, (-1, -1)),
    ],
)
def test_end_offset_for(tmp_path, requested, expected):
    cache = _cache(tmp_path, (1, 10), (2, 13), (4, 17))
    assert cache.end_offset_for(requested, log_end_offset=21) == expected


def test_end_offset_for_empty_cache(tmp_path):
    assert _cache(tmp_path).end_offset_for(0, 5) == (-1, -1)


def test_loading_replays_assign_rules(tmp_path):
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    path.write_text("0\n3\n5 10\n3 20\n7 30\n")
    cache = LeaderEpochFileCache(path)
    assert cache.entries == [(3, 20), (7, 30)]
    assert not cache.dirty  # loading alone never rewrites the file


@pytest.mark.parametrize(
    ("text", "line"),
    [("1\n1\n0 0\n", 1), ("0\n1\n0\n", 3), ("0\n1\n0 0 0\n", 3), ("0\n1\nx 0\n", 3)],
)
def test_malformed_file(tmp_path, text, line):
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    path.write_text(text)
    with pytest.raises(CheckpointError) as info:
        LeaderEpochFileCache(path)
    assert (info.value.file, info.value.line) == (str(path), line)


def test_negative_entry_in_file(tmp_path):
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    path.write_text("0\n1\n-1 0\n")
    with pytest.raises(CheckpointError, match="invalid partition leader epoch") as info:
        LeaderEpochFileCache(path)
    assert info.value.file == str(path)


def test_clear(tmp_path):
    cache = _cache(tmp_path, (1, 1))
    cache.flush()
    cache.clear()
    cache.flush()
    assert cache.path.read_text() == "0\n0\n"


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 8), st.integers(0, 60)), max_size=25))
def test_assign_keeps_both_columns_strictly_increasing(tmp_path_factory, assignments):
    cache = LeaderEpochFileCache(tmp_path_factory.mktemp("e") / LEADER_EPOCH_CHECKPOINT)
    for epoch, offset in assignments:
        before = cache.entries
        changed = cache.assign(epoch, offset)
        entries = cache.entries
        assert all(a[0] < b[0] and a[1] < b[1] for a, b in pairwise(entries))
        if changed:
            assert entries[-1] == (epoch, offset)
            assert entries[:-1] == before[: len(entries) - 1]  # only trailing entries removed
        else:
            assert entries == before and before[-1][0] == epoch and before[-1][1] <= offset
    cache.flush()
    assert LeaderEpochFileCache(cache.path).entries == cache.entries


def _corpus_files() -> list[Path]:
    return sorted(CORPUS.rglob(LEADER_EPOCH_CHECKPOINT)) if CORPUS.is_dir() else []


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"Kafka corpus not found at {CORPUS}")
def test_reads_every_corpus_leader_epoch_checkpoint():
    files = _corpus_files()
    assert len(files) > 100
    multi = 0
    for path in files:
        lines = path.read_text().splitlines()
        expected = [tuple(int(x) for x in line.split()) for line in lines[2:]]
        cache = LeaderEpochFileCache(path)
        assert cache.entries == expected, path
        assert not cache.dirty
        multi += len(expected) > 1
    assert multi > 0  # some partitions saw several leaders
