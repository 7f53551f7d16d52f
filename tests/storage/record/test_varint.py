"""Varints against Kafka's ByteUtilsTest vectors (kafka-format.md §13.2) and properties."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkatier.storage.errors import InvalidRecordError
from kafkatier.storage.record.varint import (
    decode_unsigned_varint,
    decode_varint,
    decode_varlong,
    encode_unsigned_varint,
    encode_varint,
    encode_varlong,
    size_of_varint,
    size_of_varlong,
)

with warnings.catch_warnings():  # kafka-python's import-time DeprecationWarnings
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record import util as kafka_util

VECTORS = json.loads(
    (Path(__file__).resolve().parents[2] / "data" / "vectors" / "varint.json").read_text()
)
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)


@pytest.mark.parametrize(("value", "hexed"), VECTORS["varint"])
def test_varint_vectors(value: int, hexed: str) -> None:
    raw = bytes.fromhex(hexed)
    assert encode_varint(value) == raw
    assert decode_varint(raw, 0) == (value, len(raw))
    assert size_of_varint(value) == len(raw)
    # The same int32 values encode identically as varlongs.
    assert encode_varlong(value) == raw
    assert decode_varlong(raw, 0) == (value, len(raw))


@pytest.mark.parametrize(("value", "hexed"), VECTORS["varlong_extra"])
def test_varlong_vectors(value: int, hexed: str) -> None:
    raw = bytes.fromhex(hexed)
    assert encode_varlong(value) == raw
    assert decode_varlong(memoryview(raw), 0) == (value, len(raw))
    assert size_of_varlong(value) == len(raw)


@pytest.mark.parametrize(("value", "hexed"), VECTORS["unsigned_varint"])
def test_unsigned_varint_vectors(value: int, hexed: str) -> None:
    raw = bytes.fromhex(hexed)
    assert encode_unsigned_varint(value) == raw
    assert decode_unsigned_varint(raw, 0) == (value, len(raw))


@pytest.mark.parametrize("hexed", VECTORS["invalid_varint"])
def test_sixth_varint_byte_is_an_error(hexed: str) -> None:
    with pytest.raises(InvalidRecordError, match="longer than 5"):
        decode_varint(bytes.fromhex(hexed), 0)


@pytest.mark.parametrize("hexed", VECTORS["invalid_varlong"])
def test_eleventh_varlong_byte_is_an_error(hexed: str) -> None:
    with pytest.raises(InvalidRecordError, match="longer than 10"):
        decode_varlong(bytes.fromhex(hexed), 0)


@pytest.mark.parametrize("raw", [b"", b"\x80", b"\xff\xff"])
def test_truncated_varint_is_an_error(raw: bytes) -> None:
    with pytest.raises(InvalidRecordError, match="truncated"):
        decode_varint(raw, 0)
    with pytest.raises(InvalidRecordError, match="truncated"):
        decode_varlong(raw, 0)


def test_overflow_bits_in_fifth_byte_are_masked_like_kafka() -> None:
    # 0x7f in the 5th byte carries bits above 32; ByteUtils.readVarint drops them.
    assert decode_varint(bytes.fromhex("feffffff7f"), 0) == (2147483647, 5)


def test_decoding_starts_at_pos() -> None:
    buf = b"\xaa" + encode_varint(-8193) + b"\xbb"
    assert decode_varint(buf, 1) == (-8193, 4)


@pytest.mark.parametrize("value", [2**31, -(2**31) - 1])
def test_out_of_range_varint_is_rejected(value: int) -> None:
    with pytest.raises(InvalidRecordError):
        encode_varint(value)


@settings(max_examples=300)
@given(INT32)
def test_varint_round_trip(value: int) -> None:
    raw = encode_varint(value)
    assert decode_varint(raw, 0) == (value, len(raw))
    assert size_of_varint(value) == len(raw) <= 5


@settings(max_examples=300)
@given(INT64)
def test_varlong_round_trip(value: int) -> None:
    raw = encode_varlong(value)
    assert decode_varlong(raw, 0) == (value, len(raw))
    assert size_of_varlong(value) == len(raw) <= 10


@settings(max_examples=200)
@given(INT32)
def test_unsigned_varint_round_trip(value: int) -> None:
    raw = encode_unsigned_varint(value)
    assert decode_unsigned_varint(raw, 0) == (value, len(raw))


@settings(max_examples=200)
@given(INT32)
def test_varint_matches_kafka_python(value: int) -> None:
    theirs = bytearray()
    kafka_util.encode_varint(value, theirs.append)
    assert encode_varint(value) == bytes(theirs)
