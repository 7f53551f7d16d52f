"""``kernels.c`` through cffi, as functions of the same names and arguments as the numba kernels
they stand in for (``kafkatier.storage.arrow.encode_kernels``,
``kafkatier.storage.partitioner_kernels``): numpy arrays in, numpy arrays out.

cffi rather than ctypes: a call with a dozen arrays costs a few microseconds (``from_buffer``
hands over an array's memory, read-only ones included, in about 0.2 us; ctypes took 13-20 us a
call), which matters where a micro-batch encodes a small table for each of thousands of
partitions. cffi releases the GIL for each call, as the numba kernels' ``nogil`` does. Every
array is handed over as contiguous memory of the C type, converted first where it is not (the
columns the encoder builds already are, so that costs nothing in practice).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import _cffi_backend
import numpy as np

from kafkatier.storage import wire
from kafkatier.storage.native.build import BuildError, build, declarations

Array = Any
_FFI = declarations()
_LIB: list[Any] = []
_NULL = _FFI.NULL
_FROM_BUFFER = _cffi_backend.from_buffer  # FFI.from_buffer's own call, for the hot path
_CHARS = _FFI.typeof("char[]")
_C_TYPES = {np.dtype(np.int64): "int64_t[]", np.dtype(np.uint8): "uint8_t[]",
            np.dtype(np.int32): "int32_t[]", np.dtype(np.uint64): "uint64_t[]"}  # fmt: skip


def bind(path: Path) -> None:
    """Load the library at ``path``, building it first if it is not there (or will not load:
    a truncated file left by a full disk is rebuilt once). BuildError when it cannot be had."""
    if _LIB:
        return
    if not path.exists():
        build(path)
    try:
        lib = _FFI.dlopen(str(path))
    except OSError:
        build(path)
        try:
            lib = _FFI.dlopen(str(path))
        except OSError as exc:
            raise BuildError(f"cannot load {path}: {exc}") from exc
    _LIB.append(lib)


def library() -> Any:
    """The bound library (after :func:`bind`), for the bindings of its other parts
    (``storage/native/offset_map.py``, ``clean_filter.py``)."""
    return _LIB[0]


def output(array: Array) -> Any:
    """``array`` handed to the library as writable memory (:func:`_out`)."""
    return _out(array)


def readable(array: Array) -> Any:
    """``array`` (read-only ones too; a contiguous uint8 one, as the cleaner's chunks are,
    without a copy or a type check: the hot path's call) handed to the library as bytes it
    only reads."""
    if isinstance(array, np.ndarray) and array.dtype == np.uint8 and array.flags.c_contiguous:
        return _FROM_BUFFER(_BYTES, array, False)
    return _u8(array)


def _i64(array: Array) -> Any:
    return _FFI.from_buffer("int64_t[]", np.ascontiguousarray(array, np.int64))


def _u8(array: Array) -> Any:
    return _FFI.from_buffer("uint8_t[]", np.ascontiguousarray(array, np.uint8))


def _out(array: Array) -> Any:
    """An output array (made here, contiguous) or a buffer the caller has the kernel write."""
    if not array.flags.c_contiguous or not array.flags.writeable:
        raise ValueError("a kernel's output must be writable contiguous memory")
    return _FFI.from_buffer(_C_TYPES[array.dtype], array, require_writable=True)


def _column(col: tuple[Array, ...], keep: list[Any]) -> list[Any]:
    """A ``kt_column`` initializer; ``keep`` holds the arrays' buffers until the call is done
    (the struct holds bare pointers into them)."""
    arrays = [_i64(col[0]), _u8(col[1]), _i64(col[2])]
    keep += arrays
    return arrays


def _headers(hdr: tuple[Array, ...], keep: list[Any]) -> Any:
    """A ``kt_headers`` (list offsets and two columns; all NULL: no headers column)."""
    if len(hdr[0]) == 0:
        return _FFI.new("kt_headers *", [_NULL, [_NULL] * 3, [_NULL] * 3])
    offsets = _i64(hdr[0])
    keep.append(offsets)
    return _FFI.new("kt_headers *", [offsets, _column(hdr[1:4], keep), _column(hdr[4:7], keep)])


def payload_sizes(
    key: tuple[Array, Array, Array], value: tuple[Array, Array, Array], hdr: tuple[Array, ...]
) -> Array:
    """Per record: bytes of key, value and headers, the parts that do not depend on the batch."""
    n = len(value[2])
    out = np.empty(n, np.int64)
    headers = (_i64(hdr[0]), _i64(hdr[3]), _i64(hdr[6])) if len(hdr[0]) else (_NULL,) * 3
    _LIB[0].kt_payload_sizes(n, _i64(key[2]), _i64(value[2]), *headers, _out(out))
    return out


def plan_batches(
    payload: Array, ts: Array, max_bytes: int, max_records: int, overhead: int
) -> tuple[Array, Array, Array, Array, int]:
    """Cut records into batches (see encode_kernels.plan_batches: same results)."""
    n = len(payload)
    starts = np.empty(n + 1, np.int64)
    body, sizes, max_ts = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64)
    nb = _LIB[0].kt_plan_batches(
        n, _i64(payload), _i64(ts), max_bytes, max_records, overhead,
        _out(starts), _out(body), _out(sizes), _out(max_ts),
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
    keep: list[Any] = []
    wrong: int = _LIB[0].kt_write_records(
        _out(buf), len(starts) - 1, _i64(positions), _i64(starts), _i64(body), _i64(ts),
        _i64(sizes), overhead, _FFI.new("kt_column *", _column(key, keep)),
        _FFI.new("kt_column *", _column(value, keep)), _headers(hdr, keep),
    )  # fmt: skip
    return wrong


def scatter_rows(buf: Array, positions: Array, rows: Array) -> None:
    """Write row b of ``rows`` at ``positions[b]`` (batch headers, rebased offsets)."""
    _LIB[0].kt_scatter_rows(_out(buf), len(positions), _i64(positions), _u8(rows), rows.shape[1])


def gather_rows(buf: Array, positions: Array, width: int) -> Array:
    """Copy ``width`` bytes from each position into one row each (batch headers)."""
    out = np.empty((len(positions), width), np.uint8)
    _LIB[0].kt_gather_rows(_u8(buf), len(positions), _i64(positions), width, _out(out))
    return out


def hash_all(data: Array, offsets: Array, valid: Array, num_partitions: int) -> Array:
    """Per key: its partition (``num_partitions`` > 0) or signed murmur2 (0); nulls give -1."""
    n = max(len(offsets) - 1, 0)
    out = np.empty(n, np.int32)
    valid = valid.view(np.uint8) if valid.dtype == np.bool_ else valid  # no copy of bools
    if offsets.dtype == np.int64:
        kernel, c_offsets = _LIB[0].kt_hash_all64, _i64(offsets)
    else:
        kernel = _LIB[0].kt_hash_all32
        c_offsets = _FFI.from_buffer("int32_t[]", np.ascontiguousarray(offsets, np.int32))
    kernel(_u8(data), c_offsets, _u8(valid), n, num_partitions, _out(out))
    return out


PUBLISH_EVERY = 8
"""Entries :class:`Writes` hands over at a time: each hand-over is a call into the library (1.4
us, ad hoc), and more where it wakes a sleeping thread (``writes.c``'s ``SPIN_NS``)."""


class Writes:
    """A thread of ``writes.c`` writing the entries :meth:`add` queues, taken in order, while the
    caller goes on: ``capacity`` entries at most. Each entry's buffers stay referenced here until
    :meth:`finish` (the thread reads them meanwhile); OSError where no thread can be started."""

    IOVS = 4  # iovecs an entry takes from the shared array (more: an array of its own)

    def __init__(self, capacity: int) -> None:
        self._ops = _FFI.new("kt_write[]", capacity)
        self._iovs = _FFI.new("kt_iov[]", capacity * self.IOVS)
        self._keep: list[Any] = []
        self._count = 0
        self._capacity = capacity
        self._handle = _LIB[0].kt_writes_start(self._ops)
        if self._handle == _NULL:
            raise OSError("cannot start a thread for queued writes")

    @property
    def full(self) -> bool:
        return self._count >= self._capacity

    def add(self, fd: int, views: list[memoryview], position: int, size: int) -> None:
        """Queue the writing of ``views`` (``size`` bytes in all) at ``position`` of ``fd``
        (it runs for every partition of a micro-batch: cffi's ``from_buffer`` is called
        without its Python wrapper, and each struct is set from a tuple of its fields)."""
        count, n = self._count, len(views)
        if n <= self.IOVS:
            iov = self._iovs + count * self.IOVS
        else:
            iov = _FFI.new("kt_iov[]", n)
            self._keep.append(iov)
        keep = self._keep
        for i, view in enumerate(views):
            buf = _FROM_BUFFER(_CHARS, view, False)
            keep.append(buf)
            iov[i] = (buf, view.nbytes)
        self._ops[count] = (fd, n, iov, position, size, 0)  # kt_write's fields, result last
        self._count = count = count + 1
        if not count % PUBLISH_EVERY:
            _LIB[0].kt_writes_publish(self._handle, count)

    def vacant(self) -> tuple[Any, int]:
        """The next free entry (a pointer into the array) and how many are free: for a kernel
        that fills entries itself (:func:`commit_all`), then :meth:`filled`."""
        return self._ops + self._count, self._capacity - self._count

    def filled(self, count: int, keep: list[Any]) -> None:
        """``count`` entries from :meth:`vacant` on filled (their buffers kept by ``keep``
        until :meth:`finish`), handed over at once."""
        self._keep += keep
        self._count += count
        _LIB[0].kt_writes_publish(self._handle, self._count)

    def wait(self) -> None:
        """Until every entry handed over so far is written (the thread goes on)."""
        _LIB[0].kt_writes_publish(self._handle, self._count)
        _LIB[0].kt_writes_wait(self._handle)

    def results(self, start: int, stop: int) -> list[int]:
        """The results of entries ``start`` to ``stop`` (written: after :meth:`wait`)."""
        return [self._ops[i].result for i in range(start, stop)]

    def finish(self, share: bool = True) -> list[int]:
        """Every queued entry written, those the thread has not taken by this caller beside it
        (``writes.c``; ``share`` False: by the thread alone, the caller waiting); per entry, the
        bytes written or -errno."""
        if self._handle != _NULL:
            _LIB[0].kt_writes_publish(self._handle, self._count)
            _LIB[0].kt_writes_finish(self._handle, int(share))
            self._handle = _NULL
            self._keep.clear()
        return [self._ops[i].result for i in range(self._count)]


BATCH_FIELDS = 14
"""What :func:`check_batches` gives a batch: its position, then ``BATCH_HEADER``'s 13 fields."""
CHECK_ROWS = 4096
"""Batches :func:`check_batches` reads per call (its output array: 448 KiB)."""


def check_batches(buf: memoryview) -> tuple[list[list[int]], int] | None:
    """The client batches from the start of ``buf`` that ``checks.c`` finds whole and valid
    (each: :data:`BATCH_FIELDS` ints) and where they end; None where the CPU has no CRC-32C
    instruction (nothing checked)."""
    out = np.empty((min(len(buf) // 61, CHECK_ROWS), BATCH_FIELDS), np.int64)
    end = _FFI.new("int64_t *")
    rows: list[list[int]] = []
    start = 0
    while True:
        rest = buf[start:]
        capacity = min(len(rest) // 61, CHECK_ROWS)
        count = _LIB[0].kt_check_batches(_FFI.from_buffer(rest), len(rest), _out(out), capacity,
                                         end)  # fmt: skip
        if count < 0:
            return None
        out[:count, 0] += start
        rows += out[:count].tolist()
        start += int(end[0])
        if count < capacity or capacity == 0:
            return rows, start


COMMIT_IN = 24
"""Int64s a partition gives :func:`commit_all` (``committed.c``'s ``kt_commit_in``)."""
COMMIT_OUT = 16
"""Int64s it gives back a partition (``kt_commit_out``); a batch gets 4 (its metadata)."""
_BYTES = _FFI.typeof("uint8_t[]")
_OFFSET_ENTRY, _TIME_ENTRY = wire.OFFSET_INDEX_ENTRY.size, wire.TIME_INDEX_ENTRY.size


class Committed(NamedTuple):
    """What :func:`commit_all` did: ``taken`` partitions' writes filled in (not handed over
    yet: :meth:`Writes.filled` with ``keep``), every partition's :data:`COMMIT_OUT` ints one
    after the other (partition ``k``'s from ``k * COMMIT_OUT``: one list, not a list a
    partition, which the collector would traverse), each batch's metadata (4 ints: batch ``i``'s
    from ``4 * i``; one list too), and the index entries packed (a partition's from slot
    ``batch_start + partition`` on)."""

    taken: int
    out: list[int]
    batches: list[int]
    offset_entries: bytearray
    time_entries: bytearray
    keep: list[Any]

    @property
    def width(self) -> int:
        """The ints of a partition in :attr:`out`."""
        return COMMIT_OUT


def commit_all(
    writes: Writes, fields: list[int], views: list[memoryview], producer: tuple[int, int],
    marker: bytes,
) -> Committed | None:  # fmt: skip
    """``committed.c`` over the partitions of ``fields`` (:data:`COMMIT_IN` ints each), whose
    batches are ``views`` (writable: stamped in place), for ``producer`` (id, epoch) and the
    COMMIT ``marker`` template; their writes go to ``writes``' vacant entries. None where the
    CPU has no CRC instruction (nothing done)."""
    parts, n = len(fields) // COMMIT_IN, len(views)
    ops, free = writes.vacant()
    if free < parts:
        raise ValueError(f"{parts} partitions' writes with {free} free entries")
    bufs = [_FROM_BUFFER(_BYTES, view, True) for view in views]
    markers = bytearray(parts * len(marker))
    offset_entries = bytearray(_OFFSET_ENTRY * (n + parts))
    time_entries = bytearray(_TIME_ENTRY * (n + parts))
    out, batch_out = _FFI.new("int64_t[]", parts * COMMIT_OUT), _FFI.new("int64_t[]", 4 * n)
    keep = [bufs, markers, _FFI.new("kt_iov[]", n + parts)]
    taken = _LIB[0].kt_commit_all(
        parts, _FFI.new("int64_t[]", fields), out, _FFI.new("uint8_t *[]", bufs),
        _FFI.new("int64_t[]", [view.nbytes for view in views]), batch_out, producer[0],
        producer[1], _FROM_BUFFER(_BYTES, marker, False), len(marker),
        _FROM_BUFFER(_BYTES, markers, True), _FROM_BUFFER(_BYTES, offset_entries, True),
        _FROM_BUFFER(_BYTES, time_entries, True), ops, keep[2],
    )  # fmt: skip
    if taken < 0:
        return None
    return Committed(taken, _FFI.unpack(out, parts * COMMIT_OUT), _FFI.unpack(batch_out, 4 * n),
                     offset_entries, time_entries, keep)  # fmt: skip
