"""The sink beside the tiering sidecar's local retention over many micro-batches, in one process
as ``kafkatier run`` deploys them: every segment the sidecar deletes is let go of by the sink's
next batch (no descriptor or mapping on a deleted file outlives it, so the disk is freed), and
the sink's descriptors stay flat."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fd_probe import held_deleted, open_descriptors

from kafkatier.sink import KafkaLogSink
from kafkatier.storage.verify.paths import verify_paths
from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.sidecar.tierer import Tierer
from kafkatier.tiering.store.object_store import FsspecStore

TOPIC_CONFIG = {"remote.storage.enable": "true", "segment.bytes": "20000",
                "max.message.bytes": "8000", "local.retention.bytes": "30000", "retention.ms": "-1"}
BATCHES = 10


def test_the_sink_lets_go_of_segments_local_retention_deleted(spark: Any, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    sink = KafkaLogSink(logs, topic="events", partitions=2, config=TOPIC_CONFIG)
    store = FsspecStore(f"file://{tmp_path / 'remote'}")
    tierer = Tierer(TieringConfig(log_dirs=(logs,), remote_url=store.url, orphan_grace_ms=0),
                    store)  # fmt: skip
    rows = spark.range(2000).selectExpr("cast(id as string) as key", "repeat('v', 100) as value")
    descriptors, deleted = [], 0
    for batch_id in range(BATCHES):
        sink(rows, batch_id)
        assert held_deleted(logs) == [], f"batch {batch_id}"
        descriptors.append(open_descriptors())
        deleted += tierer.run_once().total("local_segments_deleted")
        if batch_id == 0:
            assert held_deleted(logs)  # what the pass deleted, held until the sink's next batch
    assert deleted >= 2 * BATCHES  # local retention freed a few segments a pass
    assert max(descriptors[2:]) - min(descriptors[2:]) <= 4, descriptors
    sink(rows, BATCHES)
    sink.close()
    assert held_deleted(logs) == []
    assert verify_paths([logs]) == []
