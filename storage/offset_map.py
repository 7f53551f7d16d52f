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

from kafkatier.storage.cleaner_kernels import md5_into

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
def _is_empty(hashes: npt.NDArray[np.uint8], slot: int) -> bool:
    for i in range(HASH_SIZE):  # noqa: SIM110 - a plain loop is what numba compiles best
        if hashes[slot, i] != 0:
            return False
    return True


@numba.njit(cache=True, nogil=True)
def _put_one(
    hashes: npt.NDArray[np.uint8], offsets: npt.NDArray[np.int64], h: npt.NDArray[np.uint8],
    offset: int,
) -> int:  # fmt: skip
    """Store ``offset`` for ``h``; returns 1 when the key was new."""
    slot = _slot_of(hashes, h, offsets.shape[0])
    new = 0
    if _is_empty(hashes, slot):
        hashes[slot, :] = h
        new = 1
    offsets[slot] = offset
    return new


@numba.njit(cache=True, nogil=True)
def _get_one(hashes: npt.NDArray[np.uint8], offsets: npt.NDArray[np.int64],
             h: npt.NDArray[np.uint8]) -> int:  # fmt: skip
    slot = _slot_of(hashes, h, offsets.shape[0])
    return -1 if _is_empty(hashes, slot) else int(offsets[slot])


@numba.njit(cache=True, nogil=True)
def _put_keys(
    hashes: npt.NDArray[np.uint8], offsets: npt.NDArray[np.int64], buf: npt.NDArray[np.uint8],
    positions: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64],
    key_offsets: npt.NDArray[np.int64], size: int, limit: int,
) -> tuple[int, int]:  # fmt: skip
    """``_put_many`` hashing each key slice of ``buf`` on the way (no digest array)."""
    h = np.empty(HASH_SIZE, np.uint8)
    scratch = np.empty(64, np.uint8)
    state = np.empty(4, np.uint32)
    m = np.empty(16, np.uint32)
    for i in range(positions.shape[0]):
        if size >= limit:
            return i, size
        md5_into(buf, positions[i], lengths[i], h, scratch, state, m)
        size += _put_one(hashes, offsets, h, key_offsets[i])
    return positions.shape[0], size


@numba.njit(cache=True, nogil=True)
def _get_keys(
    hashes: npt.NDArray[np.uint8], offsets: npt.NDArray[np.int64], buf: npt.NDArray[np.uint8],
    positions: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64],
) -> npt.NDArray[np.int64]:  # fmt: skip
    out = np.empty(positions.shape[0], np.int64)
    h = np.empty(HASH_SIZE, np.uint8)
    scratch = np.empty(64, np.uint8)
    state = np.empty(4, np.uint32)
    m = np.empty(16, np.uint32)
    for i in range(positions.shape[0]):
        md5_into(buf, positions[i], lengths[i], h, scratch, state, m)
        out[i] = _get_one(hashes, offsets, h)
    return out


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
    for i in range(keys.shape[0]):
        if size >= limit:
            return i, size
        size += _put_one(hashes, offsets, keys[i], key_offsets[i])
    return keys.shape[0], size


@numba.njit(cache=True, nogil=True)
def _get_many(
    hashes: npt.NDArray[np.uint8], offsets: npt.NDArray[np.int64], keys: npt.NDArray[np.uint8]
) -> npt.NDArray[np.int64]:
    out = np.empty(keys.shape[0], np.int64)
    for i in range(keys.shape[0]):
        out[i] = _get_one(hashes, offsets, keys[i])
    return out


def hash_keys(keys: list[bytes]) -> npt.NDArray[np.uint8]:
    """The MD5 digests of ``keys`` as an (n, 16) array (the map's key form)."""
    joined = b"".join(hashlib.md5(k).digest() for k in keys)
    return np.frombuffer(joined, dtype=np.uint8).reshape(len(keys), HASH_SIZE)


class OffsetMap:
    """Kafka's SkimpyOffsetMap: ``slots`` 24-byte entries in two numpy arrays allocated once per
    use (``hashes`` (slots, 16) uint8 MD5 digests, all zero where empty; ``offsets`` int64).
    They come zeroed from the allocator, so only the slots used ever cost resident memory."""

    def __init__(self, memory_bytes: int, load_factor: float = 0.9) -> None:
        self.slots = memory_bytes // BYTES_PER_ENTRY
        if self.slots < 1:
            raise ValueError(f"dedupe buffer of {memory_bytes} bytes holds no 24-byte entry")
        self.max_desired_size = int(self.slots * load_factor)
        self.hashes = np.zeros((self.slots, HASH_SIZE), dtype=np.uint8)
        self.offsets = np.zeros(self.slots, dtype=np.int64)
        self.size = 0
        self.latest_offset = -1

    @property
    def nbytes(self) -> int:
        return int(self.hashes.nbytes + self.offsets.nbytes)

    @property
    def utilization(self) -> float:
        return self.size / self.slots

    def clear(self) -> None:
        """Empty again; fresh zeroed arrays (dropping the old ones first) rather than a fill,
        which would make every page of the budget resident even for a few keys."""
        if self.size:
            shape = self.hashes.shape
            del self.hashes, self.offsets
            self.hashes = np.zeros(shape, dtype=np.uint8)
            self.offsets = np.zeros(shape[0], dtype=np.int64)
        self.size = 0
        self.latest_offset = -1

    def put_hashes(self, hashes: npt.NDArray[np.uint8], offsets: npt.NDArray[np.int64]) -> int:
        """Put entries in order while the map is below its desired size (Kafka checks the size
        before every put, even of a key already present); returns how many were put."""
        done, self.size = _put_many(
            self.hashes, self.offsets, hashes, offsets, self.size, self.max_desired_size
        )
        return int(done)

    def put_keys(
        self,
        buf: npt.NDArray[np.uint8],
        positions: npt.NDArray[np.int64],
        lengths: npt.NDArray[np.int64],
        offsets: npt.NDArray[np.int64],
    ) -> int:
        """:meth:`put_hashes` for the keys ``buf[positions[i] : positions[i] + lengths[i]]``."""
        done, self.size = _put_keys(self.hashes, self.offsets, buf, positions, lengths, offsets,
                                    self.size, self.max_desired_size)  # fmt: skip
        return int(done)

    def get_keys(
        self, buf: npt.NDArray[np.uint8], positions: npt.NDArray[np.int64],
        lengths: npt.NDArray[np.int64],
    ) -> npt.NDArray[np.int64]:  # fmt: skip
        """:meth:`get_hashes` for key slices of ``buf``."""
        result: npt.NDArray[np.int64] = _get_keys(self.hashes, self.offsets, buf, positions,
                                                  lengths)  # fmt: skip
        return result

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
