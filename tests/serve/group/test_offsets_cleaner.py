"""The server compacts its own ``__consumer_offsets`` (``log.cleaner.backoff.ms``): a client
committing the same partition 150 times leaves a few records on disk, and a restarted server
still answers the last commit."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from group_clients import TOPIC, write_topic

from kafkatier.serve.group.offset_store import TOPIC as OFFSETS
from kafkatier.storage.log.readonly import ReadOnlyPartition


def records_on_disk(offsets_dir: Path) -> int:
    with ReadOnlyPartition(offsets_dir, OFFSETS, 0) as part:
        return sum(1 for s in part.bases for b in part.segment(s).batches()
                   for _ in b.records())  # fmt: skip


def test_the_server_compacts_its_offsets_topic(tmp_path: Path, serve: Any) -> None:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    log_dir, offsets_dir = tmp_path / "logs", tmp_path / "offsets"
    write_topic(log_dir)
    settings = {"offsets__log__dir": str(offsets_dir), "offsets__topic__segment__bytes": "1024",
                "log__cleaner__backoff__ms": "200"}  # fmt: skip
    tp = TopicPartition(TOPIC, 0)
    with serve(log_dir, **settings) as port:
        consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", group_id="busy",
                                 enable_auto_commit=False)  # fmt: skip
        consumer.assign([tp])
        for i in range(1, 151):
            consumer.commit({tp: OffsetAndMetadata(i, "", -1)})
        consumer.close()
        deadline = time.monotonic() + 15
        while records_on_disk(offsets_dir) > 30 and time.monotonic() < deadline:
            time.sleep(0.2)
        left = records_on_disk(offsets_dir)
    assert left <= 30, f"{left} of 150 commits still on disk"
    with serve(log_dir, **settings) as port:
        consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", group_id="busy",
                                 enable_auto_commit=False)  # fmt: skip
        try:
            assert consumer.committed(tp) == 150
        finally:
            consumer.close()


def test_old_commits_of_an_empty_group_expire(tmp_path: Path, serve: Any) -> None:
    """A commit made long ago (written before the server starts) is gone after the first
    check (``offsets.retention.check.interval.ms``); a fresh one stays."""
    from kafka import KafkaConsumer, TopicPartition

    from kafkatier.serve.group.offset_store import OffsetStore
    from kafkatier.serve.group.records import OffsetValue

    log_dir, offsets_dir = tmp_path / "logs", tmp_path / "offsets"
    write_topic(log_dir)
    store = OffsetStore(offsets_dir, 1)
    now = int(time.time() * 1000)
    store.commit("old", [(TOPIC, 0, OffsetValue(3, -1, "", now - 2 * 60_000))])
    store.commit("new", [(TOPIC, 0, OffsetValue(4, -1, "", now))])
    store.close()
    settings = {"offsets__log__dir": str(offsets_dir), "offsets__retention__minutes": "1",
                "offsets__retention__check__interval__ms": "100"}  # fmt: skip
    tp = TopicPartition(TOPIC, 0)
    with serve(log_dir, **settings) as port:
        time.sleep(1)
        found = {}
        for group in ("old", "new"):
            consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", group_id=group,
                                     enable_auto_commit=False)  # fmt: skip
            try:
                found[group] = consumer.committed(tp)
            finally:
                consumer.close()
    assert found == {"old": None, "new": 4}
