"""The cleaner's whole-chunk numba path (``storage.cleaner.chunk``) against the per-batch and
record-at-a-time paths, on plain data where it does the work itself."""

from __future__ import annotations

import random
from pathlib import Path

import crc32c as crc32c_ref
import numpy as np
import pytest
from cleaner_fixtures import ManualClock, compact_config, open_log
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kafkatier.storage.cleaner import fast as cleaner_fast
from kafkatier.storage.cleaner.compact import compact_log
from kafkatier.storage.cleaner.kernels.chunks import crc32c
from kafkatier.storage.cleaner.kernels.murmur import KEY_SEED, murmur3_words
from kafkatier.storage.cleaner.kernels.offset_map import MD5, MURMUR3, OffsetMap, hash_keys
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.log import Log
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record
from kafkatier.storage.verify.paths import verify_paths
from kafkatier.storage.wire import Codec


@settings(max_examples=50, deadline=None)
@given(data=st.binary(max_size=300), cut=st.integers(0, 300))
def test_crc32c_is_the_crc32c_packages(data: bytes, cut: int) -> None:
    start = min(cut, len(data))
    buf = np.frombuffer(data + b"\0", dtype=np.uint8)  # never an empty buffer
    assert crc32c(buf, start, len(data)) == crc32c_ref.crc32c(data[start:])


def _plain_log(
    path: Path, clock: ManualClock, log_append_time: bool, map_slots: int = 40,
    codec: Codec = Codec.NONE,
) -> tuple[LogDirectory, Log]:  # fmt: skip
    """Uncompressed, non-transactional batches: idempotent producers (whose last batches must
    stay, emptied), tombstones, keyless records, headers, timestamps out of order."""
    settings_ = {"segment_bytes": 4000, "delete_retention_ms": 100,
                 "log_cleaner_dedupe_buffer_size": 24 * map_slots}  # fmt: skip
    if log_append_time:
        settings_["message_timestamp_type"] = "LogAppendTime"
    log_dir, log = open_log(path, compact_config(**settings_), clock)
    rng = random.Random(11)
    sequences = {7: 0, 8: 0}
    for i in range(150):
        records = [
            Record(j, clock.now + rng.randint(-500, 500),
                   None if rng.random() < 0.05 else b"k%d" % rng.randint(0, 60),
                   None if rng.random() < 0.15 else b"v%d" % i * rng.randint(1, 3),
                   (("h", b"x"),) if rng.random() < 0.1 else ())
            for j in range(rng.randint(1, 8))
        ]  # fmt: skip
        pid = rng.choice([-1, -1, 7, 8])
        log.append(build_batch(records, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                               base_sequence=sequences[pid] if pid >= 0 else -1,
                               codec=rng.choice([Codec.NONE, codec])))  # fmt: skip
        if pid >= 0:
            sequences[pid] += len(records)
        clock.now += 5
    log.roll()
    return log_dir, log


@pytest.mark.parametrize(
    ("log_append_time", "map_slots", "codec"),
    [(False, 40, Codec.NONE), (True, 40, Codec.NONE), (False, 4000, Codec.NONE),
     (False, 40, Codec.LZ4), (True, 4000, Codec.ZSTD), (False, 4000, Codec.GZIP),
     (False, 40, Codec.SNAPPY)],
)  # fmt: skip
def test_chunk_path_writes_what_the_other_paths_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, log_append_time: bool, map_slots: int,
    codec: Codec,
) -> None:  # fmt: skip
    """40 slots: several passes, each map filling part-way. 4000: one pass, a table sized to
    the offsets and the superseded bits (``OffsetMap.clear``) in use by the chunk path. A codec:
    half the batches compressed, which the chunk path inflates (``storage.cleaner.compressed``); the
    rebuilt batches' records compress to the same bytes on every path, so the logs compare
    byte for byte."""
    outputs = []
    for path in ("chunks", "batches", "records"):
        if path != "chunks":
            monkeypatch.setattr(cleaner_fast, "ENABLED", False)
        if path == "records":
            monkeypatch.setattr(cleaner_fast, "scan", lambda _batch: None)
        clock = ManualClock()
        log_dir, log = _plain_log(tmp_path / path, clock, log_append_time, map_slots, codec)
        results = [compact_log(log, now_ms=clock.now, first_dirty_offset=None)]
        results.append(compact_log(log, now_ms=clock.now + 1000, first_dirty_offset=0))
        outputs.append(([s.log_path.read_bytes() for s in log.segments], results))
        log_dir.close()
        assert verify_paths([tmp_path / path]) == []
    assert outputs[0] == outputs[1] == outputs[2]
    first, second = outputs[0][1]
    assert (first.passes > 1) == (map_slots == 40)
    assert first.tombstones_kept > 0 and second.tombstones_dropped > 0


def test_murmur3_passes_smhashers_verification() -> None:
    """SMHasher's VerificationTest (KeySetTest.cpp): key i = bytes 0..i-1 hashed with seed
    256 - i, the 256 digests hashed with seed 0; the first 4 bytes, little-endian, must be
    MurmurHash3_x64_128's published verification value 0x6384BA69 (SMHasher main.cpp)."""
    key = np.arange(256, dtype=np.uint8)
    digests = b"".join(
        int(h).to_bytes(8, "little")
        for i in range(256)
        for h in murmur3_words(key, 0, i, 256 - i)
    )
    h1, _ = murmur3_words(np.frombuffer(digests, dtype=np.uint8), 0, len(digests), 0)
    assert int(h1) & 0xFFFFFFFF == 0x6384BA69


@settings(max_examples=30, deadline=None)
@given(keys=st.lists(st.binary(max_size=40), max_size=12).map(lambda ks: [b"", *ks]))
@example(keys=[b"", b"\x00"])  # b"\x00" hashes to all zeros under seed 1: it must stay findable
def test_murmur3_map_keys_match_its_digests(keys: list[bytes]) -> None:
    by_key = OffsetMap(24 * 64, 0.9, MURMUR3)
    offsets = np.arange(len(keys), dtype=np.int64)
    by_key.put_hashes(hash_keys(keys, MURMUR3), offsets)
    for key in keys:
        h1, h2 = murmur3_words(np.frombuffer(key + b"\0", dtype=np.uint8), 0, len(key), KEY_SEED)
        if h1 == 0 and h2 == 0:  # all-zero would be an empty slot: the map uses (1, 0)
            h1 = np.uint64(1)
        digest = int(h1).to_bytes(8, "little") + int(h2).to_bytes(8, "little")
        assert bytes(hash_keys([key], MURMUR3)[0]) == digest
        assert by_key.get(key) == max(i for i, k in enumerate(keys) if k == key)


def test_output_is_the_same_with_kafkas_md5_digest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The digest only places keys in the in-memory map: MD5 (Kafka's) and MurmurHash3 (ours)
    clean to the same bytes (no collisions among so few keys)."""
    from kafkatier.storage.cleaner import compact as cleaner
    outputs = []
    for digest in (MURMUR3, MD5):
        monkeypatch.setattr(cleaner, "MURMUR3", digest)
        clock = ManualClock()
        log_dir, log = _plain_log(tmp_path / str(digest), clock, False)
        results = [compact_log(log, now_ms=clock.now, first_dirty_offset=None)]
        results.append(compact_log(log, now_ms=clock.now + 1000, first_dirty_offset=0))
        outputs.append(([s.log_path.read_bytes() for s in log.segments], results))
        log_dir.close()
    assert outputs[0] == outputs[1]
