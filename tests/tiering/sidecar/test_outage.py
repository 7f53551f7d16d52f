"""The long-running sidecar and a store outage in its first pass: a store that answered (its
manifests were read) and then went down mid-upload is waited out, pass after pass, as an
outage in a later pass is; only a store never reached (a setting to fix) ends the sidecar."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from tier_fixtures import only, write_tiered

from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.errors import RemoteStoreError
from kafkatier.tiering.metadata.manifest_store import ManifestStore
from kafkatier.tiering.sidecar.loop import Sidecar
from kafkatier.tiering.sidecar.tierer import PassResult
from kafkatier.tiering.store.object_store import FsspecStore


class _Flaky(FsspecStore):
    """A store whose segment uploads fail while ``down`` (reads of manifests still answer),
    and whose every request fails while ``dead``."""

    down = False
    dead = False

    def put_file(self, key: str, path: Path, **kwargs: Any) -> Any:
        if self.down or self.dead:
            raise RemoteStoreError(f"cannot reach the store: {key}", key=key)
        return super().put_file(key, path, **kwargs)

    def get_with_etag(self, key: str) -> tuple[bytes, str] | None:
        if self.dead:
            raise RemoteStoreError(f"cannot reach the store: {key}", key=key)
        return super().get_with_etag(key)


def _sidecar(tmp_path: Path) -> tuple[Sidecar, _Flaky]:
    logs = write_tiered(tmp_path / "logs")
    store = _Flaky(f"file://{tmp_path / 'remote'}")
    config = TieringConfig(log_dirs=(logs,), remote_url=store.url, threads=1, interval_ms=50)
    return Sidecar(config, store), store


def test_an_outage_in_the_first_pass_is_waited_out(tmp_path: Path) -> None:
    sidecar, store = _sidecar(tmp_path)
    store.down = True
    passes: list[PassResult] = []
    errors: list[BaseException] = []

    def on_pass(result: PassResult) -> None:
        passes.append(result)
        sidecar.stop()

    def run() -> None:
        try:
            sidecar.run(on_pass=on_pass)
        except BaseException as exc:  # the bug: the first pass's outage ended the sidecar
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    for _ in range(200):
        if sidecar.metrics.counters["kafkatier_tier_upload_failures_total"] >= 2 or errors:
            break
        thread.join(0.05)
    store.down = False  # the store is back
    thread.join(60)
    assert not thread.is_alive() and errors == []
    assert passes and passes[0].failures == 0
    manifest, _ = ManifestStore(store).load(only(store, "tiered", 0))
    assert manifest.finished()


def test_a_store_never_reached_ends_the_sidecar(tmp_path: Path) -> None:
    sidecar, store = _sidecar(tmp_path)
    store.dead = True
    with pytest.raises(RemoteStoreError, match="cannot reach"):
        sidecar.run()
