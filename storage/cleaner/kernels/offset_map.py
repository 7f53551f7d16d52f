"""The cleaner's bounded key -> offset map (Kafka's ``SkimpyOffsetMap``, kafka-format.md §11.2).

A fixed budget (``log.cleaner.dedupe.buffer.size``) is split into ``budget // 24`` slots of 24
bytes: a 16-byte digest of a key and the int64 offset of its latest record. Keys are compared by
digest only, as Kafka does. Open addressing with Kafka's probe sequence; an all-zero digest marks
an empty slot. The table is allocated once, so memory never grows with the number of keys: when
the map reaches ``slots * load_factor`` entries the cleaner stops and cleans in several passes.

The digest: Kafka uses MD5, and so does this map by default (``MD5``: the same slots as Kafka's,
which the tests check). The cleaner uses MurmurHash3 x64_128 instead (``MURMUR3``,
``murmur``): the map is never written anywhere, so the digest decides nothing in the
cleaned log except on a 128-bit collision between two keys (which drops the older key's records
under MD5 too). It was measured: once the per-batch Python work was gone, MD5 (about 0.2 us a key,
computed twice per record, in the map build and the filter) was the largest cost of a compaction,
more than the whole plain read-and-rewrite of the same bytes; MurmurHash3 costs a fifth of that.
Slot layout, probe sequence and memory bound are unchanged.
"""

from __future__ import annotations

import hashlib

import numba
import numpy as np
import numpy.typing as npt

from kafkatier.storage.cleaner.kernels.md5 import md5_many
from kafkatier.storage.cleaner.kernels.murmur import murmur3_many
from kafkatier.storage.cleaner.kernels.slots import (
    HASH_SIZE,
    Bits,
    Table,
    get_digest,
    put_digest_marking,
)

BYTES_PER_ENTRY = 24
MD5 = 0
"""Kafka's digest: slots and probe sequences exactly as Kafka's map (tests compare)."""
MURMUR3 = 1
"""MurmurHash3 x64_128 (``murmur``): the cleaner's, for speed; same 16 bytes a slot."""


@numba.njit(cache=True, nogil=True)
def digest_words(
    buf: npt.NDArray[np.uint8], positions: npt.NDArray[np.int64],
    lengths: npt.NDArray[np.int64], digest: int,
) -> Table:  # fmt: skip
    """(n, 2) digest words of the key slices (rows of negative length left unset)."""
    out = np.empty((positions.shape[0], 2), np.uint64)
    if digest == MURMUR3:
        murmur3_many(buf, positions, lengths, out)
    else:
        md5_many(buf, positions, lengths, out)
    return out


@numba.njit(cache=True, nogil=True)
def _put_many(
    table: Table, words: Table, key_offsets: npt.NDArray[np.int64], size: int, limit: int,
    sup: Bits, sup_start: int,
) -> tuple[int, int]:  # fmt: skip
    """Insert in order until the map holds ``limit`` entries, marking each replaced offset in
    ``sup`` as the kernels' puts do (the rewrite relies on every put marking); returns (entries
    put, new size)."""
    for i in range(words.shape[0]):
        if size >= limit:
            return i, size
        lo, hi = words[i, 0], words[i, 1]
        size += put_digest_marking(table, lo, hi, key_offsets[i], sup, sup_start)
    return words.shape[0], size


@numba.njit(cache=True, nogil=True)
def _get_many(table: Table, words: Table) -> npt.NDArray[np.int64]:
    out = np.empty(words.shape[0], np.int64)
    for i in range(words.shape[0]):
        out[i] = get_digest(table, words[i, 0], words[i, 1])
    return out


def _words(digests: npt.NDArray[np.uint8]) -> Table:
    """(n, 16) digests as (n, 2) little-endian uint64 words, the table's form."""
    return np.ascontiguousarray(digests, dtype=np.uint8).view("<u8").reshape(-1, 2)


def hash_keys(keys: list[bytes], digest: int = MD5) -> npt.NDArray[np.uint8]:
    """The digests of ``keys`` as an (n, 16) array (the map's key form)."""
    if digest == MURMUR3:
        buf = np.frombuffer(b"".join(keys) + b"\0", dtype=np.uint8)  # never an empty buffer
        lengths = np.array([len(k) for k in keys], dtype=np.int64)
        positions = (np.cumsum(lengths) - lengths).astype(np.int64)
        words = digest_words(buf, positions, lengths, MURMUR3)
        return words.astype("<u8").view(np.uint8).reshape(len(keys), HASH_SIZE)
    joined = b"".join(hashlib.md5(k).digest() for k in keys)
    return np.frombuffer(joined, dtype=np.uint8).reshape(len(keys), HASH_SIZE)


class OffsetMap:
    """Kafka's SkimpyOffsetMap: ``slots`` 24-byte entries in one array allocated once per use,
    ``table`` (slots, 3) uint64: the MD5 digest's bytes 0-7 and 8-15 as little-endian words (so
    the slot's first 16 bytes are the digest, as in Kafka's buffer; all zero where empty), then
    the offset. One slot is one contiguous 24 bytes, so a probe touches one cache line or two.
    The array comes zeroed from the allocator, so only the pages used cost resident memory."""

    def __init__(self, memory_bytes: int, load_factor: float = 0.9, digest: int = MD5) -> None:
        self.digest = digest
        self.slots = memory_bytes // BYTES_PER_ENTRY
        if self.slots < 1:
            raise ValueError(f"dedupe buffer of {memory_bytes} bytes holds no 24-byte entry")
        self.load_factor = load_factor
        self.desired_size = int(self.slots * load_factor)
        """Kafka's capacity: entries the budget holds (the cleaner stops and makes another pass
        when the map reaches it)."""
        self.table: Table = np.zeros((self.slots, 3), dtype=np.uint64)
        self.superseded: Bits = np.zeros(0, dtype=np.uint8)
        """Bit ``i``: the record at ``superseded_start + i`` has a later record with the same
        digest in the map (see :meth:`clear`); empty when the budget leaves no room for it."""
        self.superseded_start = 0
        self.size = 0
        self.latest_offset = -1

    @property
    def max_desired_size(self) -> int:
        """Entries the map takes before it counts as full: Kafka's :attr:`desired_size`, or
        fewer if the table has fewer rows than the budget (:meth:`clear` with ``max_keys``),
        so a wrong bound costs an extra pass, never an overfull table."""
        return min(self.desired_size, int(self.table.shape[0] * self.load_factor))

    @property
    def hashes(self) -> npt.NDArray[np.uint8]:
        """The digests, (slots, 16) uint8 (a view)."""
        rows = self.table.shape[0]
        return self.table.view(np.uint8).reshape(rows, BYTES_PER_ENTRY)[:, :HASH_SIZE]

    @property
    def offsets(self) -> npt.NDArray[np.int64]:
        """The offsets, (slots,) int64 (a view)."""
        return self.table[:, 2].view(np.int64)

    @property
    def nbytes(self) -> int:
        return int(self.table.nbytes)

    @property
    def utilization(self) -> float:
        return self.size / self.slots

    def clear(self, max_keys: int | None = None, start: int = 0) -> None:
        """Empty again; a fresh zeroed array (dropping the old one first) rather than a fill,
        which would make every page of the budget resident even for a few keys.

        ``max_keys``: the cleaner maps the offsets [``start``, ``start + max_keys``), so it puts
        at most ``max_keys`` keys. The table then has ``max_keys / load_factor + 2`` rows when
        that is below the budget's slots: a map with fewer possible keys than Kafka's capacity
        never fills up, whatever its table size, so only memory and speed change. Measured on
        the compaction bench (1M offsets, 128 MiB budget): first touches of the budget's pages
        (page faults, TLB misses) made the map build three times slower than on a table sized
        to the offsets. The probe sequence is Kafka's over the rows present (the same as
        Kafka's when the table has the budget's slots, as without ``max_keys``).

        When the table and one bit per offset still fit the budget, :attr:`superseded` gets the
        bits: the puts that replace an entry mark the old offset, so the rewrite can drop those
        records without hashing their keys again (one more cost measured on the bench)."""
        rows = self.slots
        bits = 0
        if max_keys is not None:
            keys = max(max_keys, 0)
            rows = min(self.slots, int(keys / self.load_factor) + 2)  # rows * factor >= keys
            room = self.slots * BYTES_PER_ENTRY - rows * BYTES_PER_ENTRY
            bits = (keys + 7) // 8 if (keys + 7) // 8 <= room else 0
        if self.size or rows != self.table.shape[0]:
            del self.table
            self.table = np.zeros((rows, 3), dtype=np.uint64)
        self.superseded = np.zeros(bits, dtype=np.uint8)
        self.superseded_start = start
        self.size = 0
        self.latest_offset = -1

    def put_hashes(self, hashes: npt.NDArray[np.uint8], offsets: npt.NDArray[np.int64]) -> int:
        """Put entries in order while the map is below its desired size (Kafka checks the size
        before every put, even of a key already present); returns how many were put."""
        done, self.size = _put_many(self.table, _words(hashes), offsets, self.size,
                                    self.max_desired_size, self.superseded,
                                    self.superseded_start)  # fmt: skip
        return int(done)

    def put_keys(
        self,
        buf: npt.NDArray[np.uint8],
        positions: npt.NDArray[np.int64],
        lengths: npt.NDArray[np.int64],
        offsets: npt.NDArray[np.int64],
    ) -> int:
        """:meth:`put_hashes` for the keys ``buf[positions[i] : positions[i] + lengths[i]]``."""
        words = digest_words(buf, positions, lengths, self.digest)
        done, self.size = _put_many(self.table, words, offsets, self.size, self.max_desired_size,
                                    self.superseded, self.superseded_start)  # fmt: skip
        return int(done)

    def get_keys(
        self, buf: npt.NDArray[np.uint8], positions: npt.NDArray[np.int64],
        lengths: npt.NDArray[np.int64],
    ) -> npt.NDArray[np.int64]:  # fmt: skip
        """:meth:`get_hashes` for key slices of ``buf``."""
        words = digest_words(buf, positions, lengths, self.digest)
        result: npt.NDArray[np.int64] = _get_many(self.table, words)
        return result

    def put(self, key: bytes, offset: int) -> bool:
        """One entry; False (nothing put) when the map is at its desired size."""
        return self.put_hashes(self.digests([key]), np.array([offset], dtype=np.int64)) == 1

    def get_hashes(self, hashes: npt.NDArray[np.uint8]) -> npt.NDArray[np.int64]:
        """Each key's offset, -1 for a key not in the map."""
        result: npt.NDArray[np.int64] = _get_many(self.table, _words(hashes))
        return result

    def get(self, key: bytes) -> int:
        return int(self.get_hashes(self.digests([key]))[0])

    def digests(self, keys: list[bytes]) -> npt.NDArray[np.uint8]:
        """The keys in this map's digest, (n, 16)."""
        return hash_keys(keys, self.digest)

    def update_latest_offset(self, offset: int) -> None:
        self.latest_offset = offset
