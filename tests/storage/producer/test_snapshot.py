"""The ``.snapshot`` file format: §13.8 vectors, corruption handling, atomic writes, real files."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkatier.storage.errors import CorruptSnapshotError
from kafkatier.storage.producer.snapshot import (
    SnapshotEntry,
    SnapshotFile,
    decode_snapshot,
    encode_snapshot,
    list_snapshot_files,
    read_snapshot,
    snapshot_path,
    write_snapshot,
)

VECTORS = json.loads(
    (
        Path(__file__).resolve().parents[2] / "data" / "vectors" / "producer_snapshot.json"
    ).read_text()
)
CORPUS = Path(__file__).resolve().parents[3].parent / "shared" / "kafka-corpus"
SNAPSHOT_CASES = VECTORS["snapshots"]


def _independent_decode(data: bytes) -> list[tuple[int, ...]]:
    """Decode by the byte offsets of kafka-format.md §7.1, without wire.SNAPSHOT_ENTRY."""

    def field(pos: int, size: int) -> int:
        return int.from_bytes(data[pos : pos + size], "big", signed=True)

    count = field(6, 4)
    rows = []
    for i in range(count):
        base = 10 + 46 * i
        layout = [(0, 8), (8, 2), (10, 4), (14, 8), (22, 4), (26, 8), (34, 4), (38, 8)]
        rows.append(tuple(field(base + off, size) for off, size in layout))
    return rows


def _entry(**fields: int) -> SnapshotEntry:
    return SnapshotEntry(**fields)


@pytest.mark.parametrize("case", SNAPSHOT_CASES, ids=[c["name"] for c in SNAPSHOT_CASES])
def test_vector_encodes_byte_exact(case: dict[str, Any]) -> None:
    entries = [_entry(**e) for e in case["entries"]]
    data = encode_snapshot(entries)
    assert data.hex() == case["hex"]
    assert len(data) == case["size"]


@pytest.mark.parametrize("case", SNAPSHOT_CASES, ids=[c["name"] for c in SNAPSHOT_CASES])
def test_vector_decodes(case: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "v.snapshot"
    path.write_bytes(bytes.fromhex(case["hex"]))
    assert read_snapshot(path) == [_entry(**e) for e in case["entries"]]


@pytest.mark.parametrize("case", SNAPSHOT_CASES, ids=[c["name"] for c in SNAPSHOT_CASES])
def test_write_snapshot_file_bytes(case: dict[str, Any], tmp_path: Path) -> None:
    path = snapshot_path(tmp_path, 10)
    write_snapshot(path, [_entry(**e) for e in case["entries"]])
    assert path.read_bytes().hex() == case["hex"]


def test_crc_vector_is_crc32c_of_the_count() -> None:
    vec = VECTORS["crc32c_of_zero_count"]
    assert crc32c.crc32c(bytes.fromhex(vec["input_hex"])) == vec["crc"]
    empty = bytes.fromhex(SNAPSHOT_CASES[0]["hex"])
    assert struct.unpack_from(">I", empty, 2)[0] == vec["crc"]


ENTRIES = st.builds(
    SnapshotEntry,
    producer_id=st.integers(-(2**63), 2**63 - 1),
    producer_epoch=st.integers(-(2**15), 2**15 - 1),
    last_sequence=st.integers(-(2**31), 2**31 - 1),
    last_offset=st.integers(-1, 2**63 - 1),
    offset_delta=st.integers(-(2**31), 2**31 - 1),
    timestamp=st.integers(-(2**63), 2**63 - 1),
    coordinator_epoch=st.integers(-(2**31), 2**31 - 1),
    current_txn_first_offset=st.integers(-1, 2**63 - 1),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(ENTRIES, max_size=12))
def test_round_trip_and_independent_layout(entries: list[SnapshotEntry]) -> None:
    data = encode_snapshot(entries)
    assert len(data) == 10 + 46 * len(entries)
    assert decode_snapshot(data) == entries
    assert _independent_decode(data) == [
        (
            e.producer_id,
            e.producer_epoch,
            e.last_sequence,
            e.last_offset,
            e.offset_delta,
            e.timestamp,
            e.coordinator_epoch,
            e.current_txn_first_offset,
        )
        for e in entries
    ]
    assert struct.unpack_from(">I", data, 2)[0] == crc32c.crc32c(data[6:])


ONE = bytes.fromhex(SNAPSHOT_CASES[1]["hex"])


def _expect_corrupt(data: bytes, tmp_path: Path, match: str) -> CorruptSnapshotError:
    path = tmp_path / "00000000000000000007.snapshot"
    path.write_bytes(data)
    with pytest.raises(CorruptSnapshotError, match=match) as info:
        read_snapshot(path)
    assert info.value.context["file"] == str(path)
    return info.value


@pytest.mark.parametrize("version", [0, 2, -1])
def test_unknown_version_rejected(version: int, tmp_path: Path) -> None:
    _expect_corrupt(struct.pack(">h", version) + ONE[2:], tmp_path, "version")


@pytest.mark.parametrize("position", [6, 9, 10, 17, 30, 55])
def test_flipped_byte_fails_crc(position: int, tmp_path: Path) -> None:
    data = bytearray(ONE)
    data[position] ^= 0x01
    if position < 10:  # a changed count no longer matches the length: also corrupt
        _expect_corrupt(bytes(data), tmp_path, "entries|CRC")
    else:
        _expect_corrupt(bytes(data), tmp_path, "CRC")


def test_stored_crc_mismatch(tmp_path: Path) -> None:
    data = bytearray(ONE)
    data[3] ^= 0x80
    err = _expect_corrupt(bytes(data), tmp_path, "CRC")
    assert err.context["position"] == 2


@pytest.mark.parametrize("length", [0, 1, 2, 9, 10, 11, 33, 55])
def test_truncated_rejected(length: int, tmp_path: Path) -> None:
    _expect_corrupt(ONE[:length], tmp_path, "header|entries")


def test_trailing_bytes_rejected(tmp_path: Path) -> None:
    _expect_corrupt(ONE + b"\x00", tmp_path, "entries")


def test_negative_count_rejected(tmp_path: Path) -> None:
    data = bytearray(bytes.fromhex(SNAPSHOT_CASES[0]["hex"]))
    struct.pack_into(">i", data, 6, -1)
    struct.pack_into(">I", data, 2, crc32c.crc32c(bytes(data[6:])))
    _expect_corrupt(bytes(data), tmp_path, "entries")


def test_write_replaces_atomically_and_leaves_no_temp(tmp_path: Path) -> None:
    path = snapshot_path(tmp_path, 3)
    entry = _entry(**SNAPSHOT_CASES[1]["entries"][0])
    write_snapshot(path, [entry, entry])
    write_snapshot(path, [entry], sync=False)
    assert path.read_bytes() == ONE
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_snapshot_path_and_file_offset(tmp_path: Path) -> None:
    path = snapshot_path(tmp_path, 42)
    assert path.name == "00000000000000000042.snapshot"
    assert SnapshotFile(path).offset == 42
    assert SnapshotFile(path, 7).offset == 7


def test_snapshot_file_rename_and_delete(tmp_path: Path) -> None:
    path = snapshot_path(tmp_path, 5)
    path.write_bytes(ONE)
    snap = SnapshotFile(path)
    renamed = snap.rename_to_deleted()
    assert renamed == tmp_path / "00000000000000000005.snapshot.deleted"
    assert renamed.read_bytes() == ONE and not path.exists()
    assert snap.path == renamed
    assert SnapshotFile(path).rename_to_deleted() is None  # already gone
    assert snap.delete_if_exists() is True
    assert snap.delete_if_exists() is False


def test_list_snapshot_files_only_takes_snapshot_names(tmp_path: Path) -> None:
    for offset in (30, 2, 100):
        snapshot_path(tmp_path, offset).write_bytes(ONE)
    (tmp_path / "00000000000000000001.snapshot.deleted").write_bytes(ONE)
    (tmp_path / "00000000000000000003.snapshot.tmp").write_bytes(ONE)
    (tmp_path / "00000000000000000004.log").write_bytes(b"")
    (tmp_path / "notes.snapshot").write_bytes(b"")
    (tmp_path / "00000000000000000009.snapshot").mkdir()
    assert [s.offset for s in list_snapshot_files(tmp_path)] == [2, 30, 100]
    assert list_snapshot_files(tmp_path / "missing") == []


def _corpus_snapshots() -> list[Path]:
    if not CORPUS.is_dir():
        pytest.skip(f"Kafka corpus not found at {CORPUS} (read-only shared data); skipping")
    return sorted(CORPUS.rglob("*.snapshot"))


def test_every_corpus_snapshot_parses_with_valid_crc() -> None:
    paths = _corpus_snapshots()
    asabou = [p for p in paths if "asabou__kafka-demo" in p.parts]
    assert len(asabou) == 201, "the corpus README promises 201 snapshots in asabou__kafka-demo"
    total_entries = 0
    for path in paths:
        entries = read_snapshot(path)  # raises on bad version, CRC or length
        end = SnapshotFile(path).offset
        total_entries += len(entries)
        for e in entries:
            assert e.last_offset < end, path
            assert e.current_txn_first_offset < end, path
            assert e.producer_id >= 0 and e.producer_epoch >= 0, path
    assert total_entries > 10_000  # asabou alone holds ~12k idempotent producers


def test_corpus_snapshots_reencode_to_kafkas_bytes() -> None:
    """Our encoder reproduces every byte Kafka wrote, given Kafka's entry order."""
    for path in _corpus_snapshots():
        data = path.read_bytes()
        assert encode_snapshot(decode_snapshot(data)) == data, path
