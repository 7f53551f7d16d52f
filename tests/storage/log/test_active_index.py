"""The active segment's offset index read as a hint while its writer appends
(``active_index.walk_start``): a checked entry's position, else 0, never a position that is not
the start of a batch at or before the one holding the offset."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kafkatier.storage.log.active_index import walk_start
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.log import Log
from kafkatier.storage.log.readonly import ReadOnlyPartition
from kafkatier.storage.log.tail import LogFile
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record
from kafkatier.storage.wire import OFFSET_INDEX_ENTRY


def append(log: Log, first: int, batches: int) -> None:
    """Batches of 3 records (about 1.6 KB), then a flush, as the sink's every micro-batch (the
    index's entries are in its file from then on)."""
    for i in range(first, first + batches):
        records = [Record(3 * i + j, 1000, b"k%d" % i, b"v" * 500) for j in range(3)]
        log.append(build_batch(records))
    log.flush()


def starts(tmp_path: Path, offsets: list[int]) -> tuple[list[int], list[tuple[int, int, int]]]:
    """(walk_start of each offset, (position, base, last) of each batch) of t-0's last segment,
    read as a Spark task reads it while the writer is open."""
    with ReadOnlyPartition(tmp_path, "t", 0) as part, part.last_log() as log:
        base = part.bases[-1]
        found = [walk_start(log, part.file(base, ".index"), base, o) for o in offsets]
        return found, [(h.at.position, h.at.base_offset, h.at.last_offset) for h in log.headers()]


def holds(found: int, offset: int, batches: list[tuple[int, int, int]]) -> bool:
    """``found`` starts a batch at or before the first batch whose last offset is >= offset."""
    first = next(p for p, _b, last in batches if last >= offset)
    return found in {p for p, _b, _l in batches} and found <= first


def test_the_written_entries_of_an_open_segment_are_used(tmp_path: Path) -> None:
    with LogDirectory(tmp_path) as ld:
        log = ld.get_or_create("t", 0)
        append(log, 0, 200)
        offsets = [0, 1, 2, 3, 100, 301, 598, 599, 600, 10_000]
        found, batches = starts(tmp_path, offsets)
        assert all(holds(f, o, batches) for f, o in zip(found, offsets, strict=True) if o < 600)
        assert found[0] == 0 and min(found[4:]) > 0  # deep offsets skip most of the segment
        first = next(p for p, _b, last in batches if last >= 598)
        assert first - found[offsets.index(598)] <= 4096 + 2 * batches[1][0]  # index.interval
        log.roll()
        append(log, 200, 40)  # a new active segment: its own index
        offsets = [600, 650, 719]
        found, batches = starts(tmp_path, offsets)
        assert found[0] == 0
        assert all(holds(f, o, batches) for f, o in zip(found, offsets, strict=True))


def test_an_entry_the_log_does_not_confirm_is_not_used(tmp_path: Path) -> None:
    with LogDirectory(tmp_path) as ld:
        append(ld.get_or_create("t", 0), 0, 200)
    index = tmp_path / "t-0" / "00000000000000000000.index"
    log_file = tmp_path / "t-0" / "00000000000000000000.log"
    found, _batches = starts(tmp_path, [500])
    assert found[0] > 0
    entries = index.read_bytes()
    slot = next(i for i in range(0, len(entries), 8)
                if OFFSET_INDEX_ENTRY.unpack_from(entries, i)[1] == found[0])  # fmt: skip
    relative, position = OFFSET_INDEX_ENTRY.unpack_from(entries, slot)
    for wrong in ((relative, position + 12), (relative + 1, position), (relative, 1 << 30)):
        bad = bytearray(entries)
        OFFSET_INDEX_ENTRY.pack_into(bad, slot, *wrong)  # mid-batch, another offset, past the end
        index.write_bytes(bad)
        assert starts(tmp_path, [500])[0] == [0]
    index.write_bytes(entries)
    os.truncate(log_file, found[0] + 30)  # the entry written before its batch reached the log
    assert starts(tmp_path, [500])[0] == [0]
    index.unlink()
    assert starts(tmp_path, [500])[0] == [0]
    index.mkdir()
    assert starts(tmp_path, [500])[0] == [0]


@pytest.mark.parametrize("cut", [0, 5, 8, 13])
def test_a_short_or_zeroed_index_ends_the_written_prefix(tmp_path: Path, cut: int) -> None:
    """Entries not written yet are zero (a preallocated file), a torn last entry is short."""
    with LogDirectory(tmp_path) as ld:
        append(ld.get_or_create("t", 0), 0, 200)
    index = tmp_path / "t-0" / "00000000000000000000.index"
    entries = index.read_bytes()
    index.write_bytes(entries[:cut] + bytes(4096))
    found, batches = starts(tmp_path, [500])
    assert holds(found[0], 500, batches) and (found[0] > 0) == (cut >= 8)
    with LogFile(str(tmp_path / "t-0" / "00000000000000000000.log")) as log:
        assert walk_start(log, str(index), 0, 500) == found[0]


def test_the_log_end_is_read_from_the_last_entry_on(tmp_path: Path, framed: list[int]) -> None:
    """``ReadOnlyPartition.log_end_offset`` (the sidecar's, ``status``', a
    ``read_uncommitted`` plan's) frames the active segment from its index's last entry, not
    from 0, and finds the writer's end."""
    with LogDirectory(tmp_path) as ld:
        log = ld.get_or_create("t", 0)
        append(log, 0, 200)
        append(log, 200, 3)
        with ReadOnlyPartition(tmp_path, "t", 0) as part:
            assert part.log_end_offset() == log.log_end_offset == 609
        found, batches = starts(tmp_path, [608])
        assert framed[0] == found[0] > batches[len(batches) // 2][0]
