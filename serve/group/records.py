"""Kafka's ``__consumer_offsets`` records: committed offsets in the broker's own format.

Record key (``OffsetCommitKey``, Kafka's ``group-coordinator/.../message/OffsetCommitKey.json``;
the int16 in front is the record type, 0 and 1 both meaning an offset commit; 2 is
GroupMetadataKey, which this server does not write)::

    version:int16 (1)  group:string  topic:string  partition:int32

Record value (``OffsetCommitValue.json``; a null value, a tombstone, deletes the key)::

    version:int16 (3)  offset:int64  leaderEpoch:int32 (v3+)  metadata:string
    commitTimestamp:int64  expireTimestamp:int64 (v1 only)

``string`` is int16 length + UTF-8 (not nullable). Version 3 is what Kafka 2.1-3.x brokers
write; versions 0-3 are read. A group's partition is Kafka's
``Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kafkatier.storage.errors import KafkaTierError

OFFSET_KEY_VERSION = 1
VALUE_VERSION = 3
_I16, _I32, _I64 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")


class BadOffsetRecord(KafkaTierError):
    """A ``__consumer_offsets`` record this server cannot read."""


@dataclass(frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class OffsetValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int


def partition_for(group: str, partitions: int) -> int:
    """Kafka's ``abs(group.hashCode()) % partitions`` (Java's String.hashCode over UTF-16 code
    units; ``Utils.abs`` maps Integer.MIN_VALUE to 0)."""
    h = 0
    units = group.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    signed = h - (1 << 32) if h & 0x80000000 else h
    return (0 if signed == -(1 << 31) else abs(signed)) % partitions


def _string(text: str) -> bytes:
    data = text.encode()
    return _I16.pack(len(data)) + data


def encode_key(key: OffsetKey) -> bytes:
    return (_I16.pack(OFFSET_KEY_VERSION) + _string(key.group) + _string(key.topic)
            + _I32.pack(key.partition))  # fmt: skip


def encode_value(value: OffsetValue) -> bytes:
    return (_I16.pack(VALUE_VERSION) + _I64.pack(value.offset) + _I32.pack(value.leader_epoch)
            + _string(value.metadata) + _I64.pack(value.commit_timestamp))  # fmt: skip


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, fmt: struct.Struct) -> int:
        try:
            (value,) = fmt.unpack_from(self.data, self.at)
        except struct.error:
            raise BadOffsetRecord(f"cut short at byte {self.at}") from None
        self.at += fmt.size
        return int(value)

    def string(self) -> str:
        size = self.take(_I16)
        if size < 0 or self.at + size > len(self.data):
            raise BadOffsetRecord(f"bad string length {size} at byte {self.at - 2}")
        text = self.data[self.at : self.at + size].decode("utf-8", errors="replace")
        self.at += size
        return text


def decode_key(data: bytes) -> OffsetKey | None:
    """The offset key, or None for another record type (group metadata)."""
    reader = _Reader(data)
    if reader.take(_I16) not in (0, 1):
        return None
    return OffsetKey(reader.string(), reader.string(), reader.take(_I32))


def decode_value(data: bytes) -> OffsetValue:
    reader = _Reader(data)
    version = reader.take(_I16)
    if not 0 <= version <= 3:
        raise BadOffsetRecord(f"OffsetCommitValue version {version} is not read (0-3 are)")
    offset = reader.take(_I64)
    epoch = reader.take(_I32) if version >= 3 else -1
    metadata, stamp = reader.string(), reader.take(_I64)
    return OffsetValue(offset, epoch, metadata, stamp)
