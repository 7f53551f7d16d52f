"""MD5 (RFC 1321) of a key slice in numba, as the offset map hashes keys (Kafka's
``SkimpyOffsetMap`` uses MD5): the 64 steps written out with constant shifts and message words
in locals, so one 16-byte key costs one compression with no array traffic; the digest comes back
as two little-endian uint64 words (digest bytes 0-7 and 8-15), the offset map's slot form.
"""

from __future__ import annotations

import numba
import numpy as np
import numpy.typing as npt

U8 = npt.NDArray[np.uint8]
_M = 0xFFFFFFFF


@numba.njit(cache=True, nogil=True, inline="always")
def _f(b: int, c: int, d: int) -> int:
    return (b & c) | (~b & d)


@numba.njit(cache=True, nogil=True, inline="always")
def _g(b: int, c: int, d: int) -> int:
    return (d & b) | (~d & c)


@numba.njit(cache=True, nogil=True, inline="always")
def _h(b: int, c: int, d: int) -> int:
    return b ^ c ^ d


@numba.njit(cache=True, nogil=True, inline="always")
def _i(b: int, c: int, d: int) -> int:
    return c ^ (b | ~d)


@numba.njit(cache=True, nogil=True, inline="always")
def _step(a: int, b: int, f: int, k: int, w: int, s: int) -> int:
    x = (a + f + k + w) & _M
    return (b + (((x << s) | (x >> (32 - s))) & _M)) & _M


@numba.njit(cache=True, nogil=True, inline="always")
def _word(buf: U8, pos: int, n: int, off: int) -> int:
    """Little-endian word at ``off`` of the message padded with 0x80 and zeros."""
    if off + 4 <= n:
        p = pos + off
        return int(np.int64(buf[p]) | (np.int64(buf[p + 1]) << 8)
                   | (np.int64(buf[p + 2]) << 16) | (np.int64(buf[p + 3]) << 24))  # fmt: skip
    w = np.int64(0)
    if off > n:
        return 0
    for t in range(4):
        if off + t < n:
            w |= np.int64(buf[pos + off + t]) << (8 * t)
        elif off + t == n:
            w |= 0x80 << (8 * t)
    return int(w)


@numba.njit(cache=True, nogil=True)
def md5_words(buf: U8, pos: int, n: int) -> tuple[np.uint64, np.uint64]:
    """MD5 of ``buf[pos : pos + n]`` as (digest bytes 0-7, bytes 8-15), little-endian words."""
    a0, b0, c0, d0 = 0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476
    blocks = (n + 8) // 64 + 1
    for blk in range(blocks):
        o = 64 * blk
        m0, m1, m2, m3 = _word(buf, pos, n, o), _word(buf, pos, n, o + 4), \
            _word(buf, pos, n, o + 8), _word(buf, pos, n, o + 12)
        m4, m5, m6, m7 = _word(buf, pos, n, o + 16), _word(buf, pos, n, o + 20), \
            _word(buf, pos, n, o + 24), _word(buf, pos, n, o + 28)
        m8, m9, m10, m11 = _word(buf, pos, n, o + 32), _word(buf, pos, n, o + 36), \
            _word(buf, pos, n, o + 40), _word(buf, pos, n, o + 44)
        m12, m13, m14, m15 = _word(buf, pos, n, o + 48), _word(buf, pos, n, o + 52), \
            _word(buf, pos, n, o + 56), _word(buf, pos, n, o + 60)
        if blk == blocks - 1:
            m14 = (8 * n) & _M
            m15 = (8 * n) >> 32
        a, b, c, d = a0, b0, c0, d0
        a = _step(a, b, _f(b, c, d), 0xd76aa478, m0, 7)
        d = _step(d, a, _f(a, b, c), 0xe8c7b756, m1, 12)
        c = _step(c, d, _f(d, a, b), 0x242070db, m2, 17)
        b = _step(b, c, _f(c, d, a), 0xc1bdceee, m3, 22)
        a = _step(a, b, _f(b, c, d), 0xf57c0faf, m4, 7)
        d = _step(d, a, _f(a, b, c), 0x4787c62a, m5, 12)
        c = _step(c, d, _f(d, a, b), 0xa8304613, m6, 17)
        b = _step(b, c, _f(c, d, a), 0xfd469501, m7, 22)
        a = _step(a, b, _f(b, c, d), 0x698098d8, m8, 7)
        d = _step(d, a, _f(a, b, c), 0x8b44f7af, m9, 12)
        c = _step(c, d, _f(d, a, b), 0xffff5bb1, m10, 17)
        b = _step(b, c, _f(c, d, a), 0x895cd7be, m11, 22)
        a = _step(a, b, _f(b, c, d), 0x6b901122, m12, 7)
        d = _step(d, a, _f(a, b, c), 0xfd987193, m13, 12)
        c = _step(c, d, _f(d, a, b), 0xa679438e, m14, 17)
        b = _step(b, c, _f(c, d, a), 0x49b40821, m15, 22)
        a = _step(a, b, _g(b, c, d), 0xf61e2562, m1, 5)
        d = _step(d, a, _g(a, b, c), 0xc040b340, m6, 9)
        c = _step(c, d, _g(d, a, b), 0x265e5a51, m11, 14)
        b = _step(b, c, _g(c, d, a), 0xe9b6c7aa, m0, 20)
        a = _step(a, b, _g(b, c, d), 0xd62f105d, m5, 5)
        d = _step(d, a, _g(a, b, c), 0x02441453, m10, 9)
        c = _step(c, d, _g(d, a, b), 0xd8a1e681, m15, 14)
        b = _step(b, c, _g(c, d, a), 0xe7d3fbc8, m4, 20)
        a = _step(a, b, _g(b, c, d), 0x21e1cde6, m9, 5)
        d = _step(d, a, _g(a, b, c), 0xc33707d6, m14, 9)
        c = _step(c, d, _g(d, a, b), 0xf4d50d87, m3, 14)
        b = _step(b, c, _g(c, d, a), 0x455a14ed, m8, 20)
        a = _step(a, b, _g(b, c, d), 0xa9e3e905, m13, 5)
        d = _step(d, a, _g(a, b, c), 0xfcefa3f8, m2, 9)
        c = _step(c, d, _g(d, a, b), 0x676f02d9, m7, 14)
        b = _step(b, c, _g(c, d, a), 0x8d2a4c8a, m12, 20)
        a = _step(a, b, _h(b, c, d), 0xfffa3942, m5, 4)
        d = _step(d, a, _h(a, b, c), 0x8771f681, m8, 11)
        c = _step(c, d, _h(d, a, b), 0x6d9d6122, m11, 16)
        b = _step(b, c, _h(c, d, a), 0xfde5380c, m14, 23)
        a = _step(a, b, _h(b, c, d), 0xa4beea44, m1, 4)
        d = _step(d, a, _h(a, b, c), 0x4bdecfa9, m4, 11)
        c = _step(c, d, _h(d, a, b), 0xf6bb4b60, m7, 16)
        b = _step(b, c, _h(c, d, a), 0xbebfbc70, m10, 23)
        a = _step(a, b, _h(b, c, d), 0x289b7ec6, m13, 4)
        d = _step(d, a, _h(a, b, c), 0xeaa127fa, m0, 11)
        c = _step(c, d, _h(d, a, b), 0xd4ef3085, m3, 16)
        b = _step(b, c, _h(c, d, a), 0x04881d05, m6, 23)
        a = _step(a, b, _h(b, c, d), 0xd9d4d039, m9, 4)
        d = _step(d, a, _h(a, b, c), 0xe6db99e5, m12, 11)
        c = _step(c, d, _h(d, a, b), 0x1fa27cf8, m15, 16)
        b = _step(b, c, _h(c, d, a), 0xc4ac5665, m2, 23)
        a = _step(a, b, _i(b, c, d), 0xf4292244, m0, 6)
        d = _step(d, a, _i(a, b, c), 0x432aff97, m7, 10)
        c = _step(c, d, _i(d, a, b), 0xab9423a7, m14, 15)
        b = _step(b, c, _i(c, d, a), 0xfc93a039, m5, 21)
        a = _step(a, b, _i(b, c, d), 0x655b59c3, m12, 6)
        d = _step(d, a, _i(a, b, c), 0x8f0ccc92, m3, 10)
        c = _step(c, d, _i(d, a, b), 0xffeff47d, m10, 15)
        b = _step(b, c, _i(c, d, a), 0x85845dd1, m1, 21)
        a = _step(a, b, _i(b, c, d), 0x6fa87e4f, m8, 6)
        d = _step(d, a, _i(a, b, c), 0xfe2ce6e0, m15, 10)
        c = _step(c, d, _i(d, a, b), 0xa3014314, m6, 15)
        b = _step(b, c, _i(c, d, a), 0x4e0811a1, m13, 21)
        a = _step(a, b, _i(b, c, d), 0xf7537e82, m4, 6)
        d = _step(d, a, _i(a, b, c), 0xbd3af235, m11, 10)
        c = _step(c, d, _i(d, a, b), 0x2ad7d2bb, m2, 15)
        b = _step(b, c, _i(c, d, a), 0xeb86d391, m9, 21)
        a0, b0, c0, d0 = (a0 + a) & _M, (b0 + b) & _M, (c0 + c) & _M, (d0 + d) & _M
    return np.uint64(a0 | (b0 << 32)), np.uint64(c0 | (d0 << 32))


@numba.njit(cache=True, nogil=True)
def md5_into(buf: U8, pos: int, n: int, out: U8) -> None:
    """The 16 digest bytes of ``buf[pos : pos + n]`` into ``out``."""
    lo, hi = md5_words(buf, pos, n)
    for t in range(8):
        out[t] = np.uint8((lo >> np.uint64(8 * t)) & np.uint64(0xFF))
        out[8 + t] = np.uint8((hi >> np.uint64(8 * t)) & np.uint64(0xFF))


# Four keys at once: MD5 is one long dependency chain per key, so interleaving four independent
# chains lets the CPU overlap them (the lanes are 4-tuples, kept in registers).
Lanes = tuple[int, int, int, int]

@numba.njit(cache=True, nogil=True, inline="always")
def _f4(b: Lanes, c: Lanes, d: Lanes) -> Lanes:
    return (_f(b[0], c[0], d[0]), _f(b[1], c[1], d[1]), _f(b[2], c[2], d[2]),
            _f(b[3], c[3], d[3]))  # fmt: skip

@numba.njit(cache=True, nogil=True, inline="always")
def _g4(b: Lanes, c: Lanes, d: Lanes) -> Lanes:
    return (_g(b[0], c[0], d[0]), _g(b[1], c[1], d[1]), _g(b[2], c[2], d[2]),
            _g(b[3], c[3], d[3]))  # fmt: skip

@numba.njit(cache=True, nogil=True, inline="always")
def _h4(b: Lanes, c: Lanes, d: Lanes) -> Lanes:
    return (_h(b[0], c[0], d[0]), _h(b[1], c[1], d[1]), _h(b[2], c[2], d[2]),
            _h(b[3], c[3], d[3]))  # fmt: skip

@numba.njit(cache=True, nogil=True, inline="always")
def _i4(b: Lanes, c: Lanes, d: Lanes) -> Lanes:
    return (_i(b[0], c[0], d[0]), _i(b[1], c[1], d[1]), _i(b[2], c[2], d[2]),
            _i(b[3], c[3], d[3]))  # fmt: skip


@numba.njit(cache=True, nogil=True, inline="always")
def _step4(a: Lanes, b: Lanes, f: Lanes, k: int, w: Lanes, s: int) -> Lanes:
    return (_step(a[0], b[0], f[0], k, w[0], s), _step(a[1], b[1], f[1], k, w[1], s),
            _step(a[2], b[2], f[2], k, w[2], s), _step(a[3], b[3], f[3], k, w[3], s))  # fmt: skip


@numba.njit(cache=True, nogil=True, inline="always")
def _word4(buf: U8, pos: Lanes, n: Lanes, off: int) -> Lanes:
    return (_word(buf, pos[0], n[0], off), _word(buf, pos[1], n[1], off),
            _word(buf, pos[2], n[2], off), _word(buf, pos[3], n[3], off))  # fmt: skip


@numba.njit(cache=True, nogil=True, inline="always")
def _add4(x: Lanes, y: Lanes) -> Lanes:
    return ((x[0] + y[0]) & _M, (x[1] + y[1]) & _M, (x[2] + y[2]) & _M, (x[3] + y[3]) & _M)


@numba.njit(cache=True, nogil=True)
def _md5x4(buf: U8, pos: Lanes, n: Lanes, out: npt.NDArray[np.uint64], at: Lanes) -> None:
    """:func:`md5_words` of four keys of at most 55 bytes (one block each) into ``out[at[j]]``."""
    m0, m1, m2, m3 = _word4(buf, pos, n, 0), _word4(buf, pos, n, 4), _word4(buf, pos, n, 8), \
        _word4(buf, pos, n, 12)
    m4, m5, m6, m7 = _word4(buf, pos, n, 16), _word4(buf, pos, n, 20), \
        _word4(buf, pos, n, 24), _word4(buf, pos, n, 28)
    m8, m9, m10, m11 = _word4(buf, pos, n, 32), _word4(buf, pos, n, 36), \
        _word4(buf, pos, n, 40), _word4(buf, pos, n, 44)
    m12, m13 = _word4(buf, pos, n, 48), _word4(buf, pos, n, 52)
    m14 = ((8 * n[0]) & _M, (8 * n[1]) & _M, (8 * n[2]) & _M, (8 * n[3]) & _M)
    m15 = (0, 0, 0, 0)
    a0 = (0x67452301, 0x67452301, 0x67452301, 0x67452301)
    b0 = (0xEFCDAB89, 0xEFCDAB89, 0xEFCDAB89, 0xEFCDAB89)
    c0 = (0x98BADCFE, 0x98BADCFE, 0x98BADCFE, 0x98BADCFE)
    d0 = (0x10325476, 0x10325476, 0x10325476, 0x10325476)
    a, b, c, d = a0, b0, c0, d0
    a = _step4(a, b, _f4(b, c, d), 0xd76aa478, m0, 7)
    d = _step4(d, a, _f4(a, b, c), 0xe8c7b756, m1, 12)
    c = _step4(c, d, _f4(d, a, b), 0x242070db, m2, 17)
    b = _step4(b, c, _f4(c, d, a), 0xc1bdceee, m3, 22)
    a = _step4(a, b, _f4(b, c, d), 0xf57c0faf, m4, 7)
    d = _step4(d, a, _f4(a, b, c), 0x4787c62a, m5, 12)
    c = _step4(c, d, _f4(d, a, b), 0xa8304613, m6, 17)
    b = _step4(b, c, _f4(c, d, a), 0xfd469501, m7, 22)
    a = _step4(a, b, _f4(b, c, d), 0x698098d8, m8, 7)
    d = _step4(d, a, _f4(a, b, c), 0x8b44f7af, m9, 12)
    c = _step4(c, d, _f4(d, a, b), 0xffff5bb1, m10, 17)
    b = _step4(b, c, _f4(c, d, a), 0x895cd7be, m11, 22)
    a = _step4(a, b, _f4(b, c, d), 0x6b901122, m12, 7)
    d = _step4(d, a, _f4(a, b, c), 0xfd987193, m13, 12)
    c = _step4(c, d, _f4(d, a, b), 0xa679438e, m14, 17)
    b = _step4(b, c, _f4(c, d, a), 0x49b40821, m15, 22)
    a = _step4(a, b, _g4(b, c, d), 0xf61e2562, m1, 5)
    d = _step4(d, a, _g4(a, b, c), 0xc040b340, m6, 9)
    c = _step4(c, d, _g4(d, a, b), 0x265e5a51, m11, 14)
    b = _step4(b, c, _g4(c, d, a), 0xe9b6c7aa, m0, 20)
    a = _step4(a, b, _g4(b, c, d), 0xd62f105d, m5, 5)
    d = _step4(d, a, _g4(a, b, c), 0x02441453, m10, 9)
    c = _step4(c, d, _g4(d, a, b), 0xd8a1e681, m15, 14)
    b = _step4(b, c, _g4(c, d, a), 0xe7d3fbc8, m4, 20)
    a = _step4(a, b, _g4(b, c, d), 0x21e1cde6, m9, 5)
    d = _step4(d, a, _g4(a, b, c), 0xc33707d6, m14, 9)
    c = _step4(c, d, _g4(d, a, b), 0xf4d50d87, m3, 14)
    b = _step4(b, c, _g4(c, d, a), 0x455a14ed, m8, 20)
    a = _step4(a, b, _g4(b, c, d), 0xa9e3e905, m13, 5)
    d = _step4(d, a, _g4(a, b, c), 0xfcefa3f8, m2, 9)
    c = _step4(c, d, _g4(d, a, b), 0x676f02d9, m7, 14)
    b = _step4(b, c, _g4(c, d, a), 0x8d2a4c8a, m12, 20)
    a = _step4(a, b, _h4(b, c, d), 0xfffa3942, m5, 4)
    d = _step4(d, a, _h4(a, b, c), 0x8771f681, m8, 11)
    c = _step4(c, d, _h4(d, a, b), 0x6d9d6122, m11, 16)
    b = _step4(b, c, _h4(c, d, a), 0xfde5380c, m14, 23)
    a = _step4(a, b, _h4(b, c, d), 0xa4beea44, m1, 4)
    d = _step4(d, a, _h4(a, b, c), 0x4bdecfa9, m4, 11)
    c = _step4(c, d, _h4(d, a, b), 0xf6bb4b60, m7, 16)
    b = _step4(b, c, _h4(c, d, a), 0xbebfbc70, m10, 23)
    a = _step4(a, b, _h4(b, c, d), 0x289b7ec6, m13, 4)
    d = _step4(d, a, _h4(a, b, c), 0xeaa127fa, m0, 11)
    c = _step4(c, d, _h4(d, a, b), 0xd4ef3085, m3, 16)
    b = _step4(b, c, _h4(c, d, a), 0x04881d05, m6, 23)
    a = _step4(a, b, _h4(b, c, d), 0xd9d4d039, m9, 4)
    d = _step4(d, a, _h4(a, b, c), 0xe6db99e5, m12, 11)
    c = _step4(c, d, _h4(d, a, b), 0x1fa27cf8, m15, 16)
    b = _step4(b, c, _h4(c, d, a), 0xc4ac5665, m2, 23)
    a = _step4(a, b, _i4(b, c, d), 0xf4292244, m0, 6)
    d = _step4(d, a, _i4(a, b, c), 0x432aff97, m7, 10)
    c = _step4(c, d, _i4(d, a, b), 0xab9423a7, m14, 15)
    b = _step4(b, c, _i4(c, d, a), 0xfc93a039, m5, 21)
    a = _step4(a, b, _i4(b, c, d), 0x655b59c3, m12, 6)
    d = _step4(d, a, _i4(a, b, c), 0x8f0ccc92, m3, 10)
    c = _step4(c, d, _i4(d, a, b), 0xffeff47d, m10, 15)
    b = _step4(b, c, _i4(c, d, a), 0x85845dd1, m1, 21)
    a = _step4(a, b, _i4(b, c, d), 0x6fa87e4f, m8, 6)
    d = _step4(d, a, _i4(a, b, c), 0xfe2ce6e0, m15, 10)
    c = _step4(c, d, _i4(d, a, b), 0xa3014314, m6, 15)
    b = _step4(b, c, _i4(c, d, a), 0x4e0811a1, m13, 21)
    a = _step4(a, b, _i4(b, c, d), 0xf7537e82, m4, 6)
    d = _step4(d, a, _i4(a, b, c), 0xbd3af235, m11, 10)
    c = _step4(c, d, _i4(d, a, b), 0x2ad7d2bb, m2, 15)
    b = _step4(b, c, _i4(c, d, a), 0xeb86d391, m9, 21)
    a, b, c, d = _add4(a0, a), _add4(b0, b), _add4(c0, c), _add4(d0, d)
    for j in range(4):
        out[at[j], 0] = np.uint64(a[j] | (b[j] << 32))
        out[at[j], 1] = np.uint64(c[j] | (d[j] << 32))


@numba.njit(cache=True, nogil=True)
def md5_many(buf: U8, positions: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64],
             out: npt.NDArray[np.uint64]) -> None:  # fmt: skip
    """``out[i]`` = :func:`md5_words` of key ``i`` (length < 0: left as it is), four single-block
    keys at a time, any longer key alone."""
    lane_pos = [0, 0, 0, 0]
    lane_n = [0, 0, 0, 0]
    lane_at = [0, 0, 0, 0]
    k = 0
    for i in range(positions.shape[0]):
        n = lengths[i]
        if n < 0:
            continue
        if n > 55:
            out[i, 0], out[i, 1] = md5_words(buf, positions[i], n)
            continue
        lane_pos[k], lane_n[k], lane_at[k] = positions[i], n, i
        k += 1
        if k == 4:
            _md5x4(buf, (lane_pos[0], lane_pos[1], lane_pos[2], lane_pos[3]),
                   (lane_n[0], lane_n[1], lane_n[2], lane_n[3]),
                   out, (lane_at[0], lane_at[1], lane_at[2], lane_at[3]))  # fmt: skip
            k = 0
    for j in range(k):
        out[lane_at[j], 0], out[lane_at[j], 1] = md5_words(buf, lane_pos[j], lane_n[j])
