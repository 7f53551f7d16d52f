"""Chunked reads of a segment (kafkatier.storage.record.records.chunked_batches: the cleaner's of
local segments, remote compaction's of objects): every batch once, in order, at its position in
the object; a corrupt one named at that position."""

from __future__ import annotations

import pytest

from kafkatier.storage.errors import CorruptRecordError
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record
from kafkatier.storage.record.records import chunked_batches


def _segment() -> tuple[bytes, list[int]]:
    batches = [build_batch([Record(0, 1_700_000_000_000, b"k%d" % i, b"v" * (i % 50))])
               for i in range(200)]  # fmt: skip
    starts = [sum(len(b) for b in batches[:i]) for i in range(len(batches))]
    return b"".join(batches), starts


@pytest.mark.parametrize("chunk", [100, 1000, 1 << 20])
def test_batches_come_at_their_positions_in_the_object(chunk: int) -> None:
    data, starts = _segment()
    found = list(chunked_batches(lambda at, n: data[at : at + n], len(data), 0, chunk, "obj"))
    assert [b.position for b in found] == starts
    assert [b.base_offset for b in found] == [0] * len(starts)


def test_a_corrupt_batch_in_a_later_chunk_is_named_at_its_position() -> None:
    data, starts = _segment()
    bad = bytearray(data)
    at = starts[150]
    bad[at + 8 : at + 12] = (5).to_bytes(4, "big")  # a length below any batch's
    with pytest.raises(CorruptRecordError) as raised:
        list(chunked_batches(lambda p, n: bytes(bad[p : p + n]), len(bad), 0, 1000, "obj"))
    assert raised.value.context == {"file": "obj", "position": at}


@pytest.mark.parametrize("cut", ["inside-a-batch", "inside-its-header"])
@pytest.mark.parametrize("chunk", [100, 1000, 1 << 20])
def test_a_segment_that_ends_inside_a_batch_is_refused(cut: str, chunk: int) -> None:
    """A closed segment ends on a batch boundary; one that does not is damaged, and its last
    records were dropped unread (the cleaner then rewrote the segment without them). Kafka's
    cleaner refuses such a segment ("Log segment may be corrupt"). A segment still being
    written (``growing``) just ends there."""
    data, starts = _segment()
    at = starts[120]
    end = at + (30 if cut == "inside-a-batch" else 7)
    read = lambda p, n: data[p : min(p + n, end)]  # noqa: E731
    with pytest.raises(CorruptRecordError, match="may be corrupt") as raised:
        list(chunked_batches(read, end, 0, chunk, "obj"))
    assert raised.value.context == {"file": "obj", "position": at}
    found = list(chunked_batches(read, end, 0, chunk, "obj", growing=True))
    assert [b.position for b in found] == starts[:120]


def test_a_batch_claiming_more_bytes_than_the_segment_holds_is_refused() -> None:
    data, starts = _segment()
    bad = bytearray(data)
    at = starts[40]
    bad[at + 8 : at + 12] = (1 << 20).to_bytes(4, "big")
    with pytest.raises(CorruptRecordError, match="where") as raised:
        list(chunked_batches(lambda p, n: bytes(bad[p : p + n]), len(bad), 0, 1000, "obj"))
    assert raised.value.context == {"file": "obj", "position": at}
