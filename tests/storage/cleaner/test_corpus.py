"""Compacting copies of real Kafka-written compacted partitions (``__consumer_offsets``, Kafka
Connect and Kafka Streams changelog topics) from ``../shared/kafka-corpus``: the result verifies
clean and holds exactly the latest record per key, judged by kafka-python reading the original
bytes independently of kafkatier's reader."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from cleaner_fixtures import verify_compacted
from kafka.record import MemoryRecords

from kafkatier.storage.cleaner.compact import compact_log
from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.log.directory import LogDirectory

CORPUS = Path(__file__).resolve().parents[3].parent / "shared" / "kafka-corpus"
ARTHUR = "ArthurArutunyan04__Backend_labs/kafka-data"
SPOOLDIR = "mscaldas2012__kafka-connect-spooldir/kafka-data"
V1 = "xpxwo100__bullShit/tmp/kafka-logs"  # message format v1: legacy message sets
PARTITIONS = [
    f"{ARTHUR}/__consumer_offsets-19",  # KRaft-era; its later segment is missing from the corpus
    f"{SPOOLDIR}/__consumer_offsets-9",
    f"{SPOOLDIR}/__consumer_offsets-29",
    f"{SPOOLDIR}/__consumer_offsets-37",
    f"{SPOOLDIR}/docker-connect-configs-0",
    f"{SPOOLDIR}/docker-connect-status-0",
    f"{SPOOLDIR}/_schemas-0",
    f"{V1}/__consumer_offsets-40",
    f"{V1}/foo-0",
]
NOW_MS = 1_800_000_000_000  # later than every record in the corpus
Row = tuple[int, bytes | None, bytes | None, int]


def kafka_python_rows(partition: Path) -> list[Row]:
    """Data records of every ``.log`` file, in offset order, as kafka-python decodes them."""
    rows: list[Row] = []
    for path in sorted(partition.glob("*.log")):
        records = MemoryRecords(path.read_bytes())
        while (batch := records.next_batch()) is not None:
            if not getattr(batch, "is_control_batch", False):  # legacy sets have no flag
                rows.extend((r.offset, r.key, r.value, r.timestamp) for r in batch)
    return rows


def latest_per_key(rows: list[Row]) -> list[Row]:
    latest: dict[bytes, Row] = {}
    for row in rows:
        if row[1] is not None:
            latest[row[1]] = row
    return sorted(latest.values())


@pytest.mark.parametrize("relative", PARTITIONS, ids=lambda p: p.rsplit("/", 1)[1])
def test_compacted_corpus_partition(relative: str, tmp_path: Path) -> None:
    source = CORPUS / relative
    if not source.is_dir():
        pytest.skip(f"Kafka corpus partition not found at {source}")
    log_dir_path = tmp_path / "logs"
    shutil.copytree(source, log_dir_path / source.name)
    for path in log_dir_path.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)  # the corpus is read-only
    original = kafka_python_rows(log_dir_path / source.name)
    assert original, "a partition with no records proves nothing"
    config = LogConfig.from_properties(
        {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0"}, source="test"
    )
    with LogDirectory(log_dir_path, config_for=lambda _t: config, clock=lambda: NOW_MS) as logs:
        (log,) = list(logs)
        log.roll()  # the data sits in the active segment, which is never cleaned
        result = compact_log(log, now_ms=NOW_MS, first_dirty_offset=None)
        assert result.cleaned and result.end_offset == log.log_end_offset
    assert verify_compacted(log_dir_path) == []
    cleaned = kafka_python_rows(log_dir_path / source.name)
    assert cleaned == latest_per_key(original)
    assert result.records_removed >= len(original) - len(cleaned)
    assert result.tombstones_kept == sum(1 for row in cleaned if row[2] is None)
