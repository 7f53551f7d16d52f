"""The driver's sequence assignment and the staging files, without Spark (kafkatier.sink.stage).

Batches are encoded as an executor does (provisional base sequence 0), then given their real
sequences; kafka-python's independent reader checks the fields and the rewritten CRC.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch

from kafkatier.sink.append import check_all, read_pieces
from kafkatier.sink.pieces import Encoded, PartitionSpans
from kafkatier.sink.stage import (
    LoadBuffers,
    StagingFiles,
    assign_sequences,
    batch_place,
    read_spans,
    remove_leftovers,
    sink_staging_root,
    staging_wanted,
    task_file,
)
from kafkatier.storage.arrow.codec import encode_arrow
from kafkatier.storage.errors import CorruptRecordError, InvalidRecordError
from kafkatier.storage.log.validator import parse_incoming
from kafkatier.storage.native import native
from kafkatier.storage.producer.entry import AppendOrigin
from kafkatier.storage.wire import INT32_MAX, Codec

PRODUCER_ID = 77


def encoded(rows: int, codec: Codec = Codec.LZ4, max_records: int = 7) -> bytearray:
    table = pa.table({"value": [f"value-{i}".encode() for i in range(rows)]})
    out = encode_arrow(
        table, codec=codec, producer_id=PRODUCER_ID, producer_epoch=3, base_sequence=0,
        transactional=True, timestamp=1_700_000_000_000, max_batch_records=max_records,
    )  # fmt: skip
    return bytearray(out.data)


def sequenced(buf: bytearray, first: int, source: str = "mem") -> tuple[int, int]:
    """What the driver does with a piece: the leader's parse, then sequences; (next, records)."""
    parsed = parse_incoming(buf, AppendOrigin.CLIENT, file=source)
    return assign_sequences(parsed, first), sum(b.records_count for b in parsed)


def batches(buf: bytearray) -> list[DefaultRecordBatch]:
    found = []
    position = 0
    while position < len(buf):
        size = 12 + int.from_bytes(buf[position + 8 : position + 12], "big")
        found.append(DefaultRecordBatch(bytes(buf[position : position + size])))
        position += size
    return found


@settings(max_examples=40, deadline=None)
@given(
    rows=st.integers(1, 60),
    first=st.one_of(st.integers(0, 1000), st.integers(INT32_MAX - 30, INT32_MAX)),
    codec=st.sampled_from([Codec.NONE, Codec.LZ4, Codec.ZSTD]),
)
def test_sequences_are_consecutive_from_the_first_and_crcs_stay_valid(
    rows: int, first: int, codec: Codec
) -> None:
    buf = encoded(rows, codec)
    next_seq, records = sequenced(buf, first)
    assert records == rows
    expected = first
    row = 0
    for batch in batches(buf):
        assert batch.validate_crc()
        assert batch.base_sequence == expected
        assert (batch.producer_id, batch.producer_epoch) == (PRODUCER_ID, 3)
        values = [r.value for r in batch]
        assert values == [f"value-{i}".encode() for i in range(row, row + len(values))]
        row += len(values)
        expected = (expected + batch.records_count) % (INT32_MAX + 1)  # Kafka wraps to 0
    assert next_seq == expected and row == rows


def test_a_corrupted_byte_is_detected_not_blessed_with_a_new_crc() -> None:
    buf = encoded(20, Codec.NONE)
    buf[len(buf) - 3] ^= 0x40  # inside the last batch's records
    with pytest.raises(CorruptRecordError, match="record batch is corrupt") as info:
        sequenced(buf, 5, source="stage-file")
    assert info.value.context["file"] == "stage-file"
    assert info.value.context["position"] > 0  # the earlier batches were fine


@pytest.mark.parametrize("cut", [1, 30, 70])
def test_a_truncated_piece_is_corruption(cut: int) -> None:
    buf = encoded(20)
    with pytest.raises(InvalidRecordError, match="partial batch") as info:
        sequenced(buf[: len(buf) - cut], 0, source="stage-file")
    assert info.value.context["file"] == "stage-file"


def test_staging_files_round_trip_and_a_missing_dir_names_the_fix(tmp_path: Path) -> None:
    root = sink_staging_root(tmp_path, tmp_path / "logs", "events")
    place = batch_place(tmp_path / "logs", "events", tmp_path, 4)
    batch_dir = Path(place.directory)
    assert batch_dir.parent == root and batch_dir.name.startswith("4-") and place.prefix == ""
    assert batch_place(tmp_path / "logs", "events", tmp_path, 4) != place  # a replay never
    path = task_file(place.directory, place.prefix, 1, 99)  # meets the old files
    path.write_bytes(b"0123456789")
    assert read_spans([(str(path), 2, 5), (str(path), 0, 2)]) == bytearray(b"2345601")
    with pytest.raises(CorruptRecordError, match="ended after 3 of 5"):
        read_spans([(str(path), 0, 1), (str(path), 7, 5)])
    with StagingFiles() as files:  # a loaded file is sliced, read or not, same bytes
        unloaded = bytes(files.view(str(path), 7, 3))
        files.load([str(path)])
        assert bytes(files.view(str(path), 7, 3)) == unloaded == b"789"
        with pytest.raises(CorruptRecordError, match="ended after 3 of 5"):
            files.view(str(path), 7, 5)
    with pytest.raises(FileNotFoundError, match="not visible on this executor; fix: pass"):
        task_file(str(tmp_path / "elsewhere"), "", 0, 0)
    other = sink_staging_root(tmp_path, tmp_path / "other-logs", "events")
    assert other != root  # two log dirs with the same sink id do not share scratch space
    place.remove()
    assert not batch_dir.exists()


def test_loaded_staging_files_are_rewritten_in_memory_never_on_disk(tmp_path: Path) -> None:
    """The driver gives loaded batches their sequences, CRCs and offsets in place; the staging
    files (the write-ahead log a replay reads again) keep the executors' bytes, an empty file
    loads as nothing, and each batch's fields come back as the rewrite left them."""
    first, second, empty = (tmp_path / f"task-{i}.kbatches" for i in range(3))
    first.write_bytes(encoded(30))
    second.write_bytes(encoded(12, Codec.ZSTD))
    empty.write_bytes(b"")
    before = {p: p.read_bytes() for p in (first, second)}
    with StagingFiles() as files:
        files.load([str(first), str(second), str(empty)])
        assert bytes(files.view(str(empty), 0, 0)) == b""
        pieces = [parse_incoming(files.view(str(p), 0, len(b)), AppendOrigin.CLIENT,
                                 file=str(p)) for p, b in before.items()]  # fmt: skip
        assert assign_sequences([b for piece in pieces for b in piece], 1000) == 1042
        rewritten = [bytes(files.view(str(p), 0, len(b))) for p, b in before.items()]
    assert {p: p.read_bytes() for p in before} == before
    found = [b for buf in rewritten for b in batches(bytearray(buf))]
    assert [b.base_sequence for b in found][:2] == [1000, 1007]
    assert all(b.validate_crc() for b in found) and sum(len(list(b)) for b in found) == 42


def test_a_sinks_batches_load_into_the_buffers_the_last_batch_used(tmp_path: Path) -> None:
    """Each batch's loads reuse what the batch before used (the smallest buffer that fits, a
    new one when none does), see only their own file's bytes, and keep nothing beyond what the
    last batch used."""
    small, large = tmp_path / "small.kbatches", tmp_path / "large.kbatches"
    buffers = LoadBuffers()
    small.write_bytes(b"a" * 100)
    large.write_bytes(b"b" * 1000)
    with StagingFiles(buffers=buffers) as files:
        files.load([str(large), str(small)])
        first = {p: files.view(p, 0, 1).obj for p in (str(small), str(large))}
    small.write_bytes(b"c" * 90)
    large.write_bytes(b"d" * 1300)  # larger than either buffer
    with StagingFiles(buffers=buffers) as files:
        files.load([str(small), str(large)])
        assert bytes(files.view(str(small), 0, 90)) == b"c" * 90
        assert bytes(files.view(str(large), 0, 1300)) == b"d" * 1300
        with pytest.raises(CorruptRecordError, match="ended after 90 of 91"):
            files.view(str(small), 0, 91)  # a reused buffer's tail is not the file's
        second = {p: files.view(p, 0, 1).obj for p in (str(small), str(large))}
    assert second[str(small)] is first[str(small)]  # the smallest that fits
    assert second[str(large)] is not first[str(large)]
    with StagingFiles(buffers=buffers) as files:
        files.load([str(small)])
        third = files.view(str(small), 0, 1).obj
    assert third is second[str(small)]
    assert buffers.kept_bytes == len(third)  # the large buffers this batch did not use go
    buffers.clear()
    assert buffers.kept_bytes == 0


def test_staging_files_in_the_log_dir_are_files_a_broker_ignores(tmp_path: Path) -> None:
    """By default a batch's staging files are regular files at the log dir's root, named for
    the sink; a new instance removes the sink's leftovers, not another sink's."""
    logs = tmp_path / "logs"
    logs.mkdir()
    place = batch_place(logs, "events", None, 7)
    assert place.directory == str(logs) and place.prefix.startswith("kafkatier-sink.events.wal.7-")
    files = [task_file(place.directory, place.prefix, t, 0) for t in range(3)]
    for path in files:
        path.write_bytes(b"x")
    other_sink = task_file(str(logs), batch_place(logs, "other", None, 7).prefix, 0, 0)
    other_sink.write_bytes(b"y")
    assert place.durable_dirs() == [str(logs)]
    place.remove()
    assert not any(p.exists() for p in files) and other_sink.exists()
    for path in files:
        path.write_bytes(b"x")  # a crashed instance's
    remove_leftovers(logs, "events", None)
    assert not any(p.exists() for p in files) and other_sink.exists()
    assert [p for p in logs.iterdir() if p.is_dir()] == []


def test_staging_default_follows_the_master() -> None:
    assert staging_wanted(None, "local[2]") and staging_wanted(None, "local-cluster[2,1,1024]")
    assert not staging_wanted(None, "spark://host:7077") and not staging_wanted(None, "")
    assert not staging_wanted(False, "local[2]")
    assert staging_wanted("/shared/scratch", "yarn") and staging_wanted(True, "yarn")


def test_a_corrupt_span_is_named_by_its_position_in_the_staging_file(tmp_path: Path) -> None:
    """The driver parses each partition's span from a slice of the staging file; the error
    still says where in the file the bad batch is, as a user would look with ``dump``."""
    first, second = encoded(10, Codec.NONE), encoded(10, Codec.NONE)
    path = tmp_path / "task-0.kbatches"
    path.write_bytes(bytes(first + second))
    bad = len(first)  # where the second span starts
    data = bytearray(path.read_bytes())
    data[len(data) - 3] ^= 0x40  # inside the second span's last batch
    path.write_bytes(bytes(data))
    last = _starts(second)[-1]  # the last batch's start within the second span
    spans = [(str(path), 0, len(first)), (str(path), bad, len(second))]
    with StagingFiles() as files, pytest.raises(CorruptRecordError) as info:
        files.load([str(path)])
        for _ in read_pieces(files, spans):
            pass
    assert info.value.context["file"] == str(path)
    assert info.value.context["position"] == len(first) + last  # not the span's own offset
    assert f"position={len(first) + last}" in str(info.value)


def _starts(buf: bytearray) -> list[int]:
    starts, position = [], 0
    while position < len(buf):
        starts.append(position)
        position += 12 + int.from_bytes(buf[position + 8 : position + 12], "big")
    return starts


@pytest.mark.skipif(native() is None, reason="the C library cannot be built here: no file check")
def test_a_loaded_files_spans_are_its_checked_batches_and_only_whole_ones(tmp_path: Path) -> None:
    """The whole file is checked once (the C library) and each span is its batches there; a span
    that is not whole batches, or a file not loaded, is left to the caller's parse."""
    first, second = encoded(20, Codec.LZ4), encoded(30, Codec.ZSTD)
    path = tmp_path / "task-0.kbatches"
    path.write_bytes(bytes(first + second))
    name, whole = str(path), len(first) + len(second)
    with StagingFiles() as files:
        assert files.batches(name, 0, len(first)) is None  # not loaded
        files.load([name])
        for position, span in ((0, first), (len(first), second)):
            got = files.batches(name, position, len(span))
            parsed = parse_incoming(span, AppendOrigin.CLIENT, file=name)
            assert got is not None and [bytes(b.buffer) for b in got] == [
                bytes(b.buffer) for b in parsed
            ]
            assert [b.position - position for b in got] == [b.position for b in parsed]
        assert len(files.batches(name, 0, whole) or []) == len(_starts(first + second))
        assert files.batches(name, 1, len(first) - 1) is None
        assert files.batches(name, 0, len(first) - 1) is None
        assert files.batches(name, 0, whole + 1) is None


@pytest.mark.skipif(native() is None, reason="the C library cannot be built here: no file check")
def test_a_checked_files_spans_count_their_records_and_view_their_batches(tmp_path: Path) -> None:
    """``CheckedFile``: a span's batches by index, its records from the batches' own counts,
    each batch's bytes a view of the loaded file (no Python object a batch)."""
    first, second = encoded(20, Codec.LZ4), encoded(30, Codec.ZSTD, max_records=4)
    path = tmp_path / "task-0.kbatches"
    path.write_bytes(bytes(first + second))
    name = str(path)
    with StagingFiles() as files:
        assert files.checked(name) is None  # not loaded
        files.load([name])
        found = files.checked(name)
        assert found is not None and files.checked(name) is found  # checked once
        for position, span, rows in ((0, first, 20), (len(first), second, 30)):
            taken = found.take(position, len(span))
            assert taken is not None and taken[0] == rows
            parsed = parse_incoming(bytearray(span), AppendOrigin.CLIENT)
            assert [bytes(v) for v in taken[1]] == [bytes(b.buffer) for b in parsed]
        assert found.span(0, len(first) + len(second)) == (0, len(_starts(first + second)))
        assert found.span(1, len(first)) is None and found.span(0, 0) is None
        assert found.take(1, len(first)) is None and found.take(0, len(first) - 1) is None


@pytest.mark.skipif(native() is None, reason="the C library cannot be built here: no file check")
def test_check_all_hands_on_checked_bytes_and_parses_only_what_it_must(tmp_path: Path) -> None:
    """A partition whose spans are whole checked batches of loaded files gets their bytes
    (``views``, no parsed pieces); the same bytes as the parse would give. A records count that
    is not the executors' is refused naming the file, as the parse path refuses it."""
    a, b = encoded(20, Codec.LZ4), encoded(9, Codec.NONE)
    path = tmp_path / "task-0.kbatches"
    path.write_bytes(bytes(a + b))
    name = str(path)
    groups = [PartitionSpans("t", 0, 20, [(name, 0, len(a))]),
              PartitionSpans("t", 1, 9, [(name, len(a), len(b))])]  # fmt: skip
    with StagingFiles() as files:
        checked = check_all(Encoded.of(groups), {("t", 1): 5}, files)
        assert [c.pieces for c in checked] == [None, None]
        assert [c.first_sequence for c in checked] == [0, 5]
        for c, data in zip(checked, (a, b), strict=True):
            assert c.views is not None and b"".join(c.views) == bytes(data)
    wrong = [groups[0]._replace(records=21)]
    with StagingFiles() as files, pytest.raises(CorruptRecordError, match="21") as info:
        check_all(Encoded.of(wrong), {}, files)
    assert name in str(info.value)


@pytest.mark.skipif(native() is None, reason="the C library cannot be built here: no file check")
def test_check_all_joins_a_partitions_spans_across_files_and_parses_more_than_a_piece(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A partition written by two tasks has a span in each task's file: its bytes are both
    spans' batches in order. One whose spans are more than a piece (``CHUNK_BYTES``) gets
    parsed pieces, as ``read_pieces`` splits them, and no bytes."""
    a, b, c = encoded(12, Codec.LZ4), encoded(8, Codec.NONE), encoded(5, Codec.ZSTD)
    first, second = tmp_path / "task-0.kbatches", tmp_path / "task-1.kbatches"
    first.write_bytes(bytes(a + c))
    second.write_bytes(bytes(b))
    spans = [(str(first), 0, len(a)), (str(second), 0, len(b))]
    groups = [PartitionSpans("t", 0, 20, spans),
              PartitionSpans("t", 1, 5, [(str(first), len(a), len(c))])]  # fmt: skip
    with StagingFiles() as files:
        joined, alone = check_all(Encoded.of(groups), {}, files)
        assert joined.views is not None and b"".join(joined.views) == bytes(a + b)
        assert alone.views is not None and b"".join(alone.views) == bytes(c)
    monkeypatch.setattr("kafkatier.sink.append.CHUNK_BYTES", len(a))
    with StagingFiles() as files:
        joined, alone = check_all(Encoded.of(groups), {}, files)
        assert joined.views is None and joined.pieces is not None and len(joined.pieces) == 2
        assert [b"".join(bytes(x.buffer) for x in piece) for piece in joined.pieces] == [
            bytes(a), bytes(b)
        ]
        assert alone.views is not None  # one span: one piece whatever its size
