"""SIGKILL of the sidecar at named points and at a random moment, against real S3: the next run
converges, with no FINISHED entry naming a missing object, no orphan left, and no local segment
deleted without a FINISHED, verified remote copy."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest
from test_sidecar import sidecar_cmd, write_conf
from tier_fixtures import only, write_tiered

from kafkatier.storage.log.readonly import ReadOnlyPartition
from kafkatier.storage.verify.paths import verify_paths
from kafkatier.tiering.crash import ENV
from kafkatier.tiering.metadata.manifest import MANIFEST_NAME, object_key
from kafkatier.tiering.metadata.manifest_store import ManifestStore
from kafkatier.tiering.store.s3store import S3Store

OVERRIDES = {"local.retention.bytes": "4000", "retention.bytes": "-1"}


def _run(conf: Path, env: dict[str, str], crash: str | None) -> int:
    run_env = {**env, ENV: crash} if crash else {k: v for k, v in env.items() if k != ENV}
    done = subprocess.run(sidecar_cmd(conf, "--once"), env=run_env, capture_output=True,
                          text=True, timeout=180)
    print(crash, done.returncode, done.stderr[-3000:])
    return done.returncode


def _check_invariants(store: S3Store, logs: Path, original: dict[int, bytes]) -> None:
    rp = only(store, "tiered", 0)
    manifest, _ = ManifestStore(store).load(rp)
    named = set()
    for seg in manifest.segments:
        assert seg.finished, seg  # converged: nothing STARTED or being deleted
        for kind, meta in seg.files.items():
            key = object_key(rp, seg, kind)
            info = store.head(key)
            assert info is not None and info.size == meta.size, key
            named.add(key)
    listed = {i.key for i in store.list(rp.prefix) if not i.key.endswith(MANIFEST_NAME)}
    assert listed == named  # no orphan objects
    bases = [s.base_offset for s in manifest.finished()]
    assert len(bases) == len(set(bases))  # no duplicate copies
    with ReadOnlyPartition(logs, "tiered", 0) as part:
        local = {s.base_offset for s in part.segments}
        closed = [s.base_offset for s in part.segments[:-1]]
    for base, data in original.items():
        if base not in local:  # deleted locally: must exist remotely, byte for byte
            seg = manifest.finished_for(base)
            assert seg is not None
            assert store.get_bytes(object_key(only(store, "tiered", 0), seg, "log")) == data
    assert set(closed) <= set(bases)
    assert verify_paths([logs / "tiered-0"]) == []


def _setup(tmp_path: Path, s3_env, s3_url: str) -> tuple[Path, Path, dict[str, str], S3Store,
                                                           dict[int, bytes]]:
    logs = write_tiered(tmp_path / "logs", steps=60, overrides=OVERRIDES)
    conf = write_conf(tmp_path / "s.properties", logs, s3_url,
                      **{"remote.storage.s3.endpoint.url": s3_env.endpoint,
                         "remote.storage.s3.region": "us-east-1",
                         "remote.log.manager.copier.thread.pool.size": 1})
    with ReadOnlyPartition(logs, "tiered", 0) as part:
        original = {s.base_offset: s.log_path.read_bytes() for s in part.segments}
    store = S3Store(s3_url, endpoint_url=s3_env.endpoint, region="us-east-1")
    return logs, conf, {**os.environ, **s3_env.env}, store, original


@pytest.mark.parametrize("crashes", [
    ["mid-upload:3", "after-started:2"],
    ["before-finished:2"],
    ["after-finished:3", "mid-local-delete:2"],
    ["after-started", "mid-upload:2", "mid-delete"],
])
def test_sigkill_at_named_points_then_restart_converges(tmp_path, s3_env, s3_url, crashes):
    logs, conf, env, store, original = _setup(tmp_path, s3_env, s3_url)
    for crash in crashes:
        assert _run(conf, env, crash) == -signal.SIGKILL, crash
    assert _run(conf, env, None) == 0
    _check_invariants(store, logs, original)


def test_sigkill_at_a_random_moment_then_restart_converges(tmp_path, s3_env, s3_url) -> None:
    logs, conf, env, store, original = _setup(tmp_path, s3_env, s3_url)
    rng = random.Random(os.environ.get("PYTEST_SEED", time.time_ns()))
    proc = subprocess.Popen(sidecar_cmd(conf), env=env, stderr=subprocess.DEVNULL)
    time.sleep(rng.uniform(1.0, 3.0))  # past imports, into the first pass (machine permitting)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert _run(conf, env, None) == 0
    _check_invariants(store, logs, original)
