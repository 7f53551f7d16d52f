"""MD5 (RFC 1321) of a key slice in numba, for the offset map's Kafka-exact digest
(``offset_map.MD5``: Kafka's ``SkimpyOffsetMap`` hashes keys with MD5; the tests compare our slots
with Kafka's). The digest comes back as two little-endian uint64 words (digest bytes 0-7 and 8-15),
the offset map's slot form.

The cleaner itself digests with MurmurHash3 (``murmur``), so this is the plain table-driven form
of the algorithm (one loop over the 64 steps): it compiles in a few seconds, where the unrolled
four-lane form it replaced cost a minute of numba compilation on a fresh install for a digest the
cleaner does not use (the ``.nbi`` times of an empty ``NUMBA_CACHE_DIR`` after
``pytest tests/storage/cleaner/test_compact.py``: 64 s for md5, 121 s -> 52 s in all).
"""

from __future__ import annotations

import numba
import numpy as np
import numpy.typing as npt

U8 = npt.NDArray[np.uint8]
_M = 0xFFFFFFFF
_K = np.array([int(abs(np.sin(i + 1)) * 2**32) & _M for i in range(64)], dtype=np.int64)
"""RFC 1321's sine table: K[i] = floor(|sin(i + 1)| * 2^32)."""
_S = np.array([7, 12, 17, 22] * 4 + [5, 9, 14, 20] * 4 + [4, 11, 16, 23] * 4
              + [6, 10, 15, 21] * 4, dtype=np.int64)  # fmt: skip
"""The left rotation of each step."""


@numba.njit(cache=True, nogil=True)
def _block(buf: U8, pos: int, n: int, o: int, last: bool, m: npt.NDArray[np.int64]) -> None:
    """The 16 little-endian message words of block ``o`` of the message padded with 0x80, zeros
    and (in the last block) its bit length."""
    for w in range(16):
        word = 0
        for t in range(4):
            at = o + 4 * w + t
            if at < n:
                word |= int(buf[pos + at]) << (8 * t)
            elif at == n:
                word |= 0x80 << (8 * t)
        m[w] = word
    if last:
        m[14] = (8 * n) & _M
        m[15] = (8 * n) >> 32


@numba.njit(cache=True, nogil=True)
def md5_words(buf: U8, pos: int, n: int) -> tuple[np.uint64, np.uint64]:
    """MD5 of ``buf[pos : pos + n]`` as (digest bytes 0-7, bytes 8-15), little-endian words."""
    a0, b0, c0, d0 = 0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476
    m = np.empty(16, np.int64)
    blocks = (n + 8) // 64 + 1
    for blk in range(blocks):
        _block(buf, pos, n, 64 * blk, blk == blocks - 1, m)
        a, b, c, d = a0, b0, c0, d0
        for i in range(64):
            if i < 16:
                f, g = (b & c) | (~b & d), i
            elif i < 32:
                f, g = (d & b) | (~d & c), (5 * i + 1) % 16
            elif i < 48:
                f, g = b ^ c ^ d, (3 * i + 5) % 16
            else:
                f, g = c ^ (b | ~d), (7 * i) % 16
            x = (a + (f & _M) + _K[i] + m[g]) & _M
            a, d, c = d, c, b
            b = (b + (((x << _S[i]) | (x >> (32 - _S[i]))) & _M)) & _M
        a0, b0, c0, d0 = (a0 + a) & _M, (b0 + b) & _M, (c0 + c) & _M, (d0 + d) & _M
    return np.uint64(a0 | (b0 << 32)), np.uint64(c0 | (d0 << 32))


@numba.njit(cache=True, nogil=True)
def md5_into(buf: U8, pos: int, n: int, out: U8) -> None:
    """The 16 digest bytes of ``buf[pos : pos + n]`` into ``out``."""
    lo, hi = md5_words(buf, pos, n)
    for t in range(8):
        out[t] = np.uint8((lo >> np.uint64(8 * t)) & np.uint64(0xFF))
        out[8 + t] = np.uint8((hi >> np.uint64(8 * t)) & np.uint64(0xFF))


@numba.njit(cache=True, nogil=True)
def md5_many(buf: U8, positions: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64],
             out: npt.NDArray[np.uint64]) -> None:  # fmt: skip
    """``out[i]`` = :func:`md5_words` of key ``i`` (length < 0: left as it is)."""
    for i in range(positions.shape[0]):
        if lengths[i] >= 0:
            out[i, 0], out[i, 1] = md5_words(buf, positions[i], lengths[i])
