"""``record_rules``: what Kafka's ``LogValidator`` refuses by the topic's settings, refused before
anything is appended: a record without a key in a compacted topic, a ``CreateTime`` timestamp
outside ``message.timestamp.before.max.ms`` / ``after.max.ms`` of the append time."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
import pytest

from kafkatier.storage.arrow.log import append_arrow
from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.errors import InvalidRecordError
from kafkatier.storage.log.directory import LogDirectory

DAY = 86_400_000


def _append(tmp_path: Path, settings: dict[str, str], table: pa.Table) -> int:
    """Append ``table`` to a new topic of ``settings``; the log end offset after."""
    config = LogConfig.from_properties(settings, source="test")
    with LogDirectory(tmp_path / "logs", config_for=lambda _t: config) as logs:
        log = logs.get_or_create("t", 0)
        try:
            append_arrow(log, table)
        finally:
            end = log.log_end_offset
    return end


def _table(keys: list[bytes | None], stamps: list[int | None] | None = None) -> pa.Table:
    columns = {"key": pa.array(keys, pa.binary()), "value": [b"v"] * len(keys)}
    if stamps is not None:
        columns["timestamp"] = pa.array(stamps, pa.int64())
    return pa.table(columns)


NOW = int(time.time() * 1000)
CASES = [
    # settings, table, the row refused (None: taken), what the error says
    ({"cleanup.policy": "compact"}, _table([b"a", None, b"c"]), 1, "without a key"),
    ({"cleanup.policy": "compact,delete"}, _table([None]), 0, "without a key"),
    ({"cleanup.policy": "delete"}, _table([b"a", None]), None, ""),
    ({"message.timestamp.before.max.ms": str(DAY)},
     _table([b"a", b"b"], [NOW, NOW - 10 * DAY]), 1, "out of range"),
    ({"message.timestamp.after.max.ms": "0"},
     _table([b"a", b"b"], [NOW - DAY, NOW + DAY]), 1, "out of range"),
    ({"message.timestamp.before.max.ms": str(DAY), "message.timestamp.after.max.ms": str(DAY)},
     _table([b"a", b"b"], [NOW - DAY // 2, None]), None, ""),  # null: the append time
    ({"message.timestamp.after.max.ms": "0", "message.timestamp.type": "LogAppendTime"},
     _table([b"a"], [NOW + DAY]), None, ""),  # the broker's time replaces it: not checked
    ({}, _table([b"a", None], [0, NOW + 100 * DAY]), None, ""),  # unlimited by default
]


@pytest.mark.parametrize(("settings", "table", "row", "says"), CASES)
def test_records_a_broker_refuses_are_refused_whole(
    tmp_path: Path, settings: dict[str, str], table: pa.Table, row: int | None, says: str
) -> None:
    if row is None:
        assert _append(tmp_path, settings, table) == len(table)
        return
    with pytest.raises(InvalidRecordError, match=says) as raised:
        _append(tmp_path, settings, table)
    assert raised.value.context["row"] == row
    config = LogConfig.from_properties(settings, source="test")
    with LogDirectory(tmp_path / "logs", config_for=lambda _t: config) as logs:
        assert logs.get_or_create("t", 0).log_end_offset == 0  # nothing of it appended
