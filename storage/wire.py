"""Kafka's fixed-width on-disk layouts, written once (kafka-format.md §1, §3, §4-§7).

All integers are big-endian. The record batch v2 header is 61 bytes::

    offset size field
    0      8    baseOffset            int64  first offset of the original batch
    8      4    batchLength           int32  bytes after this field (= size - 12)
    12     4    partitionLeaderEpoch  int32  not covered by the CRC
    16     1    magic                 int8   2
    17     4    crc                   uint32 CRC-32C of bytes [21, end)
    21     2    attributes            int16  codec | tsType<<3 | txn<<4 | control<<5 | horizon<<6
    23     4    lastOffsetDelta       int32
    27     8    baseTimestamp         int64  first record's timestamp, or the delete horizon
    35     8    maxTimestamp          int64
    43     8    producerId            int64  -1 if none
    51     2    producerEpoch         int16  -1 if none
    53     4    baseSequence          int32  -1 if none
    57     4    recordsCount          int32
"""

from __future__ import annotations

import enum
import struct
from typing import Final

BATCH_HEADER: Final = struct.Struct(">qiibIhiqqqhii")
"""The whole 61-byte v2 batch header, fields in the order of the table above."""
BATCH_HEADER_SIZE: Final = BATCH_HEADER.size  # 61 = RECORD_BATCH_OVERHEAD
assert BATCH_HEADER_SIZE == 61

LOG_OVERHEAD: Final = 12  # baseOffset + batchLength
HEADER_SIZE_UP_TO_MAGIC: Final = 17
MIN_LEGACY_RECORD_SIZE: Final = 14  # LegacyRecord.RECORD_OVERHEAD_V0: smallest legal batchLength
CRC_START: Final = 21  # the CRC covers [21, end)
OFFSET_AND_LENGTH: Final = struct.Struct(">qi")
PLE_OFFSET: Final = 12
MAGIC_OFFSET: Final = 16
CRC_OFFSET: Final = 17
ATTRIBUTES_OFFSET: Final = 21
MAX_TIMESTAMP_OFFSET: Final = 35
RECORDS_COUNT_OFFSET: Final = 57

NO_TIMESTAMP: Final = -1
NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
NO_SEQUENCE: Final = -1
NO_PARTITION_LEADER_EPOCH: Final = -1
INT32_MAX: Final = 2**31 - 1
INT64_MAX: Final = 2**63 - 1
DEFAULT_MAX_MESSAGE_BYTES: Final = 1048588  # LogConfig.DEFAULT_MAX_MESSAGE_BYTES

ATTR_CODEC_MASK: Final = 0x07
ATTR_LOG_APPEND_TIME: Final = 0x08
ATTR_TRANSACTIONAL: Final = 0x10
ATTR_CONTROL: Final = 0x20
ATTR_DELETE_HORIZON: Final = 0x40


class Codec(enum.IntEnum):
    """Compression codec ids (attribute bits 0-2), with Kafka's ``compression.type`` names."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @property
    def kafka_name(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, name: str | int | Codec) -> Codec:
        """Accept ``"lz4"``, ``"LZ4"``, ``3`` or a Codec; ``"uncompressed"`` means NONE."""
        if isinstance(name, Codec):
            return name
        if isinstance(name, int):
            return cls(name)
        key = name.strip().upper()
        if key in ("UNCOMPRESSED", "NONE", ""):
            return cls.NONE
        try:
            return cls[key]
        except KeyError:
            raise ValueError(
                f"unknown compression {name!r}: use none, gzip, snappy, lz4 or zstd"
            ) from None


class TimestampType(enum.IntEnum):
    """Attribute bit 3; Spark's Kafka source reports the same numbers in ``timestampType``."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class ControlType(enum.IntEnum):
    """Control record key types (kafka-format.md §3); UNKNOWN for anything else."""

    UNKNOWN = -1
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


CONTROL_KEY: Final = struct.Struct(">hh")  # version (0), type
END_TXN_MARKER_VALUE: Final = struct.Struct(">hi")  # version (0), coordinatorEpoch

OFFSET_INDEX_ENTRY: Final = struct.Struct(">ii")  # relative offset, file position
TIME_INDEX_ENTRY: Final = struct.Struct(">qi")  # timestamp, relative offset
ABORTED_TXN_ENTRY: Final = struct.Struct(">hqqqq")  # version, pid, first, last, lastStableOffset

SNAPSHOT_HEADER: Final = struct.Struct(">hIi")  # version (1), CRC-32C of [6, end), entry count
SNAPSHOT_ENTRY: Final = struct.Struct(">qhiqiqiq")
"""pid, epoch, lastSequence, lastOffset, offsetDelta, timestamp, coordinatorEpoch, txnFirstOffset"""
SNAPSHOT_VERSION: Final = 1


def attributes(
    codec: Codec,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    transactional: bool = False,
    control: bool = False,
    delete_horizon: bool = False,
) -> int:
    """The int16 attributes word for a v2 batch."""
    return (
        int(codec)
        | (ATTR_LOG_APPEND_TIME if timestamp_type else 0)
        | (ATTR_TRANSACTIONAL if transactional else 0)
        | (ATTR_CONTROL if control else 0)
        | (ATTR_DELETE_HORIZON if delete_horizon else 0)
    )


def increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's DefaultRecordBatch.incrementSequence: wraps from INT32_MAX to 0."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def decrement_sequence(sequence: int, decrement: int) -> int:
    """Kafka's DefaultRecordBatch.decrementSequence."""
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def segment_file_name(base_offset: int, suffix: str) -> str:
    """``00000000000000000042.log``: 20 zero-padded digits, then the suffix (with its dot)."""
    return f"{base_offset:020d}{suffix}"


def offset_from_file_name(name: str) -> int:
    """The base offset encoded before the first dot of a segment/index/snapshot file name."""
    return int(name.split(".", 1)[0])
