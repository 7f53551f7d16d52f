"""One numba call per batch for the cleaner's two record walks (``storage.cleaner.fast``): hashing
each key and probing the offset map inline, so nothing per record passes through Python or numpy."""

from __future__ import annotations

import numba
import numpy as np
import numpy.typing as npt

from kafkatier.storage.cleaner.kernels.offset_map import digest_words
from kafkatier.storage.cleaner.kernels.records import KEY_LEN, KEY_POS, OFF_DELTA, VALUE_LEN
from kafkatier.storage.cleaner.kernels.slots import (
    Bits,
    Table,
    first_slots,
    get_at,
    is_superseded,
    put_marking,
    resolve,
)

U8 = npt.NDArray[np.uint8]
I64 = npt.NDArray[np.int64]


ENTRY = -2
"""``select_batch``'s mark for a record known to be its key's entry (not hashed, not looked up)."""


@numba.njit(cache=True, nogil=True)
def _hash_keys(buf: U8, rows: I64, lengths: I64, digest: int) -> Table:
    """The digest words of each record's key whose ``lengths`` entry is not negative, computed
    before any map access (MD5 then runs four keys at a time, ``md5_many``)."""
    return digest_words(buf, np.ascontiguousarray(rows[:, KEY_POS]), lengths, digest)


@numba.njit(cache=True, nogil=True)
def map_batch(
    table: Table, buf: U8, rows: I64, base_offset: int, start: int, size: int, limit: int,
    digest: int, sup: Bits, sup_start: int,
) -> tuple[bool, int, int]:  # fmt: skip
    """Put every keyed record at or after ``start``, checking the size before each put as Kafka
    does: (False, size, offset of the last record put, -1 if none) as soon as the map is full,
    else (True, size, -1). The last put's offset is the map's latest offset when it filled inside
    this batch (Kafka's ``SkimpyOffsetMap.put`` records every put's offset). Replaced offsets are
    marked in ``sup`` (``OffsetMap.superseded``)."""
    lengths = rows[:, KEY_LEN].copy()
    for i in range(rows.shape[0]):
        if base_offset + rows[i, OFF_DELTA] < start:
            lengths[i] = -1
    words = _hash_keys(buf, rows, lengths, digest)
    guesses = first_slots(table, words, lengths)
    last_put = -1
    for i in range(rows.shape[0]):
        if lengths[i] < 0:
            continue
        if size >= limit:
            return False, size, last_put
        lo, hi = words[i, 0], words[i, 1]
        slot = resolve(table, lo, hi, guesses[i])
        last_put = base_offset + rows[i, OFF_DELTA]
        size += put_marking(table, slot, lo, hi, last_put, sup, sup_start)
    return True, size, -1


@numba.njit(cache=True, nogil=True)
def select_batch(
    table: Table, buf: U8, rows: I64, base_offset: int, latest: int, retain_deletes: bool,
    digest: int, sup: Bits, sup_start: int,
) -> tuple[I64, int, int]:  # fmt: skip
    """(indexes kept, tombstones dropped as expired, tombstones kept): Kafka's
    ``shouldRetainRecord`` for each record of a data batch. Within ``sup``'s range no key is
    looked up: a marked record is below its key's entry, an unmarked keyed one is that entry
    (every put that replaces an entry marks the offset it replaces), as ``clean_filter.c``
    decides (so both keep the same records of a batch whose offsets are not those the map saw,
    as in a corrupt one)."""
    keep = np.empty(rows.shape[0], np.int64)
    kept = expired = tombstones = 0
    lengths = rows[:, KEY_LEN].copy()
    for i in range(rows.shape[0]):
        offset = base_offset + rows[i, OFF_DELTA]
        if offset > latest or is_superseded(sup, sup_start, offset):
            lengths[i] = -1
        elif lengths[i] >= 0 and 0 <= offset - sup_start < sup.shape[0] * 8:
            lengths[i] = ENTRY
    words = _hash_keys(buf, rows, lengths, digest)
    guesses = first_slots(table, words, lengths)
    for i in range(rows.shape[0]):
        offset = base_offset + rows[i, OFF_DELTA]
        has_value = rows[i, VALUE_LEN] >= 0
        if offset > latest:
            retained = True
        elif lengths[i] == -1:  # keyless, or superseded
            retained = False
        else:
            newest = lengths[i] == ENTRY or offset >= get_at(
                table, resolve(table, words[i, 0], words[i, 1], guesses[i])
            )
            retained = newest and (has_value or retain_deletes)
            if newest and not retained:
                expired += 1
        if retained:
            keep[kept] = i
            kept += 1
            if not has_value:
                tombstones += 1
    return keep[:kept], expired, tombstones
