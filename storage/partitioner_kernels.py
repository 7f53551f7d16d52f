"""numba's loop of Kafka's murmur2 partitioner over an Arrow column's buffers (see
kafkatier.storage.partitioner; ``storage/native/kernels.c`` is its C build)."""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from kafkatier.storage.partitioner import NULL_KEY_PARTITION, SEED, M, R


@njit(cache=True, nogil=True)
def _murmur2_span(data: Any, start: int, end: int) -> int:
    """The unsigned 32-bit murmur2 of ``data[start:end]`` (uint64 arithmetic, masked)."""
    mask = np.uint64(0xFFFFFFFF)
    m = np.uint64(M)
    length = end - start
    h = (np.uint64(SEED) ^ np.uint64(length)) & mask
    blocks = length - (length % 4)
    for i in range(start, start + blocks, 4):
        k = np.uint64(data[i]) | (np.uint64(data[i + 1]) << np.uint64(8))
        k |= (np.uint64(data[i + 2]) << np.uint64(16)) | (np.uint64(data[i + 3]) << np.uint64(24))
        k = (k * m) & mask
        k ^= k >> np.uint64(R)
        k = (k * m) & mask
        h = ((h * m) & mask) ^ k
    tail = length % 4
    if tail > 0:
        for j in range(tail - 1, -1, -1):
            h ^= np.uint64(data[start + blocks + j]) << np.uint64(8 * j)
        h = (h * m) & mask
    h ^= h >> np.uint64(13)
    h = (h * m) & mask
    h ^= h >> np.uint64(15)
    return int(h)


@njit(cache=True, nogil=True)
def hash_all(data: Any, offsets: Any, valid: Any, num_partitions: int) -> Any:
    """Per key: its partition (``num_partitions`` > 0) or signed murmur2 (0); nulls give -1."""
    n = len(offsets) - 1
    out = np.empty(n, dtype=np.int32)
    for i in range(n):
        if not valid[i]:
            out[i] = NULL_KEY_PARTITION
            continue
        h = _murmur2_span(data, offsets[i], offsets[i + 1])
        if num_partitions > 0:
            out[i] = (h & 0x7FFFFFFF) % num_partitions
        else:
            out[i] = h - 4294967296 if h >= 2147483648 else h
    return out
