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


class MapScratch:
    """Per record of the batch being mapped: its key's digest, its offset and its first probe,
    reused from call to call, handed to the library once (one map build's: not shared between
    threads); and the table and superseded bits of the last call, handed over once each."""

    def __init__(self, records: int = SCRATCH_RECORDS) -> None:
        self.out = np.empty(4, np.int64)
        self._out = kernels.output(self.out)
        self._arrays: tuple[object, object, Any, Any] | None = None
        self.grow(records)

    def grow(self, records: int) -> None:
        """Room for a batch of ``records`` records."""
        self.capacity = records
        self._records = [kernels.output(np.empty(n, dtype))
                         for n, dtype in ((2 * records, np.uint64), (records, np.int64),
                                          (records, np.int64))]  # fmt: skip

    def arguments(self, table: npt.NDArray[np.uint64], sup: npt.NDArray[np.uint8]) -> list[Any]:
        """The call's table, superseded bits and scratch as the library takes them."""
        if self._arrays is None or self._arrays[0] is not table or self._arrays[1] is not sup:
            self._arrays = (table, sup, kernels.output(table), kernels.output(sup))
        return [self._arrays[2], self._arrays[3], *self._records, self._out]


def map_plain(
    table: npt.NDArray[np.uint64], buf: npt.NDArray[np.uint8], pos: int, start: int, size: int,
    limit: int, latest: int, sup: npt.NDArray[np.uint8], sup_start: int, scratch: MapScratch,
) -> tuple[int, bool, int, int]:  # fmt: skip
    """``map_chunk(table, buf, pos, start, size, limit, latest, MURMUR3, sup, sup_start)``:
    (where it stopped, map full, size, latest offset)."""
    lib: Any = kernels.library()
    data = kernels.readable(buf)
    while True:
        table_ptr, sup_ptr, digests, offsets, guesses, out = scratch.arguments(table, sup)
        need = lib.kt_map_plain(
            table_ptr, table.shape[0], data, buf.shape[0], pos, start, size, limit, latest,
            sup_ptr, sup.shape[0] * 8, sup_start, digests, offsets, guesses, scratch.capacity,
            out,
        )  # fmt: skip
        pos, full, size, latest = scratch.out.tolist()
        if need == 0:
            return pos, bool(full), size, latest
        scratch.grow(int(need))  # a batch of more records: room for it, then on from it
