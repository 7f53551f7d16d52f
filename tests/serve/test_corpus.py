"""Log dirs real Kafka brokers wrote (../shared/kafka-corpus): kafka-python, confluent-kafka and
Apache Kafka's Java client (where installed) consume them over ``kafkatier serve`` exactly as
kafka-python's record reader sees the segment files: message format v1, gzip, lz4,
LogAppendTime, and a committed transaction."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from serve_clients import JAVA_MISSING, confluent_rows, java_rows, kafka_python_rows
from test_datasource import CORPUS, CORPUS_SAMPLE, TXN_CORPUS
from test_datasource import kafka_python_rows as disk_rows

pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason=f"Kafka corpus not found at {CORPUS}")

SAMPLE = [*CORPUS_SAMPLE, (TXN_CORPUS, re.escape("_confluent-ksql-default__command_topic"))]


def partitions(log_dir: Path, topic: str) -> int:
    return sum(1 for d in log_dir.iterdir() if d.is_dir() and d.name.rpartition("-")[0] == topic)


@pytest.mark.parametrize(("folder", "pattern"), SAMPLE)
def test_corpus_consumed_as_on_disk(folder: str, pattern: str, serve: Any) -> None:
    log_dir = CORPUS / folder
    expected = disk_rows(log_dir, pattern)
    topics = sorted({r[0] for r in expected})
    assert topics
    with serve(log_dir) as port:
        wanted = {topic: partitions(log_dir, topic) for topic in topics}
        assert kafka_python_rows(port, wanted, committed=True) == expected
        assert confluent_rows(port, wanted, committed=True) == expected
        if JAVA_MISSING is None:  # the other clients above still run without it
            assert java_rows(port, wanted, committed=True) == expected
