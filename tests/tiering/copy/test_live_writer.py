"""The sidecar beside a live writer: passes while the writer appends, rolls and flushes (as the
Spark sink does), local retention deleting segments the writer still has open."""

from __future__ import annotations

import threading

from tier_fixtures import TIERED, fill, only

from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.readonly import ReadOnlyPartition
from kafkatier.storage.verify.paths import verify_paths
from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.metadata.manifest import object_key
from kafkatier.tiering.metadata.manifest_store import ManifestStore
from kafkatier.tiering.read.restore import restore_topic
from kafkatier.tiering.sidecar.tierer import Tierer
from kafkatier.tiering.store.object_store import FsspecStore


def test_sidecar_beside_a_live_writer(tmp_path) -> None:
    logs = tmp_path / "logs"
    store = FsspecStore(f"file://{tmp_path / 'remote'}")
    config = TieringConfig(log_dirs=(logs,), remote_url=store.url, orphan_grace_ms=0)
    written: dict[int, bytes] = {}
    stop = threading.Event()
    with LogDirectory(logs) as log_dir:
        log_dir.topic_configs.update("tiered", {**TIERED, "local.retention.bytes": "3000",
                                                "retention.bytes": "-1"}, "test")
        log = log_dir.get_or_create("tiered", 0)

        def write() -> None:
            for round_ in range(30):
                fill(log, 2, start=round_ * 2)
                log_dir.flush()  # recovery point and checkpoints move, as the sink's commits
            stop.set()

        writer = threading.Thread(target=write)
        writer.start()
        tierer = Tierer(config, store)
        failures = 0
        while not stop.is_set():
            failures += tierer.run_once().failures
        writer.join()
        for seg in log.segments:
            written[seg.base_offset] = seg.log_path.read_bytes() if seg.log_path.exists() else b""
    assert failures == 0
    assert Tierer(config, store).run_once().failures == 0
    assert verify_paths([logs]) == []
    manifest, _ = ManifestStore(store).load(only(store, "tiered", 0))
    with ReadOnlyPartition(logs, "tiered", 0) as part:
        local = {s.base_offset: s.log_path.read_bytes() for s in part.segments}
    for seg in manifest.finished():
        remote = store.get_bytes(object_key(only(store, "tiered", 0), seg, "log"))
        assert remote == local.get(seg.base_offset, remote)
    assert min(local) > 0  # local retention ran under the writer
    assert {s.base_offset for s in manifest.finished()} >= {b for b in written if b < min(local)}
    restored = restore_topic(store, "tiered", tmp_path / "restored")
    assert restored[0].log_end_offset == max(local)
    assert verify_paths([tmp_path / "restored"]) == []
