"""A topic's partition count, which Kafka keeps in its metadata and kafkatier in the topic's
file: a partition directory gone missing (moved by hand, a partial restore) is refused by every
writer, never read as a smaller topic (keys placed by the wrong count) nor filled with a new
empty partition (its offsets starting again at 0)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kafkatier.cli.main import main
from kafkatier.sink import KafkaLogSink
from kafkatier.sink.source.datasource import register_data_source
from kafkatier.storage.config.topic_files import TopicConfigStore
from kafkatier.storage.errors import StorageError
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record


def _topic(path: Path, partitions: int) -> None:
    with LogDirectory(path) as logs:
        logs.create_partitions("t", partitions)
        for p in range(partitions):
            logs.logs[("t", p)].append(build_batch([Record(0, 1_700_000_000_000, b"k", b"v")]))


def _count(path: Path) -> int | None:
    with LogDirectory(path) as logs:
        return logs.partition_count("t")


def test_the_count_is_recorded_at_creation_and_a_missing_directory_is_refused(
    tmp_path: Path,
) -> None:
    _topic(tmp_path, 8)
    assert _count(tmp_path) == 8
    assert TopicConfigStore(tmp_path).stored("t") == {}  # a record, no settings
    for p in (3, 4, 5, 7):
        shutil.rmtree(tmp_path / f"t-{p}")
    recorded = r"'t' has 8 partitions \(recorded in .*kafkatier-topic\.t\.properties\)"
    with pytest.raises(StorageError, match=recorded + r" .* partitions 3-5, 7 are missing from"):
        _count(tmp_path)


def test_a_topic_from_before_counts_were_recorded_refuses_a_gap(tmp_path: Path) -> None:
    """A file stamped with the topic id alone (as before): the count is the highest
    partition's + 1, so a gap below it is still refused; the topic's next creation call
    records the count."""
    _topic(tmp_path, 4)
    path = TopicConfigStore(tmp_path).path("t")
    header = path.read_text().splitlines()[0]
    path.write_text(header.rsplit(", partitions ", 1)[0] + "\n")
    assert _count(tmp_path) == 4
    with LogDirectory(tmp_path) as logs:
        logs.create_partitions("t", 4)
    assert path.read_text().splitlines()[0] == header
    shutil.rmtree(tmp_path / "t-1")
    path.unlink()  # no file at all: the same
    with pytest.raises(StorageError, match=r"4 partitions \(its highest partition's number"):
        _count(tmp_path)


def test_a_recreated_topic_records_its_own_count(tmp_path: Path) -> None:
    _topic(tmp_path, 4)
    for p in range(4):  # deleted as a user deletes a topic here
        shutil.rmtree(tmp_path / f"t-{p}")
    assert _count(tmp_path) is None
    _topic(tmp_path, 2)
    assert _count(tmp_path) == 2


def test_produce_refuses_a_topic_missing_its_last_partition(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "in.parquet"
    pq.write_table(pa.table({"key": [b"a", b"b", b"c"], "value": [b"1", b"2", b"3"]}), source)
    logs = tmp_path / "logs"
    _topic(logs, 3)
    shutil.rmtree(logs / "t-2")
    args = ["produce", str(logs), "--topic", "t", "--input", str(source)]
    assert main(args) == 1  # the data's state, not the command's use
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "partitions 2 are missing" in err, err
    assert not (logs / "t-2").exists()  # not created again empty
    with LogDirectory(logs) as log_dir:
        assert [log.log_end_offset for log in log_dir] == [1, 1]  # nothing appended


def test_the_sink_refuses_a_topic_missing_its_last_partition(spark: Any, tmp_path: Path) -> None:
    frame = spark.createDataFrame([(b"k1", b"v1"), (b"k2", b"v2")], "key binary, value binary")
    _topic(tmp_path, 3)
    shutil.rmtree(tmp_path / "t-2")
    sink = KafkaLogSink(tmp_path, topic="t", partitions=None)
    with pytest.raises(StorageError, match=r"partitions 2 are missing"):
        sink(frame, 0)
    with LogDirectory(tmp_path) as logs:
        assert [log.log_end_offset for log in logs] == [1, 1]


def test_a_partition_count_the_machine_cannot_hold_is_refused_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """2**31 - 1 partitions (a valid Kafka count) were killed for memory half-way; the
    filesystem's free inodes and space and the available memory are checked first."""
    source = tmp_path / "in.parquet"
    pq.write_table(pa.table({"key": [b"a"], "value": [b"1"]}), source)
    logs = tmp_path / "logs"
    args = ["produce", str(logs), "--topic", "t", "--input", str(source),
            "--partitions", str(2**31 - 1), "--config", "retention.ms=1000"]  # fmt: skip
    assert main(args) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "creating 2,147,483,647 partitions of topic 't'" in err and "inodes" in err, err
    assert [p.name for p in logs.iterdir() if p.name.startswith(("t-", "kafkatier-topic"))] == []
    free = os.statvfs(tmp_path).f_ffree  # root: the reserved inodes too
    with LogDirectory(logs) as log_dir, pytest.raises(StorageError, match="needs about"):
        log_dir.create_partitions("u", free // 6 + 1)  # one partition more than inodes allow


def test_the_sink_refuses_a_partition_count_the_machine_cannot_hold(
    spark: Any, tmp_path: Path
) -> None:
    frame = spark.createDataFrame([(b"k1", b"v1")], "key binary, value binary")
    with pytest.raises(StorageError, match="creating 2,147,483,647 partitions of topic 'big'"):
        KafkaLogSink(tmp_path, topic="big", partitions=2**31 - 1)(frame, 0)
    assert not list(tmp_path.glob("big-*"))


def test_the_reader_reports_a_missing_partition_as_data_loss(spark: Any, tmp_path: Path) -> None:
    """Spark's Kafka source fails a query whose partitions are lost unless failOnDataLoss is
    false; a partition directory moved away is such a loss, not a smaller topic."""
    register_data_source(spark)
    _topic(tmp_path, 4)
    shutil.rmtree(tmp_path / "t-1")

    def read(**options: str) -> int:
        reader = spark.read.format("kafkatier").option("path", str(tmp_path))
        return int(reader.options(**options).load().count())

    with pytest.raises(Exception, match=r"partitions 1 are missing .* failOnDataLoss=false"):
        read(subscribe="t")
    assert read(subscribe="t", failOnDataLoss="false") == 3
    assert read(assign='{"t": [0, 2]}') == 2  # the lost one not asked for
    TopicConfigStore(tmp_path).path("t").unlink()  # no record (one partition restored alone)
    assert read(subscribe="t") == 3


def test_a_stray_directory_past_the_recorded_count_is_refused_not_added(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An empty ``t-2`` beside a two-partition topic (an aborted copy, a ``mkdir``) grew the
    topic to three partitions: produce recorded 3 and placed keys by ``% 3``. Writers refuse
    it naming the directory, and ``verify`` reports it."""
    source = tmp_path / "in.parquet"
    pq.write_table(pa.table({"key": [b"a", b"b", b"c"], "value": [b"1", b"2", b"3"]}), source)
    logs = tmp_path / "logs"
    _topic(logs, 2)
    (logs / "t-2").mkdir()
    assert main(["produce", str(logs), "--topic", "t", "--input", str(source)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "directories of partitions 2; fix: remove" in err, err
    header = TopicConfigStore(logs).path("t").read_text().splitlines()[0]
    assert header.endswith(", partitions 2")
    assert main(["verify", str(logs)]) == 1
    assert "the directories of partitions 2 are past that count" in capsys.readouterr().out
    shutil.rmtree(logs / "t-2")
    assert main(["produce", str(logs), "--topic", "t", "--input", str(source)]) == 0
    assert main(["verify", str(logs)]) == 0
