"""Several writers on one log dir (storage/log/writer_lock.py): two sinks with different sink ids on
one topic, and a sink beside `kafkatier produce` running in another process at the same time.
Every record lands exactly once and the log verifies clean: without the turns, a writer would
append at offsets and file positions another writer had already used."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from test_sink import read_topic

from kafkatier.sink import KafkaLogSink
from kafkatier.sink.bookkeeping import derive_producer_id
from kafkatier.sink.stage import wal_prefix
from kafkatier.storage.checkpoint.checkpoint_file import (
    RECOVERY_POINT_CHECKPOINT,
    OffsetCheckpointFile,
)
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


def _index_files(log_dir: Path) -> dict[str, bytes]:
    return {f"{p.parent.name}/{p.name}": p.read_bytes()
            for p in sorted(log_dir.glob("*/*index"))}  # fmt: skip


def _after_b_turns(spark: Any, log_dir: Path) -> KafkaLogSink:
    """Sink a, one batch into one partition of topic t, then four turns of sink b there and its
    close (b's appends make index entries)."""
    a = KafkaLogSink(log_dir, topic="t", partitions=1, sink_id="a")
    a(rows(spark, 0, 10), 0)
    b = KafkaLogSink(log_dir, topic="t", sink_id="b")
    for batch in range(4):
        b(rows(spark, 1_000 + batch * 2_000, 3_000 + batch * 2_000), batch)
    b.close()
    return a


def test_a_sink_writes_nothing_from_its_view_before_another_writers_turn(
    spark: Any, tmp_path: Path
) -> None:
    """Sink a's last batch is decided, its flush and index entries still to come, when sink b
    takes turns on the same partition and closes (its index entries trimmed into the files).
    At a's next batch its view is stale: closing those logs used to trim the indexes to a's
    own count of entries, cutting b's (an index a rebuild would not give, and a time index
    whose last entry, the segment's max timestamp for time retention, went back to a's)."""
    log_dir = tmp_path / "logs"
    a = _after_b_turns(spark, log_dir)
    theirs = _index_files(log_dir)
    a(rows(spark, 10, 20), 1)
    a.close()
    ours = _index_files(log_dir)
    assert all(ours[name].startswith(entries) for name, entries in theirs.items())
    assert len(theirs["t-0/00000000000000000000.index"]) >= 8 * 4  # b's appends made entries
    rebuilt = tmp_path / "rebuilt"
    shutil.copytree(log_dir, rebuilt)
    for index in rebuilt.glob("*/*index"):
        index.unlink()
    LogDirectory(rebuilt).close()  # rebuilds both indexes from the log
    time_index = "t-0/00000000000000000000.timeindex"  # its last entry: the segment's max
    assert ours[time_index][-12:] == _index_files(rebuilt)[time_index][-12:]
    assert values(log_dir) == Counter(str(i) for i in [*range(20), *range(1_000, 9_000)])
    assert verify_paths([log_dir]) == []


def test_a_sink_keeps_another_writers_checkpoints(spark: Any, tmp_path: Path) -> None:
    """Sinks a and b on two topics of one log dir: b creates its topic after a opened the log
    dir, and closes. a's next batch must not write the checkpoints from its older view (they
    lacked b's topic, and a's recovery points for its own were lower than b's close wrote)."""
    log_dir = tmp_path / "logs"
    a = KafkaLogSink(log_dir, topic="t", partitions=2, sink_id="a")
    a(rows(spark, 0, 100), 0)
    b = KafkaLogSink(log_dir, topic="u", partitions=2, sink_id="b")
    b(rows(spark, 0, 100), 0)
    b.close()
    points = OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT)
    closed = points.read()
    assert {topic for topic, _ in closed} == {"t", "u"}
    a(rows(spark, 100, 200), 1)
    after = points.read()
    assert all(after.get(tp, -1) >= offset for tp, offset in closed.items()), (closed, after)
    a.close()
    final = points.read()
    assert {tp: final[tp] for tp in closed if tp[0] == "u"} == {
        tp: offset for tp, offset in closed.items() if tp[0] == "u"
    }
    assert all(final[tp] > closed[tp] for tp in closed if tp[0] == "t")


def test_a_sink_closed_after_another_writers_turn(spark: Any, tmp_path: Path) -> None:
    """The stop of a query whose sink's view went stale (b's turns came after a's last batch):
    nothing is written from that view, a's batch waiting for a flush is made durable in the
    logs as they are now, and its staging files go."""
    log_dir = tmp_path / "logs"
    a = _after_b_turns(spark, log_dir)
    theirs = _index_files(log_dir)
    closed = OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT).read()
    assert list(log_dir.glob(f"{wal_prefix('a')}*"))  # a's batch still waits for its flush
    a.close()
    ours = _index_files(log_dir)
    assert all(ours[name].startswith(entries) for name, entries in theirs.items())
    assert not list(log_dir.glob(f"{wal_prefix('a')}*"))
    assert OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT).read() == closed
    assert values(log_dir) == Counter(str(i) for i in [*range(10), *range(1_000, 9_000)])
    assert verify_paths([log_dir]) == []
