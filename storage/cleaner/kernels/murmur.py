"""MurmurHash3 x64_128 (Austin Appleby's SMHasher reference) in numba: the cleaner's key digest.

Kafka's ``SkimpyOffsetMap`` digests keys with MD5, but the map lives only in memory and is never
written, so any well-mixed 128-bit digest leaves the cleaned log the same except where two keys'
digests collide (which MD5 risks as well). Measured on the compaction bench, MD5 was the cleaner's
largest cost once the per-batch Python work was gone (about 0.2 us per key, twice per record);
this hash costs a tenth of that. The digest's 16 bytes are h1 then h2, little-endian, as the
reference writes them on x86 (``offset_map`` reads its probe positions from those bytes).
"""

from __future__ import annotations

import numba
import numpy as np
import numpy.typing as npt

U8 = npt.NDArray[np.uint8]
_C1 = np.uint64(0x87C37B91114253D5)
_C2 = np.uint64(0x4CF5AD432745937F)
KEY_SEED = 1
"""Seed of key digests: not 0, whose digest of the empty key is all zeros, the map's mark of an
empty slot (an empty key is a key, and must deduplicate like any other)."""


@numba.njit(cache=True, nogil=True, inline="always")
def _rotl(x: np.uint64, r: int) -> np.uint64:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


@numba.njit(cache=True, nogil=True, inline="always")
def _fmix(k: np.uint64) -> np.uint64:
    k ^= k >> np.uint64(33)
    k *= np.uint64(0xFF51AFD7ED558CCD)
    k ^= k >> np.uint64(33)
    k *= np.uint64(0xC4CEB9FE1A85EC53)
    k ^= k >> np.uint64(33)
    return k


@numba.njit(cache=True, nogil=True, inline="always")
def _le64(buf: U8, pos: int, n: int) -> np.uint64:
    """Little-endian uint64 of the ``n`` (<= 8) bytes at ``pos``."""
    v = np.uint64(0)
    for i in range(n):
        v |= np.uint64(buf[pos + i]) << np.uint64(8 * i)
    return v


@numba.njit(cache=True, nogil=True)
def murmur3_words(buf: U8, pos: int, n: int, seed: int = 0) -> tuple[np.uint64, np.uint64]:
    """MurmurHash3_x64_128 of ``buf[pos : pos + n]``: (h1, h2), digest bytes 0-7 and 8-15."""
    h1 = np.uint64(seed & 0xFFFFFFFF)
    h2 = h1
    for b in range(n // 16):
        k1 = _le64(buf, pos + 16 * b, 8)
        k2 = _le64(buf, pos + 16 * b + 8, 8)
        h1 ^= _rotl(k1 * _C1, 31) * _C2
        h1 = (_rotl(h1, 27) + h2) * np.uint64(5) + np.uint64(0x52DCE729)
        h2 ^= _rotl(k2 * _C2, 33) * _C1
        h2 = (_rotl(h2, 31) + h1) * np.uint64(5) + np.uint64(0x38495AB5)
    tail = pos + (n & ~15)
    rest = n & 15
    if rest > 8:
        h2 ^= _rotl(_le64(buf, tail + 8, rest - 8) * _C2, 33) * _C1
    if rest > 0:
        h1 ^= _rotl(_le64(buf, tail, min(rest, 8)) * _C1, 31) * _C2
    h1 ^= np.uint64(n)
    h2 ^= np.uint64(n)
    h1 += h2
    h2 += h1
    h1 = _fmix(h1)
    h2 = _fmix(h2)
    h1 += h2
    h2 += h1
    return h1, h2


@numba.njit(cache=True, nogil=True)
def murmur3_many(buf: U8, positions: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64],
                 out: npt.NDArray[np.uint64]) -> None:  # fmt: skip
    """``out[i]`` = :func:`murmur3_words` of key ``i`` with :data:`KEY_SEED` (length < 0: left
    as it is). An all-zero digest (the key ``b"\\x00"`` has one under seed 1) would read as an
    empty map slot, so it becomes (1, 0) - one more 128-bit value to collide with, as any digest."""
    for i in range(positions.shape[0]):
        if lengths[i] >= 0:
            out[i, 0], out[i, 1] = murmur3_words(buf, positions[i], lengths[i], KEY_SEED)
            if out[i, 0] == 0 and out[i, 1] == 0:
                out[i, 0] = 1
