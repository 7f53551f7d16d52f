import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from kafkatier.storage.errors import InvalidRecordError
from kafkatier.storage.partitioner import (
    NULL_KEY_PARTITION,
    assign_partitions,
    default_partition,
    murmur2,
    murmur2_keys,
    partition_keys,
    to_positive,
)

VECTORS = json.loads(
    (Path(__file__).resolve().parents[1] / "data" / "vectors" / "murmur2.json").read_text()
)


def _key(vector: dict) -> bytes:
    if "key_hex" in vector:
        return bytes.fromhex(vector["key_hex"])
    return vector["key"].encode("utf-8")


def test_vector_file_names_its_sources():
    assert "UtilsTest.java" in VECTORS["provenance"]["murmur2"]
    assert "kafka-python" in VECTORS["provenance"]["partitions_1000"]


@pytest.mark.parametrize("vector", VECTORS["murmur2"] + VECTORS["derived"], ids=repr)
def test_murmur2_official_and_derived_vectors(vector):
    assert murmur2(_key(vector)) == vector["hash"]


@pytest.mark.parametrize("vector", VECTORS["partitions_1000"], ids=repr)
def test_kafka_python_partition_vectors(vector):
    assert default_partition(_key(vector), 1000) == vector["partition"]


@pytest.mark.parametrize("vector", VECTORS["derived"], ids=repr)
def test_derived_partition_table(vector):
    for n, expected in vector["partitions"].items():
        assert default_partition(_key(vector), int(n)) == expected


def test_to_positive_is_a_mask_not_abs():
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(2**31)) == 0
    # abs() would give 973932308 for "21", and a different partition for many n.
    assert default_partition(b"21", 1000) == (-973932308 & 0x7FFFFFFF) % 1000 != 973932308 % 1000


def test_bad_partition_count():
    with pytest.raises(ValueError, match="num_partitions"):
        default_partition(b"k", 0)
    with pytest.raises(ValueError, match="num_partitions"):
        partition_keys(pa.array([b"k"]), 0)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_matches_kafka_python_murmur2(data):
    # kafka-python returns the same 32 bits unsigned.
    assert murmur2(data) & 0xFFFFFFFF == kafka_python_murmur2(bytearray(data))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.binary(max_size=40)), max_size=50),
    st.integers(0, 10),
    st.integers(0, 10),
    st.integers(1, 500),
)
def test_vectorised_equals_scalar_on_sliced_arrays(keys, start, trim, n):
    for arrow_type in (pa.binary(), pa.large_binary()):
        full = pa.array(keys, type=arrow_type)
        start_at = min(start, len(keys))
        sliced = full.slice(start_at, max(len(keys) - start_at - trim, 0))
        expected = [
            NULL_KEY_PARTITION if k is None else default_partition(k, n)
            for k in sliced.to_pylist()
        ]
        got = partition_keys(sliced, n)
        assert got.dtype == np.int32
        assert got.tolist() == expected
        hashes = [-1 if k is None else murmur2(k) for k in sliced.to_pylist()]
        assert murmur2_keys(sliced).tolist() == hashes


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(max_size=20)), max_size=30), st.integers(1, 64))
def test_string_columns_hash_their_utf8_bytes(texts, n):
    expected = [
        NULL_KEY_PARTITION if t is None else default_partition(t.encode("utf-8"), n) for t in texts
    ]
    for arrow_type in (pa.string(), pa.large_string()):
        assert partition_keys(pa.array(texts, type=arrow_type), n).tolist() == expected


def test_chunked_and_empty_arrays():
    chunked = pa.chunked_array([[b"a", b"abc"], [], [None, b"123456789"]])
    assert partition_keys(chunked, 1000).tolist() == [524, 107, -1, 566]
    assert partition_keys(pa.array([], type=pa.binary()), 3).tolist() == []
    assert partition_keys(pa.array([None, None], type=pa.binary()), 3).tolist() == [-1, -1]
    assert partition_keys(pa.array([b"", b""]), 1000).tolist() == [681, 681]


def test_rejects_non_binary_columns():
    with pytest.raises(TypeError, match="int64"):
        partition_keys(pa.array([1, 2]), 3)


def test_one_partition_takes_every_row_and_still_checks_explicit_ones():
    """One partition: no key is hashed (every row's partition is 0), keyed, keyless and
    explicit alike; an explicit partition outside [0, 1) is still the named error."""
    keys = pa.array([b"a", None, b"c", b""], pa.binary())
    assert assign_partitions(keys, 1).tolist() == [0, 0, 0, 0]
    assert assign_partitions(None, 1, explicit=pa.array([0, None])).tolist() == [0, 0]
    with pytest.raises(InvalidRecordError, match="'partition' row 1: partition 1 is outside"):
        assign_partitions(keys, 1, explicit=pa.array([0, 1, None, 0]))
