"""The cleaner's bounded key -> offset map (Kafka's ``SkimpyOffsetMap``, kafka-format.md §11.2).

A fixed budget (``log.cleaner.dedupe.buffer.size``) is split into ``budget // 24`` slots of 24
bytes: the 16-byte MD5 of a key and the int64 offset of its latest record. Keys are compared by
hash only, as Kafka does. Open addressing with Kafka's probe sequence; an all-zero hash marks an
empty slot. The arrays are allocated once, so memory never grows with the number of keys: when the
map reaches ``slots * load_factor`` entries the cleaner stops and cleans in several passes.
"""

from __future__ import annotations

import hashlib

import numba
import numpy as np
import numpy.typing as npt

BYTES_PER_ENTRY = 24
HASH_SIZE = 16


@numba.njit(cache=True, nogil=True)
def _read_int(h: npt.NDArray[np.uint8], pos: int) -> int:
    value = (np.int64(h[pos]) << 24) | (np.int64(h[pos + 1]) << 16)
    value |= (np.int64(h[pos + 2]) << 8) | np.int64(h[pos + 3])
    if value >= 2**31:
        value -= 2**32
    return int(value)


@numba.njit(cache=True, nogil=True)
def _slot_of(hashes: npt.NDArray[np.uint8], h: npt.NDArray[np.uint8], slots: int) -> int:
    """The slot holding ``h``, or the empty slot where it belongs (Kafka's ``positionOf``)."""
    attempt = 0
    while True:
        probe = _read_int(h, min(attempt, HASH_SIZE - 4)) + max(0, attempt - HASH_SIZE + 4)
        probe = (probe + 2**31) % 2**32 - 2**31  # int32 overflow, as Java's int addition
        if probe == -(2**31):  # Utils.abs maps Integer.MIN_VALUE to 0
            probe = 0
        slot = abs(probe) % slots
        empty = True
        same = True
        for i in range(HASH_SIZE):
            b = hashes[slot, i]
            if b != 0:
                empty = False
            if b != h[i]:
                same = False
        if empty or same:
            return slot
        attempt += 1


@numba.njit(cache=True, nogil=True)
def _put_many(
    hashes: npt.NDArray[np.uint8],
    offsets: npt.NDArray[np.int64],
    keys: npt.NDArray[np.uint8],
    key_offsets: npt.NDArray[np.int64],
    size: int,
    limit: int,
) -> tuple[int, int]:
    """Insert in order until the map holds ``limit`` entries; returns (entries put, new size)."""
    slots = offsets.shape[0]
    for i in range(keys.shape[0]):
        if size >= limit:
            return i, size
        slot = _slot_of(hashes, keys[i], slots)
        if offsets[slot] < 0:
            size += 1
            hashes[slot, :] = keys[i]
        offsets[slot] = key_offsets[i]
    return keys.shape[0], size


@numba.njit(cache=True, nogil=True)
def _get_many(
    hashes: npt.NDArray[np.uint8], offsets: npt.NDArray[np.int64], keys: npt.NDArray[np.uint8]
) -> npt.NDArray[np.int64]:
    out = np.empty(keys.shape[0], np.int64)
    slots = offsets.shape[0]
    for i in range(keys.shape[0]):
        out[i] = offsets[_slot_of(hashes, keys[i], slots)]
    return out


def hash_keys(keys: list[bytes]) -> npt.NDArray[np.uint8]:
    """The MD5 digests of ``keys`` as an (n, 16) array (the map's key form)."""
    joined = b"".join(hashlib.md5(k).digest() for k in keys)
    return np.frombuffer(joined, dtype=np.uint8).reshape(len(keys), HASH_SIZE)


class OffsetMap:
    """Kafka's SkimpyOffsetMap: ``slots`` 24-byte entries in two preallocated numpy arrays
    (``hashes`` (slots, 16) uint8 MD5 digests, ``offsets`` int64, -1 where empty)."""

    def __init__(self, memory_bytes: int, load_factor: float = 0.9) -> None:
        self.slots = memory_bytes // BYTES_PER_ENTRY
        if self.slots < 1:
            raise ValueError(f"dedupe buffer of {memory_bytes} bytes holds no 24-byte entry")
        self.max_desired_size = int(self.slots * load_factor)
        self.hashes = np.zeros((self.slots, HASH_SIZE), dtype=np.uint8)
        self.offsets = np.full(self.slots, -1, dtype=np.int64)
        self.size = 0
        self.latest_offset = -1

    @property
    def nbytes(self) -> int:
        return int(self.hashes.nbytes + self.offsets.nbytes)

    @property
    def utilization(self) -> float:
        return self.size / self.slots

    def clear(self) -> None:
        self.hashes.fill(0)
        self.offsets.fill(-1)
        self.size = 0
        self.latest_offset = -1

    def put_hashes(self, hashes: npt.NDArray[np.uint8], offsets: npt.NDArray[np.int64]) -> int:
        """Put entries in order while the map is below its desired size (Kafka checks the size
        before every put, even of a key already present); returns how many were put."""
        done, self.size = _put_many(
            self.hashes, self.offsets, hashes, offsets, self.size, self.max_desired_size
        )
        return int(done)

    def put(self, key: bytes, offset: int) -> bool:
        """One entry; False (nothing put) when the map is at its desired size."""
        return self.put_hashes(hash_keys([key]), np.array([offset], dtype=np.int64)) == 1

    def get_hashes(self, hashes: npt.NDArray[np.uint8]) -> npt.NDArray[np.int64]:
        """Each key's offset, -1 for a key not in the map."""
        result: npt.NDArray[np.int64] = _get_many(self.hashes, self.offsets, hashes)
        return result

    def get(self, key: bytes) -> int:
        return int(self.get_hashes(hash_keys([key]))[0])

    def update_latest_offset(self, offset: int) -> None:
        self.latest_offset = offset
