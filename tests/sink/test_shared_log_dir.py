"""Several writers on one log dir (storage/log/writer_lock.py): two sinks with different sink ids on
one topic, and a sink beside `kafkatier produce` running in another process at the same time.
Every record lands exactly once and the log verifies clean: without the turns, a writer would
append at offsets and file positions another writer had already used."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from test_sink import read_topic

from kafkatier.sink import KafkaLogSink
from kafkatier.sink.bookkeeping import derive_producer_id
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.verify.paths import verify_paths

PRODUCE_LOOP = """
import sys
from kafkatier.cli.main import main
for _ in range(int(sys.argv[3])):
    code = main(["produce", sys.argv[1], "--topic", "t", "--input", sys.argv[2]])
    assert code == 0, code
"""


def rows(spark: Any, start: int, stop: int) -> Any:
    return spark.range(start, stop, 1, 2).selectExpr(
        "CAST(id AS STRING) AS value", "CAST(id % 17 AS STRING) AS key"
    )


def values(log_dir: Path) -> Counter[str]:
    return Counter(v.decode() for v in read_topic(log_dir, "t").column("value").to_pylist())


def test_two_sink_ids_take_turns_on_one_topic(spark: Any, tmp_path: Path) -> None:
    a = KafkaLogSink(tmp_path, topic="t", partitions=3, sink_id="a", compression="lz4")
    b = KafkaLogSink(tmp_path, topic="t", sink_id="b")  # the partition count is read from disk
    for batch in range(3):
        a(rows(spark, batch * 100, batch * 100 + 100), batch)
        b(rows(spark, 10_000 + batch * 50, 10_000 + batch * 50 + 50), batch)
    a(rows(spark, 300, 400), 2)  # a replay of a's last batch: skipped, even after b's turns
    expected = [*range(300), *range(10_000, 10_150)]
    assert values(tmp_path) == Counter(str(i) for i in expected)
    assert verify_paths([tmp_path]) == []
    with LogDirectory(tmp_path) as logs:
        producers = {pid for log in logs for pid in log.producer_state.producers}
    assert producers == {derive_producer_id("a"), derive_producer_id("b")}


def test_a_sink_beside_kafkatier_produce_in_another_process(spark: Any, tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    sink = KafkaLogSink(log_dir, topic="t", partitions=2, sink_id="s")
    sink(rows(spark, 0, 10), 0)  # the topic exists before the other writer starts
    records = tmp_path / "records.jsonl"
    records.write_text("".join(json.dumps({"key": f"p{i}", "value": f"p{i}"}) + "\n"
                               for i in range(200)))  # fmt: skip
    rounds = 8
    producer = subprocess.Popen(
        [sys.executable, "-c", PRODUCE_LOOP, str(log_dir), str(records), str(rounds)]
    )
    batch = 1
    deadline = time.monotonic() + 240
    while producer.poll() is None and time.monotonic() < deadline:
        sink(rows(spark, batch * 100, batch * 100 + 100), batch)
        batch += 1
    assert producer.wait(timeout=240) == 0
    sink(rows(spark, batch * 100, batch * 100 + 100), batch)  # one more turn after it ended
    seen = values(log_dir)
    sink_values = Counter(str(i) for i in [*range(10), *range(100, (batch + 1) * 100)])
    produced = Counter({f"p{i}": rounds for i in range(200)})
    assert seen == sink_values + produced
    assert batch > 1
    assert verify_paths([log_dir]) == []
