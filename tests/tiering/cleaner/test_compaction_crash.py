"""``kafkatier clean --remote`` killed (SIGKILL) at chosen steps of remote compaction, against
real S3: afterwards the manifest names only existing objects, a restore verifies clean and shows,
segment by segment, either the old or the compacted records; a rerun converges to exactly what
local compaction makes of the same log, with no orphan left."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from compaction_support import (
    Workload,
    batch_rows,
    dir_batches,
)
from test_compaction import TOPIC, append, assert_no_orphans, settings, tier
from tier_fixtures import only

from kafkatier.storage.cleaner.compact import compact_log
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.log import wall_clock_ms
from kafkatier.storage.verify.paths import verify_paths
from kafkatier.tiering.crash import ENV
from kafkatier.tiering.metadata.manifest import object_key
from kafkatier.tiering.metadata.manifest_store import ManifestStore
from kafkatier.tiering.read.remote_reader import RemoteLogReader
from kafkatier.tiering.read.restore import restore_partition
from kafkatier.tiering.store.s3store import S3Store


def clean_remote(conf: Path, env: dict[str, str], crash: str | None) -> int:
    run_env = {**env, ENV: crash} if crash else {k: v for k, v in env.items() if k != ENV}
    done = subprocess.run([sys.executable, "-m", "kafkatier.cli.main", "clean", "--remote",
                           "--config", str(conf)], env=run_env, capture_output=True, text=True,
                          timeout=240)  # fmt: skip
    print(crash, done.returncode, done.stdout[-2000:], done.stderr[-3000:])
    return done.returncode


def rows_by_offset(rows: list[tuple[object, ...]], base: int, end: int) -> list[tuple[object, ...]]:
    return [r for r in rows if base <= int(r[0]) <= end]  # type: ignore[call-overload]


def restored_rows(tmp_path: Path, store: S3Store, name: str) -> list[tuple[object, ...]]:
    target = tmp_path / name
    restore_partition(store, TOPIC, 0, target)
    assert verify_paths([target / f"{TOPIC}-0"]) == []
    rows = batch_rows(dir_batches(target / f"{TOPIC}-0"))
    assert rows == batch_rows(RemoteLogReader(store, only(store, TOPIC, 0)).batches_from(0))
    shutil.rmtree(target)
    return rows


@pytest.fixture
def setup(tmp_path, s3_env, s3_url):
    logs, copy = tmp_path / "logs", tmp_path / "copy"
    config = settings(3000, 0)
    append(logs, Workload(5, keys=10), 120, 0, config)
    shutil.copytree(logs, copy)
    store = S3Store(s3_url, endpoint_url=s3_env.endpoint, region="us-east-1")
    tier(logs, store)
    old = batch_rows(RemoteLogReader(store, only(store, TOPIC, 0)).batches_from(0))
    with LogDirectory(copy) as log_dir:
        compact_log(log_dir.get_or_create(TOPIC, 0), now_ms=wall_clock_ms(),
                    first_dirty_offset=None)  # fmt: skip
    end = int(old[-1][1])
    new = [r for r in batch_rows(dir_batches(copy / f"{TOPIC}-0")) if int(r[1]) <= end]
    assert new != old
    conf = tmp_path / "sidecar.properties"
    conf.write_text(f"log.dirs={logs}\nremote.storage.url={s3_url}\n"
                    f"remote.storage.s3.endpoint.url={s3_env.endpoint}\n"
                    "remote.storage.s3.region=us-east-1\nremote.log.orphan.grace.ms=0\n")
    return conf, {**os.environ, **s3_env.env}, store, old, new


@pytest.mark.parametrize(("crash", "state"), [
    ("compact-after-upload", "old"),  # new objects uploaded, not swapped in
    ("compact-after-swap:2", "mixed"),  # two groups swapped, the rest not yet
    ("compact-mid-delete", "new"),  # all swapped, the first replaced attempt's objects gone
])
def test_sigkill_during_remote_compaction_then_rerun_converges(tmp_path, setup, crash, state):
    conf, env, store, old, new = setup
    assert clean_remote(conf, env, crash) == -signal.SIGKILL
    manifest, _ = ManifestStore(store).load(only(store, TOPIC, 0))
    for seg in manifest.finished():  # no FINISHED entry names a missing object
        for kind, meta in seg.files.items():
            info = store.head(object_key(only(store, TOPIC, 0), seg, kind))
            assert info is not None and info.size == meta.size
    rows = restored_rows(tmp_path, store, "after-crash")
    for seg in manifest.contiguous():  # each range either old or new, never a mix or a loss
        got = rows_by_offset(rows, seg.base_offset, seg.end_offset)
        assert got in (rows_by_offset(old, seg.base_offset, seg.end_offset),
                       rows_by_offset(new, seg.base_offset, seg.end_offset))
    if state != "mixed":
        assert rows == (old if state == "old" else new)
    else:
        assert rows not in (old, new)
    assert clean_remote(conf, env, None) == 0
    assert restored_rows(tmp_path, store, "after-rerun") == new
    assert_no_orphans(store)
