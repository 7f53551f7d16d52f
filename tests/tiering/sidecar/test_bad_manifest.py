"""Local retention never deletes local data on the strength of a bad manifest or a bad remote
copy: a manifest that does not parse, or one naming a ``.log`` object that is missing or differs
from what it recorded (size, entity tag), fails the partition's pass naming the object, and every
local segment stays. With the remote copy sound again, the next pass deletes as configured."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from tier_fixtures import only, write_tiered

from kafkatier.storage.config.topic_files import TopicConfigStore
from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.metadata.manifest import manifest_key, object_key
from kafkatier.tiering.metadata.manifest_store import ManifestStore
from kafkatier.tiering.sidecar.tierer import Tierer
from kafkatier.tiering.store.object_store import FsspecStore, ObjectStore


def _first_log_key(store: ObjectStore) -> str:
    rp = only(store, "tiered", 0)
    manifest, _ = ManifestStore(store).load(rp)
    return object_key(rp, manifest.finished()[0], "log")


BAD: dict[str, Callable[[ObjectStore], str]] = {}  # the fault: damage the store, return the key


def _bad(name: str) -> Callable[[Callable[[ObjectStore], str]], Callable[[ObjectStore], str]]:
    def register(fault: Callable[[ObjectStore], str]) -> Callable[[ObjectStore], str]:
        BAD[name] = fault
        return fault

    return register


@_bad("manifest does not parse")
def _garbage_manifest(store: ObjectStore) -> str:
    key = manifest_key(only(store, "tiered", 0))
    store.put_bytes(key, b'{"version": 1, "segments": [')
    return key


@_bad("segment object missing")
def _missing_object(store: ObjectStore) -> str:
    key = _first_log_key(store)
    store.delete(key)
    return key


@_bad("segment object replaced")
def _replaced_object(store: ObjectStore) -> str:
    key = _first_log_key(store)
    store.put_bytes(key, store.get_bytes(key)[:-100])
    return key


def _local_logs(logs: Path) -> list[str]:
    return sorted(p.name for p in (logs / "tiered-0").glob("*.log"))


@pytest.mark.parametrize("fault", sorted(BAD))
def test_local_segments_stay_when_the_remote_side_is_bad(tmp_path: Path, fault: str) -> None:
    logs = write_tiered(tmp_path / "logs")
    store = FsspecStore(f"file://{tmp_path / 'remote'}")
    config = TieringConfig(log_dirs=(logs,), remote_url=store.url, threads=1)
    assert Tierer(config, store).run_once().failures == 0  # uploaded, all local data kept
    before = _local_logs(logs)
    assert len(before) > 2
    key = BAD[fault](store)
    TopicConfigStore(logs).update("tiered", {"local.retention.bytes": "1"}, source="test")
    result = Tierer(config, store).run_once()
    assert result.failures == 1
    error = result.partitions[0].error or ""
    assert key in error, error
    assert _local_logs(logs) == before

