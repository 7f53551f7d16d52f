"""The cleaner's offset map against a plain-Python transcription of Kafka's SkimpyOffsetMap."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkatier.storage.cleaner.kernels.batches import map_batch
from kafkatier.storage.cleaner.kernels.offset_map import (
    BYTES_PER_ENTRY,
    MD5,
    MURMUR3,
    OffsetMap,
    digest_words,
    hash_keys,
)
from kafkatier.storage.cleaner.kernels.records import FIELDS, KEY_LEN, KEY_POS, OFF_DELTA, md5_keys


class KafkaSkimpyModel:
    """SkimpyOffsetMap.java in Python: a bytearray of 24-byte entries, Java int arithmetic."""

    def __init__(self, memory: int, load_factor: float) -> None:
        self.slots = memory // 24
        self.buf = bytearray(self.slots * 24)
        self.size = 0
        self.max_desired = int(self.slots * load_factor)

    def _position(self, h: bytes, attempt: int) -> int:
        probe = int.from_bytes(h[min(attempt, 12) : min(attempt, 12) + 4], "big", signed=True)
        probe += max(0, attempt - 12)
        probe = (probe + 2**31) % 2**32 - 2**31
        probe = 0 if probe == -(2**31) else abs(probe)
        return (probe % self.slots) * 24

    def put(self, key: bytes, offset: int) -> None:
        h = hashlib.md5(key).digest()
        attempt = 0
        pos = self._position(h, attempt)
        while self.buf[pos : pos + 16] != bytes(16):
            if self.buf[pos : pos + 16] == h:
                self.buf[pos + 16 : pos + 24] = offset.to_bytes(8, "big")
                return
            attempt += 1
            pos = self._position(h, attempt)
        self.buf[pos : pos + 16] = h
        self.buf[pos + 16 : pos + 24] = offset.to_bytes(8, "big")
        self.size += 1

    def get(self, key: bytes) -> int:
        h = hashlib.md5(key).digest()
        attempt = 0
        while True:
            pos = self._position(h, attempt)
            if self.buf[pos : pos + 16] == bytes(16):
                return -1
            if self.buf[pos : pos + 16] == h:
                return int.from_bytes(self.buf[pos + 16 : pos + 24], "big")
            attempt += 1


def test_memory_is_the_budget_at_24_bytes_per_slot() -> None:
    m = OffsetMap(24 * 1000 + 23, 0.9)
    assert m.slots == 1000
    assert m.nbytes == 1000 * BYTES_PER_ENTRY
    assert m.max_desired_size == 900
    with pytest.raises(ValueError):
        OffsetMap(23)


def test_hash_keys_are_md5() -> None:
    hashes = hash_keys([b"a", b""])
    assert bytes(hashes[0]) == hashlib.md5(b"a").digest()
    assert bytes(hashes[1]) == hashlib.md5(b"").digest()


def test_later_put_wins_and_absent_is_minus_one() -> None:
    m = OffsetMap(24 * 64)
    assert m.put(b"k", 5) and m.put(b"k", 9)
    assert m.get(b"k") == 9
    assert m.get(b"other") == -1
    assert m.size == 1


def test_stops_at_load_factor_even_for_known_keys() -> None:
    """Kafka checks the size before every put, so a full map refuses even an existing key."""
    m = OffsetMap(24 * 10, 0.5)
    keys = [b"k%d" % i for i in range(8)]
    offsets = np.arange(8, dtype=np.int64)
    assert m.put_hashes(hash_keys(keys), offsets) == 5
    assert m.size == 5
    assert not m.put(b"k0", 100)
    assert m.get(b"k0") == 0


def test_clear_forgets_everything() -> None:
    m = OffsetMap(24 * 16)
    m.put(b"a", 1)
    m.update_latest_offset(7)
    m.clear()
    assert (m.get(b"a"), m.size, m.latest_offset) == (-1, 0, -1)


@settings(max_examples=60, deadline=None)
@given(
    slots=st.integers(1, 40),
    ops=st.lists(st.tuples(st.binary(max_size=6), st.integers(0, 2**40)), max_size=60),
)
def test_same_slots_and_answers_as_kafkas_map(slots: int, ops: list[tuple[bytes, int]]) -> None:
    ours, kafka = OffsetMap(slots * 24, 0.9), KafkaSkimpyModel(slots * 24, 0.9)
    for key, offset in ops:
        if kafka.size >= kafka.max_desired:
            assert not ours.put(key, offset)
            continue
        kafka.put(key, offset)
        assert ours.put(key, offset)
    assert ours.size == kafka.size
    raw = np.frombuffer(bytes(kafka.buf), dtype=np.uint8).reshape(slots, 24)
    assert bytes(ours.hashes.tobytes()) == bytes(raw[:, :16].tobytes())
    for key, _ in ops:
        assert ours.get(key) == kafka.get(key)


@settings(max_examples=40, deadline=None)
@given(keys=st.lists(st.binary(max_size=150), max_size=20))
def test_numba_md5_is_hashlibs(keys: list[bytes]) -> None:
    buf = np.frombuffer(b"".join(keys) + b"\0", dtype=np.uint8)  # never an empty buffer
    lengths = np.array([len(k) for k in keys], dtype=np.int64)
    positions = (np.cumsum(lengths) - lengths).astype(np.int64)
    expected = [hashlib.md5(k).digest() for k in keys]
    assert [bytes(d) for d in md5_keys(buf, positions, lengths)] == expected
    words = digest_words(buf, positions, lengths, MD5)  # the map's path, as (n, 2) words
    assert [bytes(w.astype("<u8").tobytes()) for w in words] == expected


def test_key_slice_puts_and_gets_match_digest_ones() -> None:
    keys = [b"k%d" % (i % 13) for i in range(40)]
    buf = np.frombuffer(b"".join(keys), dtype=np.uint8)
    lengths = np.array([len(k) for k in keys], dtype=np.int64)
    positions = (np.cumsum(lengths) - lengths).astype(np.int64)
    offsets = np.arange(40, dtype=np.int64) * 3
    by_slice, by_digest = OffsetMap(24 * 20, 0.5), OffsetMap(24 * 20, 0.5)
    assert by_slice.put_keys(buf, positions, lengths, offsets) == 10  # stops at 20 x 0.5
    assert by_digest.put_hashes(hash_keys(keys), offsets) == 10
    assert np.array_equal(by_slice.hashes, by_digest.hashes)
    got = by_slice.get_keys(buf, positions, lengths)
    assert list(got) == list(by_digest.get_hashes(hash_keys(keys)))


@settings(max_examples=40, deadline=None)
@given(keys=st.lists(st.one_of(st.none(), st.binary(max_size=80)), max_size=23))
def test_four_lane_md5_is_hashlibs(keys: list[bytes | None]) -> None:
    from kafkatier.storage.cleaner.kernels.md5 import md5_many

    buf = np.frombuffer(b"".join(k or b"" for k in keys) + b"\0", dtype=np.uint8)
    lengths = np.array([-1 if k is None else len(k) for k in keys], dtype=np.int64)
    positions = (np.cumsum(np.maximum(lengths, 0)) - np.maximum(lengths, 0)).astype(np.int64)
    out = np.zeros((len(keys), 2), dtype=np.uint64)
    md5_many(buf, positions, lengths, out)
    for k, words in zip(keys, out, strict=True):
        expected = b"\0" * 16 if k is None else hashlib.md5(k).digest()
        assert words.astype("<u8").tobytes() == expected


def test_clear_sizes_the_table_to_the_offsets_but_keeps_kafkas_capacity() -> None:
    """A map for 100 offsets needs at most 100 keys: a table of 100 / 0.9 + 2 rows holds them
    without filling up, while the budget's capacity (Kafka's) is what the size check uses
    once the table has the budget's slots again."""
    m = OffsetMap(24 * 10_000, 0.9, MURMUR3)
    m.clear(max_keys=100, start=50)
    assert m.table.shape[0] == int(100 / 0.9) + 2
    assert m.max_desired_size >= 100
    assert m.superseded.shape[0] == 13 and m.superseded_start == 50  # one bit per offset
    keys = [b"k%d" % i for i in range(100)]
    assert m.put_hashes(hash_keys(keys, MURMUR3), np.arange(50, 150, dtype=np.int64)) == 100
    assert [m.get(k) for k in keys] == list(range(50, 150))
    m.clear(max_keys=1_000_000)
    assert m.table.shape[0] == m.slots == 10_000
    assert m.max_desired_size == m.desired_size == 9000
    assert m.superseded.shape[0] == 0  # no room left in the budget for the bits
    m.clear()
    assert m.table.shape[0] == 10_000


@settings(max_examples=40, deadline=None)
@given(keys=st.lists(st.integers(0, 15), max_size=80))
def test_superseded_bits_are_the_records_below_their_keys_entry(keys: list[int]) -> None:
    """Through the cleaner's put kernel: a record's bit is set exactly when a later record of
    the same key was put, i.e. when its offset is below the key's entry."""
    start = 1000
    m = OffsetMap(24 * 4096, 0.9, MURMUR3)
    m.clear(max_keys=len(keys), start=start)
    raw = [b"key-%d" % k for k in keys]
    buf = np.frombuffer(b"".join(raw) + b"\0", dtype=np.uint8)
    lengths = np.array([len(k) for k in raw], dtype=np.int64)
    rows = np.zeros((len(keys), FIELDS), dtype=np.int64)
    rows[:, KEY_POS] = np.cumsum(lengths) - lengths
    rows[:, KEY_LEN] = lengths
    rows[:, OFF_DELTA] = np.arange(len(keys))
    complete, m.size, last_put = map_batch(m.table, buf, rows, start, start, m.size,
                                           m.max_desired_size, m.digest, m.superseded,
                                           m.superseded_start)  # fmt: skip
    assert complete and last_put == -1
    for i, key in enumerate(raw):
        marked = bool(m.superseded[i >> 3] >> (i & 7) & 1)
        assert marked == (start + i < m.get(key))
