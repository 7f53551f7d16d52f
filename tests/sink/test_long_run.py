"""The sink beside the tiering sidecar's local retention over many micro-batches, in both
deployments: in one process (as ``kafkatier run``) and as its own process (``kafkatier sidecar``
beside a user's job). Every segment the sidecar deletes is let go of by the sink's next batch (no
descriptor or mapping on a deleted file outlives it, so the disk is freed), and the sink's
descriptors and memory stay flat."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fd_probe import held_deleted, open_descriptors, resident_bytes

from kafkatier.sink import KafkaLogSink
from kafkatier.storage.verify.paths import verify_paths
from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.sidecar.tierer import Tierer
from kafkatier.tiering.store.object_store import FsspecStore

TOPIC_CONFIG = {"remote.storage.enable": "true", "segment.bytes": "20000",
                "max.message.bytes": "8000", "local.retention.bytes": "30000", "retention.ms": "-1"}
BATCHES = 10


def sidecar_pass(logs: Path, remote: str, own_process: bool) -> None:
    """One pass of the sidecar: in this process, or ``kafkatier sidecar --once`` beside it."""
    if not own_process:
        config = TieringConfig(log_dirs=(logs,), remote_url=remote, orphan_grace_ms=0)
        assert Tierer(config, FsspecStore(remote)).run_once().failures == 0
        return
    conf = logs.parent / "sidecar.properties"
    conf.write_text(f"log.dirs={logs}\nremote.storage.url={remote}\n"
                    "remote.log.orphan.grace.ms=0\n")  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "kafkatier.cli.main", "sidecar", "--once",
                           "--config", str(conf)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize("own_process", [False, True], ids=["in-process", "own-process"])
def test_the_sink_lets_go_of_segments_local_retention_deleted(
    spark: Any, tmp_path: Path, own_process: bool
) -> None:
    gc.collect()  # earlier tests' garbage in this worker (a dead sink's logs) closed now
    logs = tmp_path / "logs"
    sink = KafkaLogSink(logs, topic="events", partitions=2, config=TOPIC_CONFIG)
    remote = f"file://{tmp_path / 'remote'}"
    rows = spark.range(2000).selectExpr("cast(id as string) as key", "repeat('v', 100) as value")
    descriptors, memory = [], []
    for batch_id in range(BATCHES):
        sink(rows, batch_id)
        assert held_deleted(logs) == [], f"batch {batch_id}"
        descriptors.append(open_descriptors())
        memory.append(resident_bytes())
        sidecar_pass(logs, remote, own_process)
        if batch_id == 0:
            assert held_deleted(logs)  # what the pass deleted, held until the sink's next batch
    assert len(list(logs.glob("events-*/*.log"))) <= 2 * 4  # local retention kept it small
    print(f"descriptors after each batch {descriptors}; RSS MiB {[m >> 20 for m in memory]}")
    assert max(descriptors[2:]) - min(descriptors[2:]) <= 4, descriptors
    assert memory[-1] - memory[2] < 32 << 20, memory  # no growth with the batches
    sink(rows, BATCHES)
    sink.close()
    assert held_deleted(logs) == []
    assert verify_paths([logs]) == []
