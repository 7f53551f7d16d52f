"""A sidecar pass that compacts several partitions remotely waits out the grace for readers of
the old manifest once, at the end of the pass, not once per partition; the replaced objects are
still gone when the pass returns (real SeaweedFS; the grace is measured on an injected clock)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from compaction_support import Workload
from tier_fixtures import only

from kafkatier.storage.log.directory import LogDirectory
from kafkatier.tiering.cleaner import swap as remote_swap
from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.metadata.manifest import MANIFEST_NAME, object_key
from kafkatier.tiering.metadata.manifest_store import ManifestStore
from kafkatier.tiering.sidecar.tierer import Tierer
from kafkatier.tiering.store.s3store import S3Store

TOPICS = ("kv-a", "kv-b", "kv-c")
T0 = int(time.time() * 1000) - 3_600_000
GRACE_MS = 60_000


class SkippingClock:
    """``time`` for remote_swap: real monotonic time plus what ``sleep`` skipped."""

    def __init__(self) -> None:
        self.skipped = 0.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return time.monotonic() + self.skipped

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.skipped += seconds


def write_topics(logs: Path) -> None:
    config = {"cleanup.policy": "compact", "remote.storage.enable": "true",
              "segment.bytes": "1500", "index.interval.bytes": "200",
              "local.retention.bytes": "0", "retention.bytes": "-1",
              "min.cleanable.dirty.ratio": "0.5"}  # fmt: skip
    with LogDirectory(logs) as log_dir:
        for n, topic in enumerate(TOPICS):
            log_dir.topic_configs.update(topic, config, "test")
            log = log_dir.get_or_create(topic, 0)
            work = Workload(20 + n, keys=8)
            for i in range(150):
                work.step(log, T0 + i)
            work.close_all(log, T0 + 150)
            log.roll()
        log_dir.flush()


def only_finished_objects(store: S3Store, topic: str) -> bool:
    rp = only(store, topic, 0)
    manifest, _ = ManifestStore(store).load(rp)
    named = {object_key(rp, s, kind) for s in manifest.segments for kind in s.files}
    listed = {i.key for i in store.list(rp.prefix) if not i.key.endswith(MANIFEST_NAME)}
    return all(s.finished for s in manifest.segments) and listed == named


def test_one_grace_per_pass_and_replaced_objects_gone_after_it(
    tmp_path: Path, s3_store: S3Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    logs = tmp_path / "logs"
    write_topics(logs)
    clock = SkippingClock()
    monkeypatch.setattr(remote_swap, "time", clock)
    config = TieringConfig(log_dirs=(logs,), remote_url=s3_store.url, orphan_grace_ms=0, threads=1)
    tierer = Tierer(config, s3_store)
    tierer.compaction_grace_ms = GRACE_MS
    result = tierer.run_once()
    compacted: Any = [p for p in result.partitions if p.remote_compactions]
    assert result.failures == 0 and len(compacted) == len(TOPICS)
    # one partition after another (threads=1): a wait per partition would sum to 3 graces
    assert clock.sleeps and sum(clock.sleeps) <= GRACE_MS / 1000
    assert all(only_finished_objects(s3_store, t) for t in TOPICS)
