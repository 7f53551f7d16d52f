"""The sink and ``kafkatier produce`` under topic settings that bound a batch: whatever
``segment.bytes`` and ``max.message.bytes`` a topic has, the writers build batches that fit
(as a producer's ``batch.size`` bounded by the broker's limits), every record lands once, and
the log verifies. A single record larger than the limit is refused with one line naming it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kafkatier.cli.main import main
from kafkatier.sink import KafkaLogSink
from kafkatier.storage.arrow.log import read_arrow
from kafkatier.storage.config.topic_files import TopicConfigStore
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.verify.paths import verify_paths

BOUNDS = {  # topic settings -> the largest batch they allow
    "small segment.bytes": ({"segment.bytes": "4096"}, 4096),
    "tiny segment.bytes": ({"segment.bytes": "700"}, 700),
    "small max.message.bytes": ({"max.message.bytes": "1500", "segment.bytes": "1048576"}, 1500),
}


def _check(log_dir: Path, topic: str, rows: int, limit: int) -> None:
    assert verify_paths([log_dir]) == []
    with LogDirectory(log_dir) as logs:
        topic_logs = [log for log in logs if log.topic == topic]
        sizes = [b.size_in_bytes for log in topic_logs for s in log.segments for b in s.batches()]
        values = sorted(v for log in topic_logs for v in read_arrow(log)["value"].to_pylist())
    assert max(sizes) <= limit
    assert values == sorted(f"value-{i:06d}-".encode() * 4 for i in range(rows))


@pytest.mark.parametrize("bound", sorted(BOUNDS))
def test_sink_batches_fit_the_topic(spark: Any, tmp_path: Path, bound: str) -> None:
    settings, limit = BOUNDS[bound]
    TopicConfigStore(tmp_path).update("events", settings, source="test")
    rows = 3000
    frame = spark.range(0, rows, 1, 3).selectExpr(
        "CAST(repeat(CONCAT('value-', lpad(CAST(id AS STRING), 6, '0'), '-'), 4) AS BINARY)"
        " AS value", "CAST(CONCAT('k', id % 97) AS BINARY) AS key")  # fmt: skip
    KafkaLogSink(tmp_path, topic="events", partitions=3, compression="none")(frame, 0)
    _check(tmp_path, "events", rows, limit)


@pytest.mark.parametrize("bound", sorted(BOUNDS))
def test_produce_batches_fit_the_topic(tmp_path: Path, bound: str) -> None:
    settings, limit = BOUNDS[bound]
    rows = 3000
    source = tmp_path / "in.parquet"
    pq.write_table(pa.table({
        "key": [f"k{i % 97}".encode() for i in range(rows)],
        "value": [f"value-{i:06d}-".encode() * 4 for i in range(rows)],
    }), source)  # fmt: skip
    extra = [arg for k, v in settings.items() for arg in ("--config", f"{k}={v}")]
    logs = tmp_path / "logs"
    assert main(["produce", str(logs), "--topic", "events", "--input", str(source),
                 "--partitions", "3", "--compression", "none", *extra]) == 0  # fmt: skip
    _check(logs, "events", rows, limit)


def test_a_record_larger_than_a_segment_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "in.parquet"
    pq.write_table(pa.table({"key": [b"k"], "value": [b"x" * 5000]}), source)
    capsys.readouterr()
    code = main(["produce", str(tmp_path / "logs"), "--topic", "events", "--input", str(source),
                 "--compression", "none", "--config", "segment.bytes=1024"])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and len(err) == 1, err
    assert "1024" in err[0], err


RULES = {  # topic settings, the rows' key and timestamp SQL, what the error says
    "compacted, a null key": ({"cleanup.policy": "compact"},
                              "IF(id = 7, NULL, CAST(CONCAT('k', id) AS BINARY))",
                              "current_timestamp()", "without a key"),
    "a timestamp too old": ({"message.timestamp.before.max.ms": "3600000"},
                            "CAST(CONCAT('k', id) AS BINARY)",
                            "IF(id = 7, TIMESTAMP '2001-01-01 00:00:00', current_timestamp())",
                            "out of range"),
}


@pytest.mark.parametrize("encoder", ["jvm", "python"])
@pytest.mark.parametrize("case", sorted(RULES))
def test_the_sink_refuses_what_a_broker_refuses(
    spark: Any, tmp_path: Path, case: str, encoder: str
) -> None:  # fmt: skip
    """A row a broker's LogValidator refuses for the topic's settings fails the batch with one
    error naming the rule, before anything is written; the same rows without it go in."""
    from kafkatier.storage.errors import InvalidRecordError

    settings, key, timestamp, says = RULES[case]
    TopicConfigStore(tmp_path).update("events", settings, source="test")
    frame = spark.range(0, 50, 1, 2).selectExpr(f"{key} AS key", "CAST(id AS STRING) AS value",
                                                f"{timestamp} AS timestamp")  # fmt: skip
    sink = KafkaLogSink(tmp_path, topic="events", partitions=2, encoder=encoder)
    with pytest.raises(InvalidRecordError, match=says):
        sink(frame, 0)
    with LogDirectory(tmp_path) as logs:
        assert sum(log.log_end_offset for log in logs if log.topic == "events") == 0
    sink(frame.where("id != 7"), 1)
    with LogDirectory(tmp_path) as logs:
        assert sum(len(read_arrow(log)) for log in logs if log.topic == "events") == 49


def test_a_log_append_time_topic_gets_the_brokers_timestamps(spark: Any, tmp_path: Path) -> None:
    """``message.timestamp.type=LogAppendTime``: as a broker does, every batch the sink appends
    carries the append time in its header, its records' own timestamps overwritten (read by
    kafka-python's parser), batch after batch (the second and third go the way a warm batch
    goes when nothing stops it)."""
    import time

    from kafka.record import MemoryRecords

    TopicConfigStore(tmp_path).update("events", {"message.timestamp.type": "LogAppendTime"},
                                      source="test")  # fmt: skip
    sink = KafkaLogSink(tmp_path, topic="events", partitions=2, compression="lz4")
    before = int(time.time() * 1000)
    for batch_id in range(3):
        frame = spark.range(batch_id * 40, batch_id * 40 + 40, 1, 2).selectExpr(
            "CAST(id AS STRING) AS key", "CAST(id AS STRING) AS value",
            "TIMESTAMP '2001-01-01 00:00:00' AS timestamp")  # fmt: skip
        sink(frame, batch_id)
    sink.close()
    after = int(time.time() * 1000)
    values: list[int] = []
    for segment in sorted(tmp_path.glob("events-*/*.log")):
        records = MemoryRecords(segment.read_bytes())
        while (batch := records.next_batch()) is not None:
            assert batch.timestamp_type == 1, f"{segment}: a batch in CreateTime"
            for record in batch:
                if batch.is_control_batch:
                    continue
                assert before <= record.timestamp <= after, f"{segment}: {record.timestamp}"
                assert record.timestamp_type == 1
                values.append(int(record.value))
    assert sorted(values) == list(range(120))


@pytest.mark.parametrize(("topic_codec", "stored"), [("zstd", 4), ("uncompressed", 0)])
def test_a_topic_codec_other_than_the_sinks_is_the_one_stored(
    spark: Any, tmp_path: Path, topic_codec: str, stored: int
) -> None:
    """``compression.type`` other than ``producer``: as a broker recompresses what a producer
    sent with another codec, the batches in the log carry the topic's codec whatever the
    sink's ``compression`` (lz4 here), batch after batch (read by kafka-python's parser)."""
    from kafka.record import MemoryRecords

    TopicConfigStore(tmp_path).update("events", {"compression.type": topic_codec},
                                      source="test")  # fmt: skip
    sink = KafkaLogSink(tmp_path, topic="events", partitions=2, compression="lz4")
    for batch_id in range(3):
        frame = spark.range(batch_id * 40, batch_id * 40 + 40, 1, 2).selectExpr(
            "CAST(id AS STRING) AS key", "CAST(id AS STRING) AS value")  # fmt: skip
        sink(frame, batch_id)
    sink.close()
    values: list[int] = []
    for segment in sorted(tmp_path.glob("events-*/*.log")):
        records = MemoryRecords(segment.read_bytes())
        while (batch := records.next_batch()) is not None:
            if batch.is_control_batch:
                continue
            assert batch.compression_type == stored, f"{segment}: codec {batch.compression_type}"
            values.extend(int(record.value) for record in batch)
    assert sorted(values) == list(range(120))
    assert verify_paths([tmp_path]) == []
