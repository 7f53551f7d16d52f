"""The slots of the cleaner's offset map (``offset_map``): Kafka's ``SkimpyOffsetMap`` probe
sequence over a (slots, 3) uint64 table whose rows are a 16-byte digest (two little-endian words;
all zero: an empty slot) and an int64 offset, and the superseded bits the cleaner keeps beside
it. numba kernels, called from the map's methods and from the cleaner's batch kernels."""

from __future__ import annotations

import numba
import numpy as np
import numpy.typing as npt

HASH_SIZE = 16
Table = npt.NDArray[np.uint64]
Bits = npt.NDArray[np.uint8]


@numba.njit(cache=True, nogil=True, inline="always")
def _byte(lo: np.uint64, hi: np.uint64, k: int) -> int:
    word = lo if k < 8 else hi
    return int((word >> np.uint64(8 * (k & 7))) & np.uint64(0xFF))


@numba.njit(cache=True, nogil=True, inline="always")
def _probe(lo: np.uint64, hi: np.uint64, attempt: int, slots: int) -> int:
    """Kafka's ``positionOf`` for one attempt: a big-endian int read from the digest at
    ``min(attempt, 12)``, plus ``max(0, attempt - 12)``, with Java's int overflow and
    ``Utils.abs``, modulo the slots."""
    p = min(attempt, HASH_SIZE - 4)
    probe = (_byte(lo, hi, p) << 24) | (_byte(lo, hi, p + 1) << 16)
    probe |= (_byte(lo, hi, p + 2) << 8) | _byte(lo, hi, p + 3)
    probe += max(0, attempt - HASH_SIZE + 4)
    probe = (probe + 2**31) % 2**32 - 2**31  # int32 overflow, as Java's int addition
    if probe == -(2**31):  # Utils.abs maps Integer.MIN_VALUE to 0
        probe = 0
    return abs(probe) % slots


@numba.njit(cache=True, nogil=True, inline="always")
def _fits(table: Table, slot: int, lo: np.uint64, hi: np.uint64) -> bool:
    """The slot holds the digest or is empty."""
    a, b = table[slot, 0], table[slot, 1]
    return bool((a == lo and b == hi) or (a == 0 and b == 0))


@numba.njit(cache=True, nogil=True)
def _slot_of(table: Table, lo: np.uint64, hi: np.uint64) -> int:
    """The slot holding the digest, or the empty slot where it belongs (Kafka's probing)."""
    slots = table.shape[0]
    attempt = 0
    while True:
        slot = _probe(lo, hi, attempt, slots)
        if _fits(table, slot, lo, hi):
            return slot
        attempt += 1


@numba.njit(cache=True, nogil=True)
def first_slots(table: Table, words: Table, use: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Each digest's first probe slot (where ``use[i] >= 0``), or -1 when that slot holds
    another digest. Why: a probe of a large table is a cache miss; here the loads of a whole
    batch are independent, so the CPU overlaps them, and the probes that follow
    (:func:`resolve`) find their slots cached. Measured on the compaction bench: the map
    probes were the largest cost left after the key digests."""
    out = np.full(words.shape[0], -1, np.int64)
    slots = table.shape[0]
    for i in range(words.shape[0]):
        if use[i] >= 0:
            slot = _probe(words[i, 0], words[i, 1], 0, slots)
            if _fits(table, slot, words[i, 0], words[i, 1]):
                out[i] = slot
    return out


@numba.njit(cache=True, nogil=True, inline="always")
def resolve(table: Table, lo: np.uint64, hi: np.uint64, guess: int) -> int:
    """:func:`_slot_of`, starting from a :func:`first_slots` guess: the guess is the first
    probe, so when it still fits (an earlier put may have filled it since) it is the answer."""
    if guess >= 0 and _fits(table, guess, lo, hi):
        return guess
    return _slot_of(table, lo, hi)


@numba.njit(cache=True, nogil=True)
def put_at(table: Table, slot: int, lo: np.uint64, hi: np.uint64, offset: int) -> int:
    """Store ``offset`` in the digest's slot (from :func:`resolve`); 1 when the key was new."""
    new = 0
    if table[slot, 0] == 0 and table[slot, 1] == 0:
        table[slot, 0] = lo
        table[slot, 1] = hi
        new = 1
    table[slot, 2] = np.uint64(offset)
    return new


@numba.njit(cache=True, nogil=True)
def put_marking(
    table: Table, slot: int, lo: np.uint64, hi: np.uint64, offset: int, sup: Bits, sup_start: int
) -> int:
    """:func:`put_at`, first marking the offset it replaces as superseded in ``sup`` (bit ``i``:
    offset ``sup_start + i``; offsets outside it are not marked)."""
    if table[slot, 0] != 0 or table[slot, 1] != 0:
        old = int(np.int64(table[slot, 2])) - sup_start
        if 0 <= old < sup.shape[0] * 8:
            sup[old >> 3] |= np.uint8(1 << (old & 7))
    return put_at(table, slot, lo, hi, offset)


@numba.njit(cache=True, nogil=True, inline="always")
def is_superseded(sup: Bits, sup_start: int, offset: int) -> bool:
    """A later record with the same digest was put after this offset's (so ``offset`` is below
    the key's map entry); False where unknown."""
    i = offset - sup_start
    return bool(0 <= i < sup.shape[0] * 8 and (sup[i >> 3] >> (i & 7)) & 1 == 1)


@numba.njit(cache=True, nogil=True)
def all_marked(sup: Bits, sup_start: int, first: int, last: int) -> bool:
    """Whether every offset from ``first`` to ``last`` is marked superseded (none: False): a
    batch whose every record the rewrite drops (a batch with a gap in its offsets, cleaned
    before, has unmarked ones)."""
    if last < first:
        return False
    for offset in range(first, last + 1):  # noqa: SIM110 - numba compiles the loop
        if not is_superseded(sup, sup_start, offset):
            return False
    return True


@numba.njit(cache=True, nogil=True)
def get_at(table: Table, slot: int) -> int:
    """The offset in the digest's slot (from :func:`resolve`), -1 when empty."""
    if table[slot, 0] == 0 and table[slot, 1] == 0:
        return -1
    return int(np.int64(table[slot, 2]))


@numba.njit(cache=True, nogil=True)
def put_digest_marking(
    table: Table, lo: np.uint64, hi: np.uint64, offset: int, sup: Bits, sup_start: int
) -> int:
    """Store ``offset`` for the digest, marking the offset it replaces (:func:`put_marking`);
    returns 1 when the key was new."""
    return put_marking(table, _slot_of(table, lo, hi), lo, hi, offset, sup, sup_start)


@numba.njit(cache=True, nogil=True)
def get_digest(table: Table, lo: np.uint64, hi: np.uint64) -> int:
    """The offset stored for the digest, -1 when absent."""
    return get_at(table, _slot_of(table, lo, hi))
