"""Remote retention through the fault-injecting proxy: 500s, 503s and connection resets (before
the request is through, and after the server acted but before the answer arrived) on object
deletes and on the manifest updates. Every failed request is retried, the pass converges, and
no object is ever deleted while a FINISHED entry of the manifest still names it."""

from __future__ import annotations

from pathlib import Path

from fault_proxy import FaultProxy
from test_retention_crash import TP, _converged, _named_objects_exist
from tier_fixtures import only, write_tiered

from kafkatier.storage.config.topic_files import TopicConfigStore
from kafkatier.storage.log.readonly import ReadOnlyPartition
from kafkatier.storage.verify.paths import verify_paths
from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.metadata.manifest import MANIFEST_NAME, object_key
from kafkatier.tiering.metadata.manifest_store import ManifestStore
from kafkatier.tiering.read.restore import restore_topic
from kafkatier.tiering.sidecar.tierer import Tierer
from kafkatier.tiering.store.s3store import S3Store

DELETE_FAULTS = ["500", "reset-down:20", "503", "reset-up:30"]
MANIFEST_FAULTS = ["reset-down:20", "500"]



class _FaultyStore(S3Store):
    """Each delete and manifest write goes out on a fresh connection that gets the next fault;
    before a delete, the key is checked against the manifest as it stands (``direct``)."""

    proxy: FaultProxy
    direct: S3Store
    deletes = iter(DELETE_FAULTS)
    puts = iter(MANIFEST_FAULTS)
    deleted: list[str]

    def _next_request_fails(self, fault: str | None) -> None:
        if fault is None:
            return
        self.proxy.inject(fault)
        self.proxy.outage("ok")  # resets the pooled connections: the next one takes `fault`
        self.proxy.recover()

    def delete(self, key: str) -> None:
        rp = only(self.direct, *TP)
        manifest, _ = ManifestStore(self.direct).load(rp)
        named = {object_key(rp, s, k) for s in manifest.finished() for k in s.files}
        assert key not in named, key
        self._next_request_fails(next(self.deletes, None))
        super().delete(key)
        self.deleted.append(key)

    def put_bytes(self, key: str, data: bytes, **kw: object) -> str:
        if key.endswith(MANIFEST_NAME):
            self._next_request_fails(next(self.puts, None))
        return super().put_bytes(key, data, **kw)  # type: ignore[arg-type]


def test_remote_retention_through_faults_converges(tmp_path: Path, s3_env, s3_url,
                                                   proxy: FaultProxy) -> None:
    logs = write_tiered(tmp_path / "logs", steps=60, overrides={"retention.bytes": "-1"})
    with ReadOnlyPartition(logs, *TP) as part:
        sizes = [(s.base_offset, s.size) for s in part.segments]
    direct = S3Store(s3_url, endpoint_url=s3_env.endpoint, region="us-east-1")
    config = TieringConfig(log_dirs=(logs,), remote_url=s3_url, orphan_grace_ms=0, threads=1)
    assert Tierer(config, direct).run_once().failures == 0
    expected = sizes[3][0]  # Kafka's rule: three segments over the limit
    TopicConfigStore(logs).update(
        "tiered", {"retention.bytes": str(sum(size for _, size in sizes[3:]))}, "test")
    faulty = _FaultyStore(s3_url, endpoint_url=proxy.endpoint, region="us-east-1",
                          max_attempts=8, read_timeout=2, connect_timeout=2)
    faulty.proxy, faulty.direct, faulty.deleted = proxy, direct, []
    result = Tierer(config, faulty).run_once()
    assert result.failures == 0, [p.error for p in result.partitions]
    assert result.total("remote_segments_expired") == 3
    assert len(faulty.deleted) >= 3 * 4  # log, index, timeindex, snapshot (txnindex maybe)
    assert not proxy.faults  # every injected fault was met, and retried past
    assert {"500", "503", "reset-down:20", "reset-up:30"} <= set(proxy.seen)
    _named_objects_exist(direct)
    _converged(direct, logs, expected)
    restored = restore_topic(direct, "tiered", tmp_path / "restored")
    assert restored[0].log_start_offset == expected
    assert verify_paths([tmp_path / "restored"]) == []
