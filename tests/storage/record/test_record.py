"""One v2 record and the control payloads: §13.4 sizes, §13.10 control parsing, decode errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kafkatier.storage.errors import InvalidRecordError
from kafkatier.storage.record.record import (
    Record,
    decode_records,
    encode_record,
    parse_control_key,
    parse_end_txn_marker,
)
from kafkatier.storage.wire import ControlType

VECTORS = Path(__file__).resolve().parents[2] / "data" / "vectors"
SIZES = json.loads((VECTORS / "record_sizes.json").read_text())
CONTROL = json.loads((VECTORS / "control_records.json").read_text())


def _text(value: str | None) -> bytes | None:
    return None if value is None else value.encode()


def _record(case: dict[str, Any]) -> Record:
    value = (
        b"v" * case["value_repeat_size"] if "value_repeat_size" in case else _text(case["value"])
    )
    headers = tuple((k, _text(v)) for k, v in case["headers"])
    return Record(case["offset"], case["timestamp"], _text(case["key"]), value, headers)


@pytest.mark.parametrize("case", SIZES["records"], ids=lambda c: str(c["offset"]))
def test_record_sizes_match_kafka(case: dict[str, Any]) -> None:
    record = _record(case)
    out = bytearray(b"prefix")
    size = encode_record(
        out,
        record.offset,
        record.timestamp - SIZES["base_timestamp"],
        record.key,
        record.value,
        record.headers,
    )
    assert size == case["size"] == len(out) - len(b"prefix")


def test_record_sizes_batch_decodes_back() -> None:
    records = [_record(c) for c in SIZES["records"]]
    out = bytearray()
    for r in records:
        encode_record(
            out, r.offset, r.timestamp - SIZES["base_timestamp"], r.key, r.value, r.headers
        )
    decoded = list(decode_records(bytes(out), len(records), 0, SIZES["base_timestamp"], None, -1))
    assert decoded == records


def test_zigzag_lengths_on_the_wire() -> None:
    # §14.1: a 16-byte record body has length byte 0x20, a 4-byte key 0x08, null 0x01.
    out = bytearray()
    encode_record(out, 0, 0, b"\0\0\0\1", b"\0" * 6)
    assert out.hex() == "20" + "00" + "00" + "00" + "08" + "00000001" + "0c" + "00" * 6 + "00"
    out = bytearray()
    encode_record(out, 0, 0, None, None)
    assert out.hex() == "0c" + "00" + "00" + "00" + "01" + "01" + "00"


@pytest.mark.parametrize("case", CONTROL["control_keys"], ids=lambda c: c["comment"])
def test_control_key_parsing(case: dict[str, Any]) -> None:
    key = bytes.fromhex(case["hex"])
    if case.get("error"):
        with pytest.raises(InvalidRecordError):
            parse_control_key(key)
    else:
        assert parse_control_key(key) == ControlType[case["type"]]


@pytest.mark.parametrize("case", CONTROL["end_txn_marker_values"], ids=lambda c: c["comment"])
def test_end_txn_marker_parsing(case: dict[str, Any]) -> None:
    value = bytes.fromhex(case["hex"])
    if case.get("error"):
        with pytest.raises(InvalidRecordError):
            parse_end_txn_marker(value)
    else:
        assert parse_end_txn_marker(value) == case["coordinator_epoch"]


def test_null_control_key_and_value_are_invalid() -> None:
    with pytest.raises(InvalidRecordError):
        parse_control_key(None)
    with pytest.raises(InvalidRecordError):
        parse_end_txn_marker(None)


def _one(headers: tuple[tuple[str, bytes | None], ...] = ()) -> bytes:
    out = bytearray()
    encode_record(out, 0, 0, b"k", b"v", headers)
    return bytes(out)


@pytest.mark.parametrize(
    ("payload", "count", "message"),
    [
        (_one()[:-1], 1, "size"),  # truncated record
        (_one(), 2, "declares 2 records"),  # fewer records than the count
        (_one() + b"\x00", 1, "remain"),  # trailing bytes
        (_one(), -1, "count"),
        (b"\xff\xff\xff\xff\xff\x01" + _one(), 1, "longer than 5"),  # bad varint length
        (b"\x12" + _one()[1:] + b"\x00", 1, "invalid record size"),  # length 9, body 8
        (b"\x0e" + _one()[1:], 1, "invalid record size"),  # length 7, body 8
    ],
)
def test_malformed_records(payload: bytes, count: int, message: str) -> None:
    with pytest.raises(InvalidRecordError, match=message):
        list(decode_records(payload, count, 0, 0, None, -1))


def test_negative_header_count_and_key_size() -> None:
    # record body: attrs, ts 0, offset 0, key null, value null, headers count -1
    body = bytes.fromhex("0000000101") + b"\x01"
    with pytest.raises(InvalidRecordError, match="headers"):
        list(decode_records(bytes([len(body) * 2]) + body, 1, 0, 0, None, -1))
    body = bytes.fromhex("0000000101") + b"\x02" + b"\x01"  # one header, key size -1
    with pytest.raises(InvalidRecordError, match="negative header key"):
        list(decode_records(bytes([len(body) * 2]) + body, 1, 0, 0, None, -1))


def test_any_negative_length_reads_as_null() -> None:
    body = bytes.fromhex("000000") + b"\x03" + b"\x05" + b"\x00"  # key len -2, value len -3
    (record,) = decode_records(bytes([len(body) * 2]) + body, 1, 7, 100, None, 5)
    assert record == Record(7, 100, None, None, (), 5)


def test_invalid_utf8_header_key_is_replaced_like_java() -> None:
    out = bytearray()
    encode_record(out, 0, 0, None, None, (("ok", b"1"),))
    broken = bytes(out).replace(b"ok", b"o\xff")
    (record,) = decode_records(broken, 1, 0, 0, None, -1)
    assert record.headers == (("o\ufffd", b"1"),)
