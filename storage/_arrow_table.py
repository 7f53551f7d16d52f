"""Kernel outputs -> Arrow arrays in SPARK_KAFKA_SCHEMA, without copying the byte buffers."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from kafkatier.storage._arrow_decode_kernels import empty_outputs, parse_batches

HEADER_ENTRY = pa.struct([("key", pa.string()), ("value", pa.binary())])
SPARK_KAFKA_SCHEMA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("timestampType", pa.int32()),
        ("headers", pa.list_(pa.field("element", HEADER_ENTRY))),
    ]
)
"""Spark's Kafka source schema with includeHeaders (KafkaRecordToRowConverter), as Spark's
ArrowUtils maps it: TimestampType is timestamp[us] with the session time zone (UTC here), list
elements are named "element", and ``headers`` is null for a record without headers."""

_US_PER_MS = 1000


def _validity(valid: NDArray[np.uint8], n: int) -> tuple[pa.Buffer | None, int]:
    nulls = n - int(np.count_nonzero(valid[:n]))
    if nulls == 0:
        return None, 0
    return pa.py_buffer(np.packbits(valid[:n], bitorder="little")), nulls


def _binary(
    col: tuple[NDArray[np.int32], NDArray[np.uint8], NDArray[np.uint8] | None],
    n: int,
    nbytes: int,
    arrow_type: pa.DataType,
) -> pa.Array:
    offsets, data, valid = col
    vbuf, nulls = (None, 0) if valid is None else _validity(valid, n)
    buffers = [vbuf, pa.py_buffer(offsets[: n + 1]), pa.py_buffer(data[:nbytes])]
    return pa.Array.from_buffers(arrow_type, n, buffers, null_count=nulls)


def _header_keys(hk: tuple[Any, Any], count: int, nbytes: int) -> pa.Array:
    """Header keys as strings; Kafka decodes invalid UTF-8 with replacement characters."""
    keys = _binary((hk[0], hk[1], None), count, nbytes, pa.string())
    try:
        keys.validate(full=True)
    except pa.ArrowInvalid:  # rare: fall back to Python's decoder, as Java's String does
        raw = keys.view(pa.binary()).to_pylist()
        keys = pa.array([b.decode("utf-8", "replace") for b in raw], pa.string())
    return keys


def _headers(hdrs: tuple[Any, ...], n: int, cursors: NDArray[np.int64]) -> pa.Array:
    list_off, list_valid, hk_off, hk_data, hv_off, hv_data, hv_valid = hdrs
    count = int(cursors[3])
    keys = _header_keys((hk_off, hk_data), count, int(cursors[4]))
    values = _binary((hv_off, hv_data, hv_valid), count, int(cursors[5]), pa.binary())
    entries = pa.StructArray.from_arrays([keys, values], fields=list(HEADER_ENTRY))
    vbuf, nulls = _validity(list_valid, n)
    list_type = SPARK_KAFKA_SCHEMA.field("headers").type
    buffers = [vbuf, pa.py_buffer(list_off[: n + 1])]
    return pa.Array.from_buffers(list_type, n, buffers, null_count=nulls, children=[entries])


def build_table(
    outputs: tuple[Any, ...], cursors: NDArray[np.int64], topic: str, partition: int
) -> pa.Table:
    """The first ``cursors[0]`` parsed records as a table in SPARK_KAFKA_SCHEMA."""
    (offsets, ts, ts_type), keys, values, hdrs = outputs
    n = int(cursors[0])
    columns = [
        _binary(keys, n, int(cursors[1]), pa.binary()),
        _binary(values, n, int(cursors[2]), pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.array(offsets[:n]),
        pa.array(ts[:n] * _US_PER_MS, SPARK_KAFKA_SCHEMA.field("timestamp").type),
        pa.array(ts_type[:n]),
        _headers(hdrs, n, cursors),
    ]
    return pa.Table.from_arrays(columns, schema=SPARK_KAFKA_SCHEMA)


def parse(
    payload: NDArray[np.uint8],
    spans: NDArray[np.int64],
    meta: NDArray[np.int64],
    bounds: tuple[int, int],
) -> tuple[tuple[int, int, int], tuple[Any, ...], NDArray[np.int64]]:
    """Run the record parser over ``spans`` of ``payload``: (error, outputs, cursors)."""
    records = int(meta[:, 0].sum())
    nbytes = int((spans[:, 1] - spans[:, 0]).sum())
    outputs = empty_outputs(records, nbytes)
    cursors = np.zeros(8, np.int64)
    error = parse_batches(payload, spans, meta, bounds, *outputs, cursors)
    return error, outputs, cursors
