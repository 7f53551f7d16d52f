"""``offset_map.c`` through cffi: the cleaner's offset-map build over a run of plain batches,
:func:`kafkatier.storage.cleaner.kernels.chunks.map_chunk`'s work for the MurmurHash3 digest
with the same results (``tests/storage/native/test_offset_map.py`` holds the two to the same
table, size, latest offset and superseded bits), in about half numba's time on a buffer in
cache (``offset_map.c`` has the figures).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from kafkatier.storage.native import kernels

SCRATCH_RECORDS = 1024
"""Records of one batch the scratch starts with room for (grown to a larger batch's count)."""


class PlainMap:
    """``map_chunk`` into one map build's table and superseded bits, handed to the library
    once, with the scratch it needs per record of a batch (its key's digest, its offset and its
    first probe), reused from call to call (one build's: not shared between threads)."""

    def __init__(
        self, table: npt.NDArray[np.uint64], sup: npt.NDArray[np.uint8],
        records: int = SCRATCH_RECORDS,
    ) -> None:  # fmt: skip
        self._lib: Any = kernels.library()
        self._map = [kernels.output(table), table.shape[0]]
        self._sup = [kernels.output(sup), sup.shape[0] * 8]
        self.result = np.empty(4, np.int64)
        self._result = kernels.output(self.result)
        self.grow(records)

    def grow(self, records: int) -> None:
        """Room for a batch of ``records`` records."""
        self.capacity = records
        self._scratch = [kernels.output(np.empty(n, dtype))
                         for n, dtype in ((2 * records, np.uint64), (records, np.int64),
                                          (records, np.int64))]  # fmt: skip

    def __call__(
        self, buf: npt.NDArray[np.uint8], pos: int, start: int, size: int, limit: int,
        latest: int, sup_start: int,
    ) -> tuple[int, bool, int, int]:  # fmt: skip
        """``map_chunk(table, buf, pos, start, size, limit, latest, MURMUR3, sup, sup_start)``:
        (where it stopped, map full, size, latest offset)."""
        data = kernels.readable(buf)
        while True:
            need = self._lib.kt_map_plain(
                *self._map, data, buf.shape[0], pos, start, size, limit, latest, *self._sup,
                sup_start, *self._scratch, self.capacity, self._result,
            )  # fmt: skip
            pos, full, size, latest = self.result.tolist()
            if need == 0:
                return pos, bool(full), size, latest
            self.grow(int(need))  # a batch of more records: room for it, then on from it
