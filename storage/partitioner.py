"""Kafka's default partitioner for keyed records (kafka-format.md §12).

``partition = (murmur2(key) & 0x7fffffff) % num_partitions``: the mask (``Utils.toPositive``), not
``abs``, and the topic's total partition count. murmur2 is ``Utils.murmur2``: MurmurHash2, 32-bit,
seed 0x9747b28c, m 0x5bd1e995, r 24, little-endian 4-byte blocks, returned as a signed int32.

:func:`partition_keys` hashes a whole Arrow column in one compiled loop over its offsets and data
buffers (``partitioner_kernels``, or its C build: ``kafkatier.storage.native``), so a Spark
partition of millions of keys costs no Python per key.
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np
import pyarrow as pa

from kafkatier.storage import native
from kafkatier.storage.arrow.columns import plain_bytes
from kafkatier.storage.arrow.numpy_views import int_values, validity
from kafkatier.storage.errors import InvalidRecordError

SEED: Final = 0x9747B28C
M: Final = 0x5BD1E995
R: Final = 24
_MASK32: Final = 0xFFFFFFFF
NULL_KEY_PARTITION: Final = -1
"""What :func:`partition_keys` returns for a null key; Kafka spreads those (sticky partitioner)."""


def murmur2(data: bytes | bytearray | memoryview) -> int:
    """Kafka's ``Utils.murmur2`` of ``data`` as a signed int32."""
    raw = bytes(data)
    length = len(raw)
    h = (SEED ^ length) & _MASK32
    blocks = length & ~3
    for i in range(0, blocks, 4):
        k = int.from_bytes(raw[i : i + 4], "little")
        k = (k * M) & _MASK32
        k ^= k >> R
        k = (k * M) & _MASK32
        h = ((h * M) & _MASK32) ^ k
    tail = length & 3
    if tail:
        for j in range(tail - 1, -1, -1):  # tail bytes at shifts 16/8/0, as Java's switch
            h ^= raw[blocks + j] << (8 * j)
        h = (h * M) & _MASK32
    h ^= h >> 13
    h = (h * M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h >= 1 << 31 else h


def to_positive(value: int) -> int:
    """Kafka's ``Utils.toPositive``: clear the sign bit (``Integer.MIN_VALUE`` becomes 0)."""
    return value & 0x7FFFFFFF


def default_partition(key: bytes | bytearray | memoryview, num_partitions: int) -> int:
    """The partition Kafka's producer picks for a non-null serialized key."""
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be >= 1, got {num_partitions}")
    return to_positive(murmur2(key)) % num_partitions


_OFFSET_TYPES: Final = {
    pa.binary(): np.int32,
    pa.string(): np.int32,
    pa.large_binary(): np.int64,
    pa.large_string(): np.int64,
}


def _buffers(keys: pa.Array) -> tuple[Any, Any, Any]:
    """(data bytes, this slice's offsets, validity) as numpy views of the Arrow buffers."""
    offset_type = _OFFSET_TYPES[keys.type]  # plain_bytes left one of these
    _, offsets_buf, data_buf = keys.buffers()
    n = len(keys)
    offsets = np.frombuffer(offsets_buf, dtype=offset_type, count=keys.offset + n + 1)
    offsets = offsets[keys.offset :]
    data = np.empty(0, np.uint8) if data_buf is None else np.frombuffer(data_buf, dtype=np.uint8)
    return data, offsets, validity(keys)


def _run(keys: pa.Array | pa.ChunkedArray, num_partitions: int) -> np.ndarray[Any, Any]:
    if isinstance(keys, pa.ChunkedArray):
        parts = [_run(chunk, num_partitions) for chunk in keys.chunks]
        return np.concatenate(parts) if parts else np.empty(0, dtype=np.int32)
    keys = plain_bytes(keys, "key")  # the encoder's reading: nulls only, dictionary, views
    kernels = native.pick("kafkatier.storage.partitioner_kernels")
    result: np.ndarray[Any, Any] = kernels.hash_all(*_buffers(keys), num_partitions)
    return result


def partition_keys(keys: pa.Array | pa.ChunkedArray, num_partitions: int) -> np.ndarray[Any, Any]:
    """The default partition of every key as an int32 array; null keys give -1.

    Accepts what the encoder does (``columns.plain_bytes``: binary and string arrays, their
    dictionary and view forms, a column of nulls only; strings hash their UTF-8 bytes, which is
    what Kafka's StringSerializer produces), sliced or not, and chunked arrays.
    """
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be >= 1, got {num_partitions}")
    return _run(keys, num_partitions)


def murmur2_keys(keys: pa.Array | pa.ChunkedArray) -> np.ndarray[Any, Any]:
    """Signed murmur2 of every key as an int32 array (null keys give -1, like a real hash may)."""
    return _run(keys, 0)


def assign_partitions(
    keys: pa.Array | pa.ChunkedArray | None,
    num_partitions: int,
    *,
    explicit: pa.Array | pa.ChunkedArray | None = None,
    round_robin_start: int = 0,
    column: str = "partition",
    rows: int | None = None,
) -> np.ndarray[Any, Any]:
    """A partition per row, as a Kafka producer picks it: an explicit ``partition`` wins, keyed
    rows go to ``murmur2(key)``'s partition, keyless rows are spread evenly (round robin from
    ``round_robin_start``). An explicit value outside [0, num_partitions) is an error naming the
    row and the column. ``rows``: how many, where there is neither a key nor a partition column
    to count them (every row keyless)."""
    if keys is not None:
        rows = len(keys)
    elif explicit is not None:
        rows = len(explicit)
    elif rows is None:
        raise ValueError("assign_partitions needs keys, explicit partitions or a row count")
    if num_partitions == 1:  # every row's partition is 0: no key need be hashed
        parts = np.zeros(rows, np.int32)
    elif keys is not None:
        parts = partition_keys(keys, num_partitions)
    else:
        parts = np.full(rows, -1, np.int32)
    keyless = np.flatnonzero(parts < 0)
    parts[keyless] = (round_robin_start + np.arange(len(keyless))) % num_partitions
    if explicit is not None:
        chosen, mask = int_values(explicit), validity(explicit)
        bad = np.flatnonzero(mask & ((chosen < 0) | (chosen >= num_partitions)))
        if len(bad):
            row = int(bad[0])
            raise InvalidRecordError(
                f"column {column!r} row {row}: partition {int(chosen[row])} is outside "
                f"[0, {num_partitions}); the topic has {num_partitions} partitions",
                row=row,
            )
        parts[mask] = chosen[mask].astype(np.int32)
    return parts


def keyless_rows(
    keys: pa.Array | pa.ChunkedArray | None, explicit: pa.Array | pa.ChunkedArray | None, rows: int
) -> int:
    """How many of ``rows`` rows neither a key nor an explicit partition places: the rows
    :func:`assign_partitions` spreads round robin (where the next call's ``round_robin_start``
    goes on from). Counted by Arrow, not through numpy (``arrow.numpy_views`` says why)."""
    if keys is None or explicit is None:
        column = explicit if keys is None else keys
        return rows if column is None else column.null_count
    import pyarrow.compute as pc  # only here: its import is 60 ms of a CLI's start-up

    both = pc.and_(keys.is_null(), explicit.is_null())
    return int(pc.sum(both).as_py() or 0)
