"""SIGKILL of a tiering pass at each step of remote retention, against real S3: after the
manifest's log start moved, before and after the local checkpoint write, between two object
deletes, and after the objects went but before the entry was dropped.

Right after each kill: no FINISHED entry names a missing object, and a restore verifies clean.
After the next pass: no orphan, the remote and local log starts are where Kafka's rule puts
them (computed here from the segment sizes), and the log dir verifies clean. Last, a
DeleteRecords inside a segment, killed while the local segments below it are being deleted.

Run as a script, this file is the killed process: one pass over LOG_DIR whose store passes
through the named crash point ``remote-object-delete`` before each object delete.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tier_fixtures import only, write_tiered

from kafkatier.storage.cleaner.retention import delete_records
from kafkatier.storage.config.topic_files import TopicConfigStore
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.readonly import ReadOnlyPartition, checkpointed_log_starts
from kafkatier.storage.verify.paths import verify_paths
from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.crash import ENV, crash_point
from kafkatier.tiering.metadata.manifest import MANIFEST_NAME, SegmentState, object_key
from kafkatier.tiering.metadata.manifest_store import ManifestStore
from kafkatier.tiering.read.restore import restore_topic
from kafkatier.tiering.sidecar.tierer import Tierer
from kafkatier.tiering.store.s3store import S3Store

TP = ("tiered", 0)
CRASHES = [  # one round each, in this order; each round expires one more segment
    ["after-remote-start"],
    ["before-local-checkpoint"],
    ["after-local-checkpoint"],
    ["remote-object-delete:3"],
    ["mid-delete"],  # the entry is left DELETE_SEGMENT_STARTED: the orphan sweep finishes it
]


class _KillableStore(S3Store):
    def delete(self, key: str) -> None:
        crash_point("remote-object-delete")
        super().delete(key)


def _pass(logs: Path, url: str, endpoint: str, killable: bool = False) -> int:
    cls = _KillableStore if killable else S3Store
    store = cls(url, endpoint_url=endpoint, region="us-east-1")
    config = TieringConfig(log_dirs=(logs,), remote_url=url, orphan_grace_ms=0, threads=1)
    return Tierer(config, store).run_once().failures


def _killed_pass(logs: Path, url: str, env: dict[str, str], endpoint: str, crash: str) -> int:
    path = os.pathsep.join(sys.path)  # this file imports tier_fixtures from tests/tiering
    done = subprocess.run([sys.executable, __file__, str(logs), url, endpoint],
                          env={**env, ENV: crash, "PYTHONPATH": path},
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    print(crash, done.returncode, done.stderr[-2000:])
    return done.returncode


def _named_objects_exist(store: S3Store) -> None:
    manifest, _ = ManifestStore(store).load(only(store, *TP))
    for seg in manifest.finished():
        for kind, meta in seg.files.items():
            info = store.head(object_key(only(store, *TP), seg, kind))
            assert info is not None and info.size == meta.size, (seg, kind)


def _converged(store: S3Store, logs: Path, expected: int, first_base: int | None = None) -> None:
    """Converged with the log start at ``expected``, inside the segment at ``first_base``."""
    first_base = expected if first_base is None else first_base
    rp = only(store, *TP)
    manifest, _ = ManifestStore(store).load(rp)
    assert all(s.state is SegmentState.COPY_SEGMENT_FINISHED for s in manifest.segments)
    named = {object_key(rp, s, k) for s in manifest.segments for k in s.files}
    listed = {i.key for i in store.list(rp.prefix) if not i.key.endswith(MANIFEST_NAME)}
    assert listed == named  # no orphan, nothing named missing
    assert manifest.log_start_offset == expected
    assert manifest.finished()[0].base_offset == first_base
    assert checkpointed_log_starts(logs)[TP] == expected
    with ReadOnlyPartition(logs, *TP) as part:
        assert part.segments[0].base_offset == first_base
    assert verify_paths([logs]) == []


def test_sigkill_at_each_step_of_remote_retention(tmp_path, s3_env, s3_url) -> None:
    logs = write_tiered(tmp_path / "logs", steps=90, overrides={"retention.bytes": "-1"})
    with ReadOnlyPartition(logs, *TP) as part:
        sizes = [(s.base_offset, s.size) for s in part.segments]
    assert len(sizes) >= len(CRASHES) + 5
    env = {**os.environ, **s3_env.env}
    store = S3Store(s3_url, endpoint_url=s3_env.endpoint, region="us-east-1")
    assert _pass(logs, s3_url, s3_env.endpoint) == 0  # everything closed is uploaded
    for round_, crashes in enumerate(CRASHES, start=1):
        expected = sizes[round_][0]
        limit = sum(size for _, size in sizes[round_:])  # Kafka's rule: exactly `round_` go
        TopicConfigStore(logs).update("tiered", {"retention.bytes": str(limit)}, "test")
        for crash in crashes:
            assert _killed_pass(logs, s3_url, env, s3_env.endpoint, crash) == -signal.SIGKILL
            _named_objects_exist(store)
            target = tmp_path / f"restored-{round_}-{crash}"
            restored = restore_topic(store, "tiered", target)
            assert verify_paths([target]) == []
            assert restored[0].log_start_offset == expected
        assert _pass(logs, s3_url, s3_env.endpoint) == 0
        _converged(store, logs, expected)
    # DeleteRecords inside a segment: killed while deleting the local segments below it
    target = sizes[len(CRASHES) + 3][0] + 2
    with LogDirectory(logs) as log_dir:
        delete_records(log_dir.logs[TP], target, persist_start=log_dir.checkpoint)
    assert _killed_pass(logs, s3_url, env, s3_env.endpoint, "mid-local-delete") == -signal.SIGKILL
    _named_objects_exist(store)
    assert ManifestStore(store).load(only(store, *TP))[0].log_start_offset == target
    assert _pass(logs, s3_url, s3_env.endpoint) == 0
    _converged(store, logs, target, sizes[len(CRASHES) + 3][0])


if __name__ == "__main__":
    sys.exit(_pass(Path(sys.argv[1]), sys.argv[2], sys.argv[3], killable=True))
