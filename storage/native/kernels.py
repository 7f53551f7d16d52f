"""``kernels.c`` through ctypes, as functions of the same names and arguments as the numba
kernels they stand in for (``kafkatier.storage.arrow.encode_kernels``,
``kafkatier.storage.partitioner_kernels``): numpy arrays in, numpy arrays out.

ctypes releases the GIL for each call, as the numba kernels' ``nogil`` does. Every array is
handed over as a pointer to contiguous memory of the C type, converted first where it is not
(the columns the encoder builds already are, so that costs nothing in practice).
"""

from __future__ import annotations

import ctypes
from ctypes import POINTER, Structure, byref, c_int64, c_void_p
from pathlib import Path
from typing import Any

import numpy as np

from kafkatier.storage.native.build import BuildError, build

Array = Any
_LIB: list[ctypes.CDLL] = []


class _Column(Structure):
    _fields_ = [("starts", c_void_p), ("data", c_void_p), ("lengths", c_void_p)]


class _Headers(Structure):
    _fields_ = [("list_offsets", c_void_p), ("key", _Column), ("value", _Column)]


_SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "kt_payload_sizes": (None, [c_int64, POINTER(_Column), POINTER(_Column), POINTER(_Headers),
                                c_void_p]),
    "kt_plan_batches": (c_int64, [c_int64, c_void_p, c_void_p, c_int64, c_int64, c_int64,
                                  c_void_p, c_void_p, c_void_p, c_void_p]),
    "kt_write_records": (c_int64, [c_void_p, c_int64, c_void_p, c_void_p, c_void_p, c_void_p,
                                   POINTER(_Column), POINTER(_Column), POINTER(_Headers),
                                   c_void_p, c_int64]),
    "kt_scatter_rows": (None, [c_void_p, c_int64, c_void_p, c_void_p, c_int64]),
    "kt_gather_rows": (None, [c_void_p, c_int64, c_void_p, c_int64, c_void_p]),
    "kt_hash_all32": (None, [c_void_p, c_void_p, c_void_p, c_int64, c_int64, c_void_p]),
    "kt_hash_all64": (None, [c_void_p, c_void_p, c_void_p, c_int64, c_int64, c_void_p]),
}  # fmt: skip


def bind(path: Path) -> None:
    """Load the library at ``path``, building it first if it is not there (or will not load:
    a truncated file left by a full disk is rebuilt once). BuildError when it cannot be had."""
    if _LIB:
        return
    if not path.exists():
        build(path)
    try:
        lib = ctypes.CDLL(str(path))
    except OSError:
        build(path)
        try:
            lib = ctypes.CDLL(str(path))
        except OSError as exc:
            raise BuildError(f"cannot load {path}: {exc}") from exc
    for name, (restype, argtypes) in _SIGNATURES.items():
        function = getattr(lib, name)
        function.restype, function.argtypes = restype, argtypes
    _LIB.append(lib)


def _c(array: Array, dtype: Any) -> Array:
    """``array`` as contiguous memory of ``dtype`` (itself when it already is)."""
    return np.ascontiguousarray(array, dtype=dtype)


def _ptr(array: Array) -> int:
    return int(array.ctypes.data)


def _column(col: tuple[Array, Array, Array], keep: list[Array]) -> _Column:
    starts, data, lengths = _c(col[0], np.int64), _c(col[1], np.uint8), _c(col[2], np.int64)
    keep += (starts, data, lengths)
    return _Column(_ptr(starts), _ptr(data), _ptr(lengths))


def _headers(hdr: tuple[Array, ...], keep: list[Array]) -> _Headers:
    if len(hdr[0]) == 0:
        return _Headers(None, _Column(), _Column())
    offsets = _c(hdr[0], np.int64)
    keep.append(offsets)
    return _Headers(_ptr(offsets), _column(hdr[1:4], keep), _column(hdr[4:7], keep))


def payload_sizes(
    key: tuple[Array, Array, Array], value: tuple[Array, Array, Array], hdr: tuple[Array, ...]
) -> Array:
    """Per record: bytes of key, value and headers, the parts that do not depend on the batch."""
    keep: list[Array] = []
    n = len(value[2])
    out = np.empty(n, np.int64)
    k, v, h = _column(key, keep), _column(value, keep), _headers(hdr, keep)
    _LIB[0].kt_payload_sizes(n, byref(k), byref(v), byref(h), _ptr(out))
    return out


def plan_batches(
    payload: Array, ts: Array, max_bytes: int, max_records: int, overhead: int
) -> tuple[Array, Array, Array, Array, int]:
    """Cut records into batches (see encode_kernels.plan_batches: same results)."""
    payload, ts = _c(payload, np.int64), _c(ts, np.int64)
    n = len(payload)
    starts = np.empty(n + 1, np.int64)
    body, sizes, max_ts = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64)
    nb = _LIB[0].kt_plan_batches(
        n, _ptr(payload), _ptr(ts), max_bytes, max_records, overhead,
        _ptr(starts), _ptr(body), _ptr(sizes), _ptr(max_ts),
    )  # fmt: skip
    if nb < 0:
        return starts[:0], body, sizes[:0], max_ts[:0], -1 - nb
    return starts[: nb + 1], body, sizes[:nb], max_ts[:nb], -1


def write_records(
    buf: Array, positions: Array, starts: Array, body: Array, ts: Array,
    key: tuple[Array, Array, Array], value: tuple[Array, Array, Array], hdr: tuple[Array, ...],
    sizes: Array, overhead: int,
) -> int:  # fmt: skip
    """Write every batch's records after its header; the count of batches off their plan."""
    keep: list[Array] = []
    positions, starts, body = _c(positions, np.int64), _c(starts, np.int64), _c(body, np.int64)
    ts, sizes = _c(ts, np.int64), _c(sizes, np.int64)
    k, v, h = _column(key, keep), _column(value, keep), _headers(hdr, keep)
    _writable(buf)
    wrong: int = _LIB[0].kt_write_records(
        _ptr(buf), len(starts) - 1, _ptr(positions), _ptr(starts), _ptr(body), _ptr(ts),
        byref(k), byref(v), byref(h), _ptr(sizes), overhead,
    )  # fmt: skip
    return wrong


def scatter_rows(buf: Array, positions: Array, rows: Array) -> None:
    """Write row b of ``rows`` at ``positions[b]`` (batch headers, rebased offsets)."""
    _writable(buf)
    positions, rows = _c(positions, np.int64), _c(rows, np.uint8)
    _LIB[0].kt_scatter_rows(_ptr(buf), len(positions), _ptr(positions), _ptr(rows), rows.shape[1])


def gather_rows(buf: Array, positions: Array, width: int) -> Array:
    """Copy ``width`` bytes from each position into one row each (batch headers)."""
    buf, positions = _c(buf, np.uint8), _c(positions, np.int64)
    out = np.empty((len(positions), width), np.uint8)
    _LIB[0].kt_gather_rows(_ptr(buf), len(positions), _ptr(positions), width, _ptr(out))
    return out


def hash_all(data: Array, offsets: Array, valid: Array, num_partitions: int) -> Array:
    """Per key: its partition (``num_partitions`` > 0) or signed murmur2 (0); nulls give -1."""
    n = len(offsets) - 1
    wide = offsets.dtype == np.int64
    offsets = _c(offsets, np.int64 if wide else np.int32)
    valid = valid.view(np.uint8) if valid.dtype == np.bool_ else valid  # no copy of bools
    data, valid = _c(data, np.uint8), _c(valid, np.uint8)
    out = np.empty(max(n, 0), np.int32)
    hash_fn = _LIB[0].kt_hash_all64 if wide else _LIB[0].kt_hash_all32
    hash_fn(_ptr(data), _ptr(offsets), _ptr(valid), max(n, 0), num_partitions, _ptr(out))
    return out


def _writable(buf: Array) -> None:
    """The kernels write ``buf`` in place: it must be contiguous bytes that may be written."""
    if buf.dtype != np.uint8 or not buf.flags.c_contiguous or not buf.flags.writeable:
        raise ValueError("the output buffer must be writable contiguous uint8")
