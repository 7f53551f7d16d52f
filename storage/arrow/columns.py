"""Arrow input columns -> the numpy views the encoder kernels read (see encode_kernels.py).

Validation happens here, vectorised, so the kernels can assume well-formed input: column types,
null header keys and out-of-range timestamps are reported with the column and row at fault.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from kafkatier.storage.arrow.numpy_views import int_values, validity
from kafkatier.storage.errors import InvalidRecordError, StorageError
from kafkatier.storage.wire import NO_TIMESTAMP

BinaryColumn = tuple[NDArray[np.int64], NDArray[np.uint8], NDArray[np.int64]]
HeaderColumns = tuple[NDArray[Any], ...]

BYTES_TYPES = "binary, large_binary, string, large_string (or their view/dictionary forms)"
HEADERS_TYPE = "list<struct<key: string, value: binary>> (large_ and view variants accepted)"
TIMESTAMP_TYPES = "timestamp (any unit, any time zone) or int64 milliseconds since the epoch"
_MS_PER_UNIT = {"s": (1000, 1), "ms": (1, 1), "us": (1, 1000), "ns": (1, 1_000_000)}
_EMPTY_U8: NDArray[np.uint8] = np.empty(0, np.uint8)
_EMPTY_I64: NDArray[np.int64] = np.empty(0, np.int64)


class ArrowSchemaError(StorageError, TypeError):  # type: ignore[misc,unused-ignore]
    """An input column with a type the encoder does not accept; names the column and the types."""


@dataclass(frozen=True)
class Columns:
    """One input table as kernel arguments: ``n`` rows; timestamps already in milliseconds."""

    n: int
    key: BinaryColumn
    value: BinaryColumn
    headers: HeaderColumns
    timestamps: NDArray[np.int64]


def _validity(arr: pa.Array) -> NDArray[np.uint8]:
    """1 per valid row; empty when there are no nulls (the kernels' "all valid")."""
    if arr.null_count == 0:
        return _EMPTY_U8
    return validity(arr).view(np.uint8)


def plain_bytes(arr: pa.Array, name: str) -> pa.Array:
    """``arr`` as binary or string with offsets (what the kernels read): dictionary and view
    forms decoded, a column of nulls only (Arrow's null type: JSON or CSV) as binary nulls;
    another type is :class:`ArrowSchemaError` naming column ``name``."""
    t = arr.type
    if pa.types.is_null(t):  # every row null (a JSON or CSV column of nulls only)
        return arr.cast(pa.binary())
    if pa.types.is_dictionary(t):
        arr = arr.dictionary_decode()
        t = arr.type
    if pa.types.is_binary_view(t) or pa.types.is_string_view(t):
        return arr.cast(pa.large_binary())
    if not (
        pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
    ):
        raise ArrowSchemaError(f"column {name!r} has type {t}; accepted: {BYTES_TYPES}")
    return arr


def binary_column(arr: pa.Array, name: str) -> BinaryColumn:
    """Start of each value in the data buffer, the data bytes, and lengths (-1 for null)."""
    arr = plain_bytes(arr, name)
    large = pa.types.is_large_binary(arr.type) or pa.types.is_large_string(arr.type)
    dtype = np.int64 if large else np.int32
    _, offsets_buf, data_buf = arr.buffers()
    n = len(arr)
    if offsets_buf is None:  # a zero-length array may come without buffers
        return _EMPTY_I64, _EMPTY_U8, _EMPTY_I64
    offsets = np.frombuffer(offsets_buf, dtype, n + 1, arr.offset * np.dtype(dtype).itemsize)
    starts = offsets[:-1].astype(np.int64)
    lengths = offsets[1:].astype(np.int64)
    lengths -= starts
    if arr.null_count:
        lengths[_validity(arr) == 0] = -1
    data = _EMPTY_U8 if data_buf is None else np.frombuffer(data_buf, np.uint8)
    return starts, data, lengths


def absent_binary(n: int) -> BinaryColumn:
    """A key column of ``n`` nulls, for tables without ``key``."""
    return np.zeros(n, np.int64), _EMPTY_U8, np.full(n, -1, np.int64)


def _header_children(arr: pa.Array, name: str) -> tuple[pa.Array, pa.Array]:
    t = arr.type
    is_list = (
        pa.types.is_list(t)
        or pa.types.is_large_list(t)
        or pa.types.is_list_view(t)
        or (pa.types.is_large_list_view(t))
    )
    inner = t.value_type if is_list else None
    if (
        inner is None
        or not pa.types.is_struct(inner)
        or {inner.field(i).name for i in range(inner.num_fields)} != {"key", "value"}
    ):
        raise ArrowSchemaError(f"column {name!r} has type {t}; accepted: {HEADERS_TYPE}")
    import pyarrow.compute as pc  # only for headers: its import is 60 ms of a CLI's start-up

    flat = pc.list_flatten(arr)
    if flat.null_count:
        row = pc.list_parent_indices(arr)[int(np.flatnonzero(_validity(flat) == 0)[0])]
        raise InvalidRecordError(f"null header in column {name!r}", row=row.as_py())
    return flat.field("key"), flat.field("value")


def headers_column(arr: pa.Array, name: str) -> HeaderColumns:
    """Headers as list offsets then the key and value binary columns of the flat headers.

    Null lists become empty ones (Kafka has no null header list), so list offsets are rebuilt
    over the flattened headers.
    """
    empty_lists = pa.types.is_list(arr.type) and pa.types.is_null(arr.type.value_type)
    if pa.types.is_null(arr.type) or empty_lists:  # no row has a header: as no column
        return absent_headers()
    import pyarrow.compute as pc  # see _header_children

    keys, values = _header_children(arr, name)
    if not (
        pa.types.is_string(keys.type)
        or pa.types.is_large_string(keys.type)
        or pa.types.is_string_view(keys.type)
    ):
        raise ArrowSchemaError(f"header keys in {name!r} have type {keys.type}; accepted: string")
    if keys.null_count:
        bad = int(np.flatnonzero(_validity(keys) == 0)[0])
        row = pc.list_parent_indices(arr)[bad].as_py()
        raise InvalidRecordError(f"null header key in column {name!r}", row=row)
    found = pc.list_value_length(arr)  # null for a null list (its slot: any value)
    lengths = np.where(validity(found), int_values(found), 0)
    offsets = np.zeros(len(arr) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return (offsets, *binary_column(keys, f"{name}.key"), *binary_column(values, f"{name}.value"))


def absent_headers() -> HeaderColumns:
    """No headers column: the kernels write a header count of 0 for every record."""
    return _EMPTY_I64, _EMPTY_I64, _EMPTY_U8, _EMPTY_I64, _EMPTY_I64, _EMPTY_U8, _EMPTY_I64


def timestamps_column(arr: pa.Array | None, n: int, default: int, name: str) -> NDArray[np.int64]:
    """Milliseconds per row; nulls (or no column) take ``default``. Kafka stores >= 0, or -1
    for "no timestamp": an integer column may give -1 (the field as Kafka writes it), but a
    timestamp column's -1 ms is an instant (1969-12-31T23:59:59.999) that Kafka would read as
    none, refused as Kafka's ``ProducerRecord`` (and so Spark's Kafka sink) refuses it."""
    if arr is None or pa.types.is_null(arr.type):  # no column, or nulls only
        return np.full(n, default, np.int64)
    t = arr.type
    if pa.types.is_timestamp(t):
        mul, div = _MS_PER_UNIT[t.unit]
    elif pa.types.is_integer(t):
        mul, div = 1, 1
    else:
        raise ArrowSchemaError(f"column {name!r} has type {t}; accepted: {TIMESTAMP_TYPES}")
    raw = int_values(arr.cast(pa.int64()))  # a null's slot: any value, replaced below
    ms = raw * mul if mul != 1 else (np.floor_divide(raw, div) if div != 1 else raw)
    if arr.null_count:
        ms = np.where(validity(arr), ms, default)
    ms = np.ascontiguousarray(ms, dtype=np.int64)
    bad = np.flatnonzero(ms < (0 if pa.types.is_timestamp(t) else NO_TIMESTAMP))
    if len(bad):
        raise InvalidRecordError(
            f"invalid negative timestamp {int(ms[bad[0]])} in column {name!r}", row=int(bad[0])
        )
    return ms


def _column(data: pa.Table | pa.RecordBatch, name: str) -> pa.Array | None:
    if name not in data.schema.names:
        return None
    col = data.column(name)
    if not isinstance(col, pa.ChunkedArray):
        return col
    return col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()  # 1 chunk: no copy


def extract(data: pa.Table | pa.RecordBatch, default_timestamp: int) -> Columns:
    """Validate ``data`` and return the kernels' view of it; other columns are ignored."""
    if not isinstance(data, pa.Table | pa.RecordBatch):
        raise ArrowSchemaError(f"expected a pyarrow Table or RecordBatch, got {type(data)}")
    value = _column(data, "value")
    if value is None:
        raise ArrowSchemaError(f"missing column 'value'; accepted types: {BYTES_TYPES}")
    n = len(value)
    key = _column(data, "key")
    headers = _column(data, "headers")
    cols = Columns(
        n=n,
        key=absent_binary(n) if key is None else binary_column(key, "key"),
        value=binary_column(value, "value"),
        headers=absent_headers() if headers is None else headers_column(headers, "headers"),
        timestamps=timestamps_column(_column(data, "timestamp"), n, default_timestamp, "timestamp"),
    )
    arrays: list[NDArray[Any]] = [*cols.key, *cols.value, *cols.headers, cols.timestamps]
    for array in arrays:
        array.flags.writeable = False  # one numba specialisation whatever the arrays came from
    return cols
