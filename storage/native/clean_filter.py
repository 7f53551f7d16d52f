"""``clean_filter.c`` through cffi: the cleaner's rewrite of a run of plain batches,
:func:`kafkatier.storage.cleaner.kernels.chunks.filter_chunk`'s work for the MurmurHash3
digest with the same results (``tests/storage/native/test_clean_filter.py`` holds the two to
the same bytes, batch infos, counters and stopping point).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import numpy.typing as npt

from kafkatier.storage.native import kernels

I64 = npt.NDArray[np.int64]
SCRATCH_RECORDS = 1024
"""Records of one batch the scratch starts with room for (grown to a larger batch's count)."""


@functools.cache
def available() -> bool:
    """Whether the bound library can rewrite batches here (it needs the CPU's CRC-32C
    instruction, as the sink's checks do). Asked of the library once a process: the cleaner
    asks at every deflate (:func:`seal`), each call to the library lets the GIL go and waits
    to take it back, and py-spy put 4-7 ms of a compaction of lz4 over 1M keys there (stop
    71)."""
    return bool(kernels.library().kt_crc_available())


def seal(buf: npt.NDArray[np.uint8], infos: I64) -> None:
    """The CRC-32C of each batch of ``buf`` at ``infos``' rows (position, size, ...) written into
    its header (:func:`available` first): the batches ``codec_runs.deflate_runs`` compressed
    again. numba's CRC (eight table look-ups a step) took a tenth of a rewrite's CPU where most
    batches are rebuilt (lz4 over 1M keys on bench/compaction.py, perf, stop 71); the CPU's
    instruction takes a small part of that."""
    rows = np.ascontiguousarray(infos, dtype=np.int64)
    kernels.library().kt_seal_batches(kernels.output(buf), kernels.output(rows), rows.shape[0])


class PlainFilter:
    """``filter_chunk`` over one rewrite's arrays, handed to the library once: the map's
    table and superseded bits, the context (``ChunkFilter.ctx``), the producers' last offsets,
    the output and its batch infos and the counters (all written in place, as numba's)."""

    def __init__(
        self, table: npt.NDArray[np.uint64], sup: npt.NDArray[np.uint8], ctx: I64, pids: I64,
        last_offsets: I64, out: npt.NDArray[np.uint8], infos: I64, stats: I64,
    ) -> None:  # fmt: skip
        self._lib: Any = kernels.library()
        self._fixed = [
            kernels.output(table),
            table.shape[0],
            kernels.readable(sup),
            sup.shape[0] * 8,
        ]
        self._context = [kernels.output(ctx), kernels.output(pids),
                         kernels.output(last_offsets), pids.shape[0]]  # fmt: skip
        self._outputs = [kernels.output(out), out.shape[0], kernels.output(infos),
                         infos.shape[0], kernels.output(stats)]  # fmt: skip
        self.result = np.empty(3, np.int64)
        self._result = kernels.output(self.result)
        self.grow(SCRATCH_RECORDS)

    def grow(self, records: int) -> None:
        """Room for a batch of ``records`` records."""
        self.capacity = records
        size = int(self._lib.kt_record_size())
        self._scratch = [kernels.output(np.empty(records * size, np.uint8)),
                         kernels.output(np.empty(records, np.int64))]  # fmt: skip

    def __call__(self, buf: npt.NDArray[np.uint8], pos: int) -> tuple[int, int, int]:
        """``filter_chunk(..., buf, pos, ...)``: (where it stopped, bytes in ``out``, rows in
        ``infos``)."""
        data = kernels.readable(buf)
        while True:
            need = self._lib.kt_filter_plain(
                *self._fixed, data, buf.shape[0], pos, *self._context, *self._outputs,
                *self._scratch, self.capacity, self._result,
            )  # fmt: skip
            pos, size, count = self.result.tolist()
            if need == 0:
                return pos, size, count
            self.grow(int(need))  # a batch of more records: room for it
            if size or count:  # the batches before it written: the caller's to take first
                return pos, size, count
