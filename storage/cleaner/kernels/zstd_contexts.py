"""libzstd's decompression and compression contexts of a thread, made by the codec kernels at
their first zstd batch and kept for the thread's life.

The kernels (``codec_runs.inflate_runs`` and ``deflate_runs``, ``ahead.inflate_chunk``) made and
freed a context each call, several hundred calls a compaction: a new context allocates its
workspace again and faults its pages in at the first frame. Kept instead (as zstandard's
``ZstdCompressor`` keeps its own), a zstd compaction on the compaction bench (1M records, 100k
keys) took 0.560 s against 0.678 s, CPU 0.80 against 0.93 (medians of 8 alternating runs,
2026-11-30). A context is one thread's: the kernels release the GIL, so two threads never share
one. They are freed when the thread ends (its :class:`ZstdContexts` is collected).
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import numba
import numpy as np
import numpy.typing as npt

from kafkatier.storage.cleaner.kernels.codec_runs import CCTX, DCTX, zstd_free_cctx, zstd_free_dctx

Box = npt.NDArray[np.uint64]


@numba.njit(cache=True, nogil=True)
def _free(box: Any) -> None:
    if box[DCTX] != 0:
        zstd_free_dctx(box[DCTX])
        box[DCTX] = 0
    if box[CCTX] != 0:
        zstd_free_cctx(box[CCTX])
        box[CCTX] = 0


class ZstdContexts:
    """A box of two context pointers (``codec_runs.DCTX``, ``CCTX``; 0: none yet) the kernels
    fill at first need, freed with this object."""

    __slots__ = ("box",)

    def __init__(self) -> None:
        self.box: Box = np.zeros(2, dtype=np.uint64)

    def __del__(self) -> None:
        # at interpreter exit numpy's methods and the kernels' module may be gone: the
        # process's memory goes with it, and nothing may be printed
        with contextlib.suppress(Exception):
            if self.box[DCTX] or self.box[CCTX]:
                _free(self.box)


_LOCAL = threading.local()


def of_thread() -> Box:
    """The calling thread's box (made at its first call)."""
    found: ZstdContexts | None = getattr(_LOCAL, "contexts", None)
    if found is None:
        found = _LOCAL.contexts = ZstdContexts()
    return found.box
