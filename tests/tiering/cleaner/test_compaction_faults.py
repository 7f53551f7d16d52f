"""Remote compaction through the fault-injecting proxy in front of the real S3 server: transient
500s, 503s and connection resets are retried and the result is exact; an outage part-way fails
the pass cleanly (old or new segments per range, nothing lost, nothing named that is missing)
and the next pass converges."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from compaction_support import (
    Workload,
    batch_rows,
    dir_batches,
)
from fault_proxy import FaultProxy, OutageAfterFirstObject, impatient_store
from test_compaction import TOPIC, append, assert_no_orphans, settings, tier
from test_compaction_crash import restored_rows
from tier_fixtures import CORRUPTIONS, only

from kafkatier.storage.cleaner.compact import compact_log
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.log import wall_clock_ms
from kafkatier.tiering.cleaner.clean_pass import RemotePass
from kafkatier.tiering.cleaner.compaction import compact_remote
from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.errors import CorruptRemoteObjectError
from kafkatier.tiering.metadata.local import LocalPartition
from kafkatier.tiering.metadata.manifest import manifest_key, object_key
from kafkatier.tiering.metadata.manifest_store import ManifestStore
from kafkatier.tiering.read.remote_reader import RemoteLogReader
from kafkatier.tiering.store.s3store import S3Store


def _store(url: str, endpoint: str, attempts: int = 8) -> S3Store:
    return impatient_store(url, endpoint, attempts)


def _prepare(tmp_path: Path, direct: S3Store) -> tuple[Path, list[tuple[object, ...]],
                                                       list[tuple[object, ...]]]:  # fmt: skip
    logs, copy = tmp_path / "logs", tmp_path / "copy"
    append(logs, Workload(9, keys=10), 120, 0, settings(3000, 0))
    shutil.copytree(logs, copy)
    tier(logs, direct)
    old = batch_rows(RemoteLogReader(direct, only(direct, TOPIC, 0)).batches_from(0))
    with LogDirectory(copy) as log_dir:
        compact_log(log_dir.get_or_create(TOPIC, 0), now_ms=wall_clock_ms(),
                    first_dirty_offset=None)  # fmt: skip
    end = int(old[-1][1])
    new = [r for r in batch_rows(dir_batches(copy / f"{TOPIC}-0")) if int(r[1]) <= end]
    return logs, old, new


def _compact(logs: Path, store: S3Store) -> None:
    with LocalPartition(logs, TOPIC, 0) as part:
        compact_remote(store, part.remote, config=part.config, local=part, now_ms=wall_clock_ms(),
                       owner="faults")  # fmt: skip


class _FaultsMidCompaction(S3Store):
    """Once the pass's first new object landed, open connections are reset and the next new
    ones get the queued faults: they hit the compaction's uploads, swap and reads."""

    proxy: FaultProxy
    faults: tuple[str, ...] = ("503", "reset-up:400", "500", "reset-down:300")

    def put_file(self, key, path, *, progress=None):
        info = super().put_file(key, path, progress=progress)
        if self.faults:
            self.proxy.inject(*self.faults)
            self.faults = ()
            self.proxy.outage("503")  # resets the open connections...
            self.proxy.recover()  # ...and new ones take the queued faults
        return info


def test_transient_faults_are_retried_and_the_result_is_exact(tmp_path, s3_env, s3_url, proxy):
    direct = _store(s3_url, s3_env.endpoint)
    logs, _old, new = _prepare(tmp_path, direct)
    faulty = _FaultsMidCompaction(s3_url, endpoint_url=proxy.endpoint, region="us-east-1",
                                  max_attempts=8, read_timeout=2, connect_timeout=2)  # fmt: skip
    faulty.proxy = proxy
    _compact(logs, faulty)
    assert not proxy.faults  # every fault was hit
    assert set(_FaultsMidCompaction.faults) <= set(proxy.seen)
    assert restored_rows(tmp_path, direct, "restored") == new
    assert_no_orphans(direct)



def test_outage_mid_compaction_fails_cleanly_and_the_next_pass_converges(
    tmp_path, s3_env, s3_url, proxy
) -> None:
    direct = _store(s3_url, s3_env.endpoint)
    logs, old, new = _prepare(tmp_path, direct)
    flaky = OutageAfterFirstObject(s3_url, endpoint_url=proxy.endpoint, region="us-east-1",
                                    max_attempts=2, read_timeout=2)  # fmt: skip
    flaky.proxy = proxy
    with pytest.raises(Exception):  # noqa: B017 (whichever error the client gives up with)
        _compact(logs, flaky)
    proxy.recover()
    manifest, _ = ManifestStore(direct).load(only(direct, TOPIC, 0))
    for seg in manifest.finished():
        for kind, meta in seg.files.items():
            info = direct.head(object_key(only(direct, TOPIC, 0), seg, kind))
            assert info is not None and info.size == meta.size
    rows = restored_rows(tmp_path, direct, "after-outage")
    assert rows == old  # the first group never swapped: the old segments are in force
    config = TieringConfig(log_dirs=(logs,), remote_url=s3_url, orphan_grace_ms=0)
    outcomes = RemotePass(config, _store(s3_url, proxy.endpoint)).run()
    assert [o.error for o in outcomes] == [None] and outcomes[0].orphans_removed >= 1
    assert restored_rows(tmp_path, direct, "after-rerun") == new
    assert_no_orphans(direct)


@pytest.mark.parametrize("kind", sorted(CORRUPTIONS))
def test_a_corrupt_object_stops_remote_compaction_before_any_rewrite(
    tmp_path, s3_env, s3_url, kind: str
) -> None:
    """The cleaner reads every remote batch it keeps records of; a corrupt object (whatever is
    wrong with it) fails the pass naming the object, and nothing was rewritten or swapped: the
    manifest is the one before, and no object was left behind."""
    direct = _store(s3_url, s3_env.endpoint)
    logs, _old, _new = _prepare(tmp_path, direct)
    rp = only(direct, TOPIC, 0)
    manifests = ManifestStore(direct)
    manifest, _ = manifests.load(rp)
    victim, other = manifest.finished()[1], manifest.finished()[0]
    key = object_key(rp, victim, "log")
    other_bytes = direct.get_bytes(object_key(rp, other, "log"))
    direct.put_bytes(key, CORRUPTIONS[kind](direct.get_bytes(key), other_bytes))
    before = direct.get_bytes(manifest_key(rp))
    with pytest.raises(CorruptRemoteObjectError, match=key):
        _compact(logs, direct)
    assert direct.get_bytes(manifest_key(rp)) == before
    assert_no_orphans(direct)
