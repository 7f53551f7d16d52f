"""Uploads and restores through a fault-injecting proxy in front of the real S3 server: 500s,
503 SlowDown, connection resets mid-upload and mid-download, stalls and bit flips."""

from __future__ import annotations

import filecmp
from pathlib import Path

from fault_proxy import OutageAfterFirstObject, impatient_store
from tier_fixtures import only, write_tiered

from kafkatier.storage.log.readonly import ReadOnlyPartition
from kafkatier.storage.verify.paths import verify_paths
from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.errors import RemoteVerifyError
from kafkatier.tiering.metadata.manifest import object_key
from kafkatier.tiering.metadata.manifest_store import ManifestStore
from kafkatier.tiering.read.restore import restore_topic
from kafkatier.tiering.sidecar.tierer import Tierer
from kafkatier.tiering.store.s3store import S3Store

OVERRIDES = {"local.retention.bytes": "4000", "retention.bytes": "-1"}



def _store(url: str, endpoint: str, attempts: int = 8) -> S3Store:
    return impatient_store(url, endpoint, attempts, multipart_threshold=5 << 20,
                           multipart_chunksize=5 << 20)


def _tier(logs: Path, store: S3Store):
    config = TieringConfig(log_dirs=(logs,), remote_url=store.url, orphan_grace_ms=0, threads=1)
    return Tierer(config, store).run_once()


def _assert_remote_matches(direct: S3Store, original: dict[int, bytes]) -> None:
    rp = only(direct, "tiered", 0)
    manifest, _ = ManifestStore(direct).load(rp)
    assert manifest.finished()
    assert all(s.finished for s in manifest.segments)
    for seg in manifest.finished():
        assert direct.get_bytes(object_key(rp, seg, "log")) == original[seg.base_offset]


def _original(logs: Path) -> dict[int, bytes]:
    with ReadOnlyPartition(logs, "tiered", 0) as part:
        return {s.base_offset: s.log_path.read_bytes() for s in part.segments}


def test_upload_retries_through_errors_resets_and_stalls(tmp_path, s3_env, s3_url, proxy):
    logs = write_tiered(tmp_path / "logs", overrides=OVERRIDES)
    original = _original(logs)
    proxy.inject("503", "500", "reset-up:3000", "stall:4", "reset-down:200", "503",
                 "reset-down:5000", "500")
    result = _tier(logs, _store(s3_url, proxy.endpoint))
    assert result.failures == 0
    assert not proxy.faults  # every fault was hit
    assert result.total("local_segments_deleted") > 0
    _assert_remote_matches(_store(s3_url, s3_env.endpoint), original)
    assert verify_paths([logs / "tiered-0"]) == []



def test_outage_mid_segment_leaves_local_data_and_converges_after(
    tmp_path, s3_env, s3_url, proxy
) -> None:
    logs = write_tiered(tmp_path / "logs", overrides=OVERRIDES)
    original = _original(logs)
    flaky = OutageAfterFirstObject(s3_url, endpoint_url=proxy.endpoint, region="us-east-1",
                                    max_attempts=2, read_timeout=2)
    flaky.proxy = proxy
    result = _tier(logs, flaky)
    assert result.failures == 1
    assert _original(logs) == original  # nothing deleted locally
    direct = _store(s3_url, s3_env.endpoint)
    manifest, _ = ManifestStore(direct).load(only(direct, "tiered", 0))
    assert manifest.finished() == []
    assert manifest.segments == []  # an attempt is named only by its commit; the objects of
    # the failed ones, whose cleanup failed too, are strays for the next run's sweep
    proxy.recover()
    assert _tier(logs, _store(s3_url, proxy.endpoint)).failures == 0
    _assert_remote_matches(direct, original)
    rp = only(direct, "tiered", 0)
    named = {object_key(rp, s, k) for s in ManifestStore(direct).load(rp)[0].finished()
             for k in s.files}
    listed = {i.key for i in direct.list(rp.prefix) if not i.key.endswith("manifest.json")}
    assert listed == named  # the abandoned attempt's object was swept


def test_restore_through_faults_is_right_or_refuses(tmp_path, s3_env, s3_url, proxy) -> None:
    logs = write_tiered(tmp_path / "logs")
    assert _tier(logs, _store(s3_url, s3_env.endpoint)).failures == 0
    target = tmp_path / "restored"
    proxy.inject("reset-down:1500", "503", "corrupt-down:2500", "stall:4", "500",
                 "corrupt-down:900")
    faulty = _store(s3_url, proxy.endpoint)
    outcomes = []
    for _ in range(4):  # each run resumes the last; corruption is refused, never kept
        try:
            restore_topic(faulty, "tiered", target, threads=2)
            outcomes.append("ok")
            break
        except RemoteVerifyError:
            outcomes.append("refused")
    assert outcomes[-1] == "ok"
    assert verify_paths([target]) == []
    for path in (target / "tiered-0").iterdir():
        if path.suffix in (".log", ".index", ".timeindex", ".txnindex", ".snapshot"):
            assert filecmp.cmp(path, logs / "tiered-0" / path.name, shallow=False), path
