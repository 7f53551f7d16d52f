"""The C library's check of a client's batches (``checks.c`` through ``validator.checked_rows``)
against the Python check (``parse_incoming``) and kafka-python's parser: the same fields for
valid batches, Kafka-written ones included, and a stop before every fault the Python check
names, so that nothing the C check passes is something Python would refuse.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import crc32c
import pyarrow as pa
import pytest
from kafka.record.default_records import DefaultRecordBatch as KpBatch

from kafkatier.storage import native
from kafkatier.storage.arrow.codec import encode_arrow
from kafkatier.storage.errors import StorageError
from kafkatier.storage.log.validator import checked_rows, parse_incoming
from kafkatier.storage.producer.entry import AppendOrigin
from kafkatier.storage.record.batch import RecordBatch
from kafkatier.storage.record.records import iter_batches
from kafkatier.storage.wire import CRC_START, Codec


def checked_prefix(data: memoryview, file: str) -> tuple[list[RecordBatch], int] | None:
    """``checked_rows``' batches as objects, as the sink's staging files make them
    (``RecordBatch.of_checked``), to compare with ``parse_incoming``'s."""
    checked = checked_rows(data)
    if checked is None:
        return None
    rows, end = checked
    return [RecordBatch.of_checked(data, row, file) for row in rows], end


CORPUS = Path(__file__).resolve().parents[3].parent / "shared" / "kafka-corpus"
SLOTS = ("base_offset", "batch_length", "partition_leader_epoch", "magic", "crc", "attributes",
         "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id", "producer_epoch",
         "base_sequence", "records_count", "position", "size_in_bytes", "file")  # fmt: skip

pytestmark = pytest.mark.skipif(
    native.native() is None, reason="the C library cannot be built here: Python checks alone"
)


def encoded(rows: int, codec: Codec, *, producer_id: int = 7, sequence: int = 0) -> bytearray:
    table = pa.table({"key": [f"k{i}".encode() for i in range(rows)],
                      "value": [f"value-{i}".encode() * (i % 5) for i in range(rows)]})  # fmt: skip
    out = encode_arrow(
        table, codec=codec, producer_id=producer_id, producer_epoch=2, base_sequence=sequence,
        transactional=producer_id >= 0, timestamp=1_700_000_000_000, max_batch_records=9,
    )  # fmt: skip
    return bytearray(out.data)


def _starts(buf: bytearray) -> list[int]:
    return [b.position for b in iter_batches(buf)]


def _same_batches(checked: list[RecordBatch], parsed: list[RecordBatch]) -> None:
    assert len(checked) == len(parsed)
    for c, p in zip(checked, parsed, strict=True):
        assert [getattr(c, s) for s in SLOTS] == [getattr(p, s) for s in SLOTS]
        assert bytes(c.buffer) == bytes(p.buffer)


@pytest.mark.parametrize("codec", [Codec.NONE, Codec.GZIP, Codec.LZ4, Codec.ZSTD])
@pytest.mark.parametrize("producer_id", [-1, 7, (1 << 62) + 5])
def test_valid_batches_read_as_python_and_kafka_python_read_them(
    codec: Codec, producer_id: int
) -> None:
    buf = encoded(50, codec, producer_id=producer_id, sequence=0 if producer_id < 0 else 2**31 - 4)
    found = checked_prefix(memoryview(buf), "mem")
    assert found is not None
    checked, end = found
    assert end == len(buf) and len(checked) == 6
    _same_batches(checked, parse_incoming(buf, AppendOrigin.CLIENT, file="mem"))
    for batch in checked:
        outside = KpBatch(bytes(batch.buffer))
        assert outside.validate_crc()
        assert (outside.base_offset, outside.producer_id, outside.producer_epoch,
                outside.base_sequence, outside.max_timestamp, outside.compression_type,
                outside.is_transactional, outside.last_offset_delta) == (
            batch.base_offset, batch.producer_id, batch.producer_epoch, batch.base_sequence,
            batch.max_timestamp, batch.codec, batch.is_transactional, batch.last_offset_delta,
        )  # fmt: skip


def _set(at: int, fmt: str, value: int) -> Callable[[bytearray, int], None]:
    def change(buf: bytearray, start: int) -> None:
        struct.pack_into(fmt, buf, start + at, value)

    return change


def _flip_payload(buf: bytearray, start: int) -> None:
    buf[start + 70] ^= 0x01


def _keep_crc(change: Callable[[bytearray, int], None]) -> Callable[[bytearray, int], None]:
    """``change``, then the CRC made right again: the fault is the field, not the CRC."""

    def both(buf: bytearray, start: int) -> None:
        change(buf, start)
        size = 12 + struct.unpack_from(">i", buf, start + 8)[0]
        crc = crc32c.crc32c(buf[start + CRC_START : start + size])
        struct.pack_into(">I", buf, start + 17, crc)

    return both


FAULTS = {
    "a flipped payload bit": _flip_payload,
    "a wrong stored crc": _set(17, ">I", 12345),
    "magic 1": _set(16, ">b", 1),
    "magic 3": _set(16, ">b", 3),
    "magic -1": _set(16, ">b", -1),
    "batchLength 0": _set(8, ">i", 0),
    "batchLength below the header": _set(8, ">i", 40),
    "batchLength negative": _set(8, ">i", -5),
    "batchLength past the end": _set(8, ">i", 1 << 30),
    "a control batch": _keep_crc(_set(21, ">h", 0x30)),
    "recordsCount off by one": _keep_crc(_set(57, ">i", 10)),
    "recordsCount zero": _keep_crc(_set(57, ">i", 0)),
    "lastOffsetDelta negative": _keep_crc(_set(23, ">i", -1)),
    "a producer id without a sequence": _keep_crc(_set(53, ">i", -1)),
}


@pytest.mark.parametrize("which", [0, 2, 5])
@pytest.mark.parametrize("fault", list(FAULTS))
def test_the_check_stops_before_every_fault_the_python_check_names(fault: str, which: int) -> None:
    buf = encoded(50, Codec.LZ4)
    starts = _starts(buf)
    FAULTS[fault](buf, starts[which])
    found = checked_prefix(memoryview(buf), "mem")
    assert found is not None
    checked, end = found
    assert end == starts[which] and len(checked) == which
    with pytest.raises(StorageError) as info:
        parse_incoming(buf, AppendOrigin.CLIENT, file="mem")
    assert info.value.context["position"] == starts[which]


@pytest.mark.parametrize("cut", [1, 12, 60, 61, 100])
def test_a_partial_tail_is_left_to_the_python_check(cut: int) -> None:
    buf = encoded(50, Codec.NONE)
    starts = _starts(buf)
    found = checked_prefix(memoryview(buf)[: len(buf) - cut], "mem")
    assert found is not None and found[1] == starts[-1] and len(found[0]) == len(starts) - 1
    assert checked_prefix(memoryview(buf)[:0], "mem") == ([], 0)


def _corpus_logs() -> list[Path]:
    return sorted(CORPUS.glob("*/**/*.log"))[:40] if CORPUS.is_dir() else []


def test_kafka_written_batches_read_as_the_python_reader_reads_them() -> None:
    """Real broker logs: every batch up to the first the check refuses (control batches are not
    a client's) has the fields and bytes the Python reader gives it."""
    logs = [p for p in _corpus_logs() if p.stat().st_size]
    if not logs:
        pytest.skip(f"no Kafka-written logs under {CORPUS}")
    seen = 0
    for path in logs:
        data = bytearray(path.read_bytes())
        found = checked_prefix(memoryview(data), str(path))
        assert found is not None
        checked, end = found
        read = [b for b in iter_batches(data, file=str(path)) if b.position < end]
        assert all(isinstance(b, RecordBatch) for b in read)
        _same_batches(checked, read)  # type: ignore[arg-type]
        seen += len(checked)
    assert seen > 0


@pytest.mark.parametrize("value_bytes", [0, 1, 7, 300, 3_000, 11_000])
def test_the_crc_holds_for_every_size_a_batch_takes(value_bytes: int) -> None:
    """Batches from the header alone to past the three-stream blocks the CRC is computed in
    (3 x 256 and 3 x 8,192 bytes), at every alignment a staging file gives them."""
    table = pa.table({"value": [bytes([i % 251]) * (value_bytes + i) for i in range(40)]})
    out = encode_arrow(table, codec=Codec.NONE, producer_id=3, producer_epoch=0, base_sequence=0,
                       transactional=True, timestamp=1, max_batch_records=7)  # fmt: skip
    for lead in range(3):
        data = memoryview(bytearray(out.data))
        found = checked_prefix(data, "mem")
        assert found is not None and found[1] == len(data) and len(found[0]) == 6
        for batch in found[0]:
            assert batch.crc == crc32c.crc32c(batch.buffer[CRC_START:])
        out = encode_arrow(table.slice(lead + 1), codec=Codec.NONE, producer_id=3,
                           producer_epoch=0, base_sequence=0, transactional=True, timestamp=1,
                           max_batch_records=7)  # fmt: skip


@pytest.mark.parametrize("rows", [1, 2, 3, 5])
def test_a_buffer_of_more_batches_than_one_call_reads_is_read_in_several(
    rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    buf = encoded(50, Codec.LZ4)
    whole = checked_prefix(memoryview(buf), "mem")
    kernels = native.native()
    assert whole is not None and kernels is not None
    monkeypatch.setattr(kernels, "CHECK_ROWS", rows)
    starts = _starts(buf)
    FAULTS["a flipped payload bit"](buf, starts[4])
    chunked = checked_prefix(memoryview(buf), "mem")
    assert chunked is not None and chunked[1] == starts[4]
    _same_batches(chunked[0], whole[0][:4])
