"""``columns.timestamps_column``: a timestamp column's values as Kafka's milliseconds, refusing
what Kafka cannot store as the instant it is."""

from __future__ import annotations

import pyarrow as pa
import pytest

from kafkatier.storage.arrow.columns import timestamps_column
from kafkatier.storage.errors import InvalidRecordError


@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
def test_an_instant_before_1970_is_refused_even_at_minus_one_millisecond(unit: str) -> None:
    per_ms = {"s": None, "ms": 1, "us": 1_000, "ns": 1_000_000}[unit]
    raw = -1 if per_ms is None else -per_ms  # one unit (s) or one millisecond before 1970
    column = pa.array([5_000, raw], pa.timestamp(unit))
    with pytest.raises(InvalidRecordError, match=r"invalid negative timestamp -1\d* in column "
                       r"'timestamp'.*row=1"):  # fmt: skip
        timestamps_column(column, 2, 7, "timestamp")


def test_an_integer_minus_one_is_kafkas_no_timestamp_and_kept() -> None:
    column = pa.array([0, -1, None, 12], pa.int64())
    assert timestamps_column(column, 4, 7, "timestamp").tolist() == [0, -1, 7, 12]
    with pytest.raises(InvalidRecordError, match="invalid negative timestamp -2"):
        timestamps_column(pa.array([-2], pa.int64()), 1, 7, "timestamp")


def test_a_timestamp_column_keeps_its_instants_in_milliseconds() -> None:
    column = pa.array([0, 1_500, None], pa.timestamp("us"))
    assert timestamps_column(column, 3, 9, "timestamp").tolist() == [0, 1, 9]
