"""The serve checks of ``kafkatier run`` (kafkatier.cli.run.serving) on their own: a consumer's
totals that differ from the replay in any way fail the check, and a listener that cannot bind
stops the run before Spark starts, naming the setting."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from kafkatier.cli.run.serving import PartitionTotals, compare
from kafkatier.serve.config import ServeConfig
from kafkatier.serve.thread import ServeThread
from kafkatier.storage.errors import ConfigError

RECORDS = [(0, b"k0", b"v0"), (1, None, b"v1"), (3, b"k3", b"v3")]  # offset 2: a marker


def totals(records: list[tuple[int, bytes | None, bytes]]) -> dict[int, PartitionTotals]:
    seen = PartitionTotals()
    for offset, key, value in records:
        seen.add(offset, key, value)
    return {0: seen}


def test_the_same_records_pass() -> None:
    want = {0: totals(RECORDS)[0].key(), 1: (0, 0, 0)}  # an empty partition on either side
    check = compare("c", totals(RECORDS), want, "here")
    assert check.ok and "3 records in 2 partitions" in check.detail


@pytest.mark.parametrize("seen", [
    RECORDS[:2],                                          # one record missing
    [*RECORDS, (4, b"k4", b"v4")],                        # one record too many
    [(0, b"k0", b"v0"), (1, None, b"vX"), RECORDS[2]],    # a value changed
    [(0, b"k0", b"v0"), (1, b"", b"v1"), RECORDS[2]],     # a null key became empty
    [(0, b"k0", b"v0"), (2, None, b"v1"), RECORDS[2]],    # another offset
])  # fmt: skip
def test_any_difference_fails(seen: list[tuple[int, bytes | None, bytes]]) -> None:
    check = compare("c", totals(seen), {0: totals(RECORDS)[0].key()}, "here")
    assert not check.ok and "partitions [0] differ" in check.detail


def test_offsets_out_of_order_fail_even_with_equal_sums() -> None:
    shuffled = [RECORDS[1], RECORDS[0], RECORDS[2]]
    check = compare("c", totals(shuffled), {0: totals(RECORDS)[0].key()}, "here")
    assert not check.ok and "1 offsets out of order" in check.detail


def test_a_listener_in_use_is_one_error_naming_the_setting(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = ServeConfig.from_properties(
            {"log.dirs": str(tmp_path), "listeners": f"PLAINTEXT://127.0.0.1:{port}"}, source="t"
        )
        thread = ServeThread(config)
        with pytest.raises(ConfigError) as raised:
            thread.start()
        thread.stop()
    assert f"cannot listen on 127.0.0.1:{port}" in str(raised.value)
    assert raised.value.context["setting"] == "listeners"
