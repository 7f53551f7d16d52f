"""The record rules of Kafka's ``LogValidator`` that depend on the topic's settings, checked over
Arrow input before anything is encoded (a broker checks every record of a produce request the
same way and refuses the request):

* a compacted topic (``cleanup.policy`` with ``compact``) takes no record without a key
  ("Compacted topic cannot accept message without key"): the cleaner would later drop it
  silently;
* a ``CreateTime`` topic takes no record whose timestamp is more than
  ``message.timestamp.before.max.ms`` before the append time or more than
  ``message.timestamp.after.max.ms`` after it (KIP-937; no limit where unset).

The sink's JVM encoder applies the same :class:`RecordRules` (``TaskEncoder.java``), shipped in
its plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import numpy as np
import pyarrow as pa

from kafkatier.storage.arrow.columns import timestamps_column
from kafkatier.storage.errors import InvalidRecordError
from kafkatier.storage.wire import INT64_MAX, TimestampType

if TYPE_CHECKING:
    from kafkatier.storage.config.log_config import LogConfig

INT64_MIN = -INT64_MAX - 1


@dataclass(frozen=True)
class RecordRules:
    """What a topic's records must satisfy: a key (``keys_required``), a timestamp within
    [``earliest``, ``latest``] (the int64 range where unlimited)."""

    keys_required: bool = False
    earliest: int = INT64_MIN
    latest: int = INT64_MAX

    @classmethod
    def of(cls, config: LogConfig, now_ms: int) -> RecordRules:
        """The rules of a topic with ``config`` for records appended at ``now_ms``."""
        earliest, latest = INT64_MIN, INT64_MAX
        if config.timestamp_type == TimestampType.CREATE_TIME:
            before = config.message_timestamp_before_max_ms
            after = config.message_timestamp_after_max_ms
            earliest = INT64_MIN if before is None else max(now_ms - before, INT64_MIN)
            latest = INT64_MAX if after is None else min(now_ms + after, INT64_MAX)
        return cls(config.is_compacted, earliest, latest)

    @property
    def limits_timestamps(self) -> bool:
        return self.earliest != INT64_MIN or self.latest != INT64_MAX

    def check(self, data: pa.Table | pa.RecordBatch, topic: str) -> None:
        """Raise :class:`InvalidRecordError` naming the first row of ``data`` that breaks a rule
        of ``topic``."""
        names = data.schema.names
        if self.keys_required:
            key = data.column("key") if "key" in names else None
            if key is None or key.null_count:
                import pyarrow.compute as pc  # only here: its import is 60 ms of a start-up

                row = 0 if key is None else int(pc.index(pc.is_null(key), True).as_py())
                raise InvalidRecordError(no_key(topic), row=row)
        if self.limits_timestamps and "timestamp" in names:
            column = data.column("timestamp")
            if isinstance(column, pa.ChunkedArray):
                column = column.combine_chunks()
            ms = timestamps_column(column, len(data), self.earliest, "timestamp")  # null: now
            bad = np.flatnonzero((ms < self.earliest) | (ms > self.latest))
            if len(bad):
                row = int(bad[0])
                raise InvalidRecordError(out_of_range(topic, int(ms[row]), self), row=row)


NO_RULES: Final = RecordRules()
"""A topic's rules under Kafka's defaults: any key, any timestamp."""


def no_key(topic: str) -> str:
    return (f"compacted topic {topic} (cleanup.policy=compact) cannot accept a record without a "
            "key")  # fmt: skip


def out_of_range(topic: str, timestamp: int, rules: RecordRules) -> str:
    return (f"timestamp {timestamp} is out of range for topic {topic}: it must be within "
            f"[{rules.earliest}, {rules.latest}] (message.timestamp.before.max.ms, "
            "message.timestamp.after.max.ms)")  # fmt: skip
