"""Filters Spark pushes to the JVM reader's scan, as the planner narrows a batch query with them.

``topic`` and ``partition`` leave partitions out before they are surveyed (their files are not
even opened), ``offset`` clamps each range, and a lower bound on ``timestamp`` starts each
partition at the first offset whose batch reaches it: the time index's lookup, as
``startingTimestamp`` (every record before that offset is older), so a query for the last hour
of a year-long topic reads the segments of that hour. Spark evaluates every filter again on the
rows read, so narrowing only has to keep every row that can match: an upper bound on
``timestamp`` narrows nothing (a record's CreateTime may be older than an earlier record's).

The filters come as ``PushedFilters.java`` writes them: ``{"column", "op", "value"}``, op one of
``eq gt ge lt le in``, timestamps in epoch milliseconds rounded down.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kafkatier.sink.source.offsets import Offsets
from kafkatier.storage.log.readonly import TopicPartition


@dataclass(frozen=True)
class Interval:
    """Integers in [low, high): what the conjunction of a column's comparisons allows."""

    low: float = -math.inf
    high: float = math.inf
    only: frozenset[Any] | None = None  # eq / in

    def admits(self, value: Any) -> bool:
        if self.only is not None and value not in self.only:
            return False
        return (self.low == -math.inf or self.low <= value) and (
            self.high == math.inf or value < self.high
        )

    def narrowed(self, op: str, value: Any) -> Interval:
        low, high, only = self.low, self.high, self.only
        if op in ("eq", "in"):
            given = frozenset(value if op == "in" else [value])
            only = given if only is None else only & given
        elif op == "gt":
            low = max(low, value + 1)
        elif op == "ge":
            low = max(low, value)
        elif op == "lt":
            high = min(high, value)
        elif op == "le":
            high = min(high, value + 1)
        return Interval(low, high, only)


@dataclass(frozen=True)
class Narrowing:
    """A scan's pushed filters, per column."""

    columns: Mapping[str, Interval]

    @classmethod
    def of(cls, filters: Iterable[Mapping[str, Any]]) -> Narrowing:
        columns: dict[str, Interval] = {}
        for f in filters:
            name = f["column"]
            if name == "topic" and f["op"] not in ("eq", "in"):
                continue  # string order is not offset order: only equality narrows topics
            columns[name] = columns.get(name, Interval()).narrowed(f["op"], f["value"])
        return cls(columns)

    def admits(self, tp: TopicPartition) -> bool:
        """Whether partition ``tp`` may hold a matching row."""
        topic, partition = self.columns.get("topic"), self.columns.get("partition")
        return (topic is None or topic.admits(tp[0])) and (
            partition is None or partition.admits(tp[1])
        )

    def offsets(self, starts: Offsets, ends: Offsets) -> tuple[Offsets, Offsets]:
        """Each partition's range clamped to the offsets that may match (empty if none)."""
        offset = self.columns.get("offset", Interval())
        new_starts, new_ends = dict(starts), dict(ends)
        for tp, end in ends.items():
            start = starts[tp]
            if start > end:  # left as asked: the plan refuses it, as Spark's Kafka source
                continue
            if not self.admits(tp):
                new_starts[tp] = new_ends[tp] = start
                continue
            low = max(start, _clip(offset.low, start))
            high = min(end, _clip(offset.high, end))
            if offset.only is not None:
                inside = [o for o in offset.only if low <= o < high]
                low, high = (min(inside), max(inside) + 1) if inside else (low, low)
            new_starts[tp], new_ends[tp] = min(low, end), max(min(low, end), high)
        return new_starts, new_ends

    @property
    def since_ms(self) -> int | None:
        """The lowest timestamp a matching row may have, if the filters bound it."""
        ts = self.columns.get("timestamp")
        low = -math.inf if ts is None else ts.low
        if ts is not None and ts.only is not None:
            low = max(low, min(ts.only))
        return None if low == -math.inf else int(low)


def _clip(bound: float, default: int) -> int:
    return default if math.isinf(bound) else int(bound)
