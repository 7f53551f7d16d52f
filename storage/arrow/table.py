"""Kernel outputs -> Arrow arrays in SPARK_KAFKA_SCHEMA, without copying the byte buffers."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from kafkatier.storage.arrow.decode_kernels import empty_outputs, parse_batches
from kafkatier.storage.arrow.schema import HEADER_ENTRY, SPARK_KAFKA_SCHEMA

_US_PER_MS = 1000


def _validity(valid: NDArray[np.bool_]) -> tuple[pa.Buffer | None, int]:
    nulls = len(valid) - int(np.count_nonzero(valid))
    if nulls == 0:
        return None, 0
    return pa.py_buffer(np.packbits(valid, bitorder="little")), nulls


def _offsets(sizes: NDArray[Any]) -> pa.Buffer:
    """int32 offsets from per-row sizes (decode groups keep every total under 2 GiB)."""
    offsets = np.zeros(len(sizes) + 1, np.int32)
    np.cumsum(sizes, out=offsets[1:])
    return pa.py_buffer(offsets)


def _binary(
    col: tuple[NDArray[np.int32], NDArray[np.uint8]], n: int, arrow_type: pa.DataType
) -> pa.Array:
    """Kafka lengths (negative = null) and the copied bytes -> an Arrow binary/string array."""
    lengths = col[0][:n]
    vbuf, nulls = _validity(lengths >= 0)
    sizes = np.maximum(lengths, 0)
    nbytes = int(sizes.sum())
    buffers = [vbuf, _offsets(sizes), pa.py_buffer(col[1][:nbytes])]
    return pa.Array.from_buffers(arrow_type, n, buffers, null_count=nulls)


def _header_keys(col: tuple[NDArray[np.int32], NDArray[np.uint8]], count: int) -> pa.Array:
    """Header keys as strings; Kafka decodes invalid UTF-8 with replacement characters."""
    keys = _binary(col, count, pa.string())
    try:
        keys.validate(full=True)
    except pa.ArrowInvalid:  # rare: fall back to Python's decoder, as Java's String does
        raw = keys.view(pa.binary()).to_pylist()
        keys = pa.array([b.decode("utf-8", "replace") for b in raw], pa.string())
    return keys


def _headers(hdrs: tuple[Any, ...], n: int, cursors: NDArray[np.int64]) -> pa.Array:
    counts, hk_len, hk_data, hv_len, hv_data = hdrs
    total = int(cursors[3])
    list_type = SPARK_KAFKA_SCHEMA.field("headers").type
    if total == 0:
        return pa.nulls(n, list_type)
    keys = _header_keys((hk_len, hk_data), total)
    values = _binary((hv_len, hv_data), total, pa.binary())
    entries = pa.StructArray.from_arrays([keys, values], fields=list(HEADER_ENTRY))
    vbuf, nulls = _validity(counts[:n] > 0)
    buffers = [vbuf, _offsets(counts[:n])]
    return pa.Array.from_buffers(list_type, n, buffers, null_count=nulls, children=[entries])


def build_table(
    outputs: tuple[Any, ...], cursors: NDArray[np.int64], topic: str, partition: int
) -> pa.Table:
    """The first ``cursors[0]`` parsed records as a table in SPARK_KAFKA_SCHEMA."""
    (offsets, ts, ts_type), keys, values, hdrs = outputs
    n = int(cursors[0])
    columns = [
        _binary(keys, n, pa.binary()),
        _binary(values, n, pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.array(offsets[:n]),
        pa.array(ts[:n] * _US_PER_MS, SPARK_KAFKA_SCHEMA.field("timestamp").type),
        pa.array(ts_type[:n]),
        _headers(hdrs, n, cursors),
    ]
    return pa.Table.from_arrays(columns, schema=SPARK_KAFKA_SCHEMA)


def parse(
    chunks: list[tuple[NDArray[np.uint8], slice]],
    spans: NDArray[np.int64],
    meta: NDArray[np.int64],
    bounds: tuple[int, int],
) -> tuple[tuple[int, int, int], tuple[Any, ...], NDArray[np.int64]]:
    """Run the record parser over each chunk's batches into shared outputs.

    Returns ((error code or 0, batch index, record index), outputs, cursors).
    """
    records = int(meta[:, 0].sum())
    nbytes = int((spans[:, 1] - spans[:, 0]).sum())
    outputs = empty_outputs(records, nbytes)
    cursors = np.zeros(8, np.int64)
    for payload, batches in chunks:
        err, batch, record = parse_batches(  # type: ignore[call-arg]  # numba dispatcher
            payload, spans[batches], meta[batches], bounds, *outputs, cursors
        )
        if err:
            return (err, batches.start + batch, record), outputs, cursors
    return (0, -1, -1), outputs, cursors
