"""``headers.c`` through cffi: the batch headers of a window of a ``.log`` file framed in one
call, as :class:`kafkatier.storage.log.tail.LogFile` frames them in Python
(``tests/storage/log/test_tail.py`` holds the two to the same rows over real Kafka logs, torn
tails and damaged headers).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from kafkatier.storage import wire
from kafkatier.storage.native import kernels

FIELDS = 7
"""``KT_HEADER_FIELDS``: position, size, base offset, last offset, magic, attributes, producer
id."""
SMALLEST = wire.LOG_OVERHEAD + wire.MIN_LEGACY_RECORD_SIZE
"""Bytes of the smallest batch a file can hold (a legacy v0 message without key or value)."""


def walk_headers(window: bytes, start: int, limit: int) -> tuple[npt.NDArray[np.int64], int]:
    """The batches framed from ``window[start:]`` (rows of :data:`FIELDS`, positions from the
    window's start) and where framing stopped; ``limit``: the file's bytes from the window's
    start (a batch may end past the window, not past the file)."""
    lib: Any = kernels.library()
    rest = np.frombuffer(window, np.uint8, offset=start)
    rows = np.empty((len(rest) // SMALLEST + 1, FIELDS), np.int64)
    end = np.empty(1, np.int64)
    count = lib.kt_walk_headers(
        kernels.readable(rest), len(rest), limit - start, kernels.output(rows), rows.shape[0],
        kernels.output(end),
    )  # fmt: skip
    found = rows[:count]
    found[:, 0] += start
    return found, start + int(end[0])
