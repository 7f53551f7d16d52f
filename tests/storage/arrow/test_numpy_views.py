"""``storage.arrow.numpy_views``: validity bitmaps and integer values read from Arrow's buffers
give what pyarrow's own conversion gives (sliced arrays, chunked ones, every integer width, the
null type), without importing pandas (pyarrow's conversion does)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from kafkatier.storage.arrow.numpy_views import int_values, validity

TYPES = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(),
         pa.uint64()]  # fmt: skip


def _arrays(typ: pa.DataType) -> list[pa.Array | pa.ChunkedArray]:
    values = [None if i % 7 == 3 else (i * 37) % 120 for i in range(70)]
    whole = pa.array(values, typ)
    no_nulls = pa.array([v or 0 for v in values], typ)
    return [whole, whole.slice(5, 41), whole.slice(13), no_nulls, no_nulls.slice(9, 9),
            pa.chunked_array([whole.slice(0, 20), whole.slice(33, 11), no_nulls.slice(3, 5)]),
            pa.chunked_array([], typ), pa.array([None, None, None], typ)]  # fmt: skip


@pytest.mark.parametrize("typ", TYPES, ids=str)
def test_what_pyarrow_converts(typ: pa.DataType) -> None:
    for arr in _arrays(typ):
        valid = arr.is_valid()
        want_valid = np.asarray(valid.to_numpy(zero_copy_only=False), bool) if len(arr) else []
        assert validity(arr).tolist() == list(want_valid), arr
        got = int_values(arr)
        assert got.dtype == np.int64 and len(got) == len(arr)
        want = arr.to_pylist()
        assert [v for v, ok in zip(got.tolist(), want_valid, strict=True) if ok] == [
            v for v in want if v is not None
        ], arr


def test_large_unsigned_values_and_the_null_type() -> None:
    big = pa.array([2**63 - 1, 0, 5], pa.uint64())
    assert int_values(big).tolist() == [2**63 - 1, 0, 5]
    nulls = pa.array([None] * 4)  # the null type: no buffers at all
    assert validity(nulls).tolist() == [False] * 4 and int_values(nulls).tolist() == [0] * 4


def test_pandas_is_not_imported(tmp_path: Path) -> None:
    """In a process that reads its arrays from an Arrow file (building them from Python
    objects imports pandas too)."""
    path = tmp_path / "x.arrow"
    table = pa.table({"x": pa.array([1, None, 3], pa.int32())})
    with pa.ipc.new_file(path, table.schema) as writer:
        writer.write_table(table)
        writer.write_table(table.slice(1))
    script = (
        "import sys, pyarrow as pa\n"
        "from kafkatier.storage.arrow.numpy_views import int_values, validity\n"
        f"x = pa.ipc.open_file({str(path)!r}).read_all().column('x')\n"
        "valid = validity(x)\n"
        "print(valid.tolist(), int_values(x)[valid].tolist(), 'pandas' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=True)  # fmt: skip
    assert done.stdout.split() == ["[True,", "False,", "True,", "False,", "True]", "[1,", "3,",
                                   "3]", "False"]  # fmt: skip
