"""``storage.log.readonly``: which partitions a read of a log dir finds."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.readonly import discover

TOPICS = ("orders-eu", "orders-us", "payments", "__consumer_offsets")


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    with LogDirectory(tmp_path) as logs:
        for topic in TOPICS:
            logs.get_or_create(topic, 0)
    return tmp_path


@pytest.mark.parametrize(
    ("pattern", "topics"),
    [
        ("orders", ["orders-eu", "orders-us"]),  # found anywhere in the name, as Spark's
        ("eu|us", ["orders-eu", "orders-us"]),  # SubscribePatternStrategy (findFirstIn)
        ("^pay", ["payments"]),
        ("ts$", ["payments"]),
        (".*", ["orders-eu", "orders-us", "payments"]),  # never an internal topic
        ("consumer", []),
    ],
)
def test_a_pattern_takes_topics_as_sparks_kafka_source(
    log_dir: Path, pattern: str, topics: list[str]
) -> None:
    assert discover(log_dir, None, pattern) == [(t, 0) for t in topics]


def test_an_internal_topic_named_is_read(log_dir: Path) -> None:
    """By name (a broker's copied log dir), ``__consumer_offsets`` is there to read."""
    assert discover(log_dir, ["__consumer_offsets"], None) == [("__consumer_offsets", 0)]
