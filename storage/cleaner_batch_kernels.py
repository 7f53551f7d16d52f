"""One numba call per batch for the cleaner's two record walks (``cleaner_fast``): hashing each
key and probing the offset map inline, so nothing per record passes through Python or numpy."""

from __future__ import annotations

import numba
import numpy as np
import numpy.typing as npt

from kafkatier.storage.cleaner_kernels import KEY_LEN, KEY_POS, OFF_DELTA, VALUE_LEN, md5_into
from kafkatier.storage.offset_map import HASH_SIZE, _get_one, _put_one

U8 = npt.NDArray[np.uint8]
I64 = npt.NDArray[np.int64]


@numba.njit(cache=True, nogil=True)
def map_batch(
    hashes: U8, offsets: I64, buf: U8, rows: I64, base_offset: int, start: int, size: int,
    limit: int,
) -> tuple[bool, int]:  # fmt: skip
    """Put every keyed record at or after ``start``, checking the size before each put as Kafka
    does; (False, size) as soon as the map is full, else (True, size)."""
    h = np.empty(HASH_SIZE, np.uint8)
    scratch = np.empty(64, np.uint8)
    state = np.empty(4, np.uint32)
    m = np.empty(16, np.uint32)
    for i in range(rows.shape[0]):
        offset = base_offset + rows[i, OFF_DELTA]
        if rows[i, KEY_LEN] < 0 or offset < start:
            continue
        if size >= limit:
            return False, size
        md5_into(buf, rows[i, KEY_POS], rows[i, KEY_LEN], h, scratch, state, m)
        size += _put_one(hashes, offsets, h, offset)
    return True, size


@numba.njit(cache=True, nogil=True)
def select_batch(
    hashes: U8, offsets: I64, buf: U8, rows: I64, base_offset: int, latest: int,
    retain_deletes: bool,
) -> tuple[I64, int, int]:  # fmt: skip
    """(indexes kept, tombstones dropped as expired, tombstones kept): Kafka's
    ``shouldRetainRecord`` for each record of a data batch."""
    keep = np.empty(rows.shape[0], np.int64)
    kept = expired = tombstones = 0
    h = np.empty(HASH_SIZE, np.uint8)
    scratch = np.empty(64, np.uint8)
    state = np.empty(4, np.uint32)
    m = np.empty(16, np.uint32)
    for i in range(rows.shape[0]):
        offset = base_offset + rows[i, OFF_DELTA]
        has_value = rows[i, VALUE_LEN] >= 0
        if offset > latest:
            retained = True
        elif rows[i, KEY_LEN] < 0:
            retained = False
        else:
            md5_into(buf, rows[i, KEY_POS], rows[i, KEY_LEN], h, scratch, state, m)
            newest = offset >= _get_one(hashes, offsets, h)
            retained = newest and (has_value or retain_deletes)
            if newest and not retained:
                expired += 1
        if retained:
            keep[kept] = i
            kept += 1
            if not has_value:
                tombstones += 1
    return keep[:kept], expired, tombstones
