"""The manifest copies kept in partition directories (manifest_copy.py): written by the sidecar
and ``clean --remote`` when they read or commit a manifest, read by ``status`` instead of a
request each; anything unusable counts as no copy, and a failed write drops the copy."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from tier_fixtures import append_more, only, write_tiered

from kafkatier.tiering.cleaner.clean_pass import RemotePass
from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.metadata.manifest import PartitionManifest, manifest_key
from kafkatier.tiering.metadata.manifest_copy import COPY_NAME, ManifestCopies, read_copy
from kafkatier.tiering.metadata.manifest_store import ManifestStore
from kafkatier.tiering.read.restore import restore_partition, restore_topic
from kafkatier.tiering.sidecar.quiet import RACY_NS
from kafkatier.tiering.sidecar.status import collect_status
from kafkatier.tiering.sidecar.tierer import Tierer
from kafkatier.tiering.store.object_store import ObjectStore
from kafkatier.tiering.store.requests import GET

PARTITIONS = 3


def _tiered(tmp_path: Path, store: ObjectStore) -> tuple[Path, TieringConfig, Tierer]:
    logs = write_tiered(tmp_path / "logs", partitions=PARTITIONS, steps=20)
    time.sleep(RACY_NS / 1e9 + 0.1)  # let the writes age past the racy window (quiet.py)
    config = TieringConfig(log_dirs=(logs,), remote_url=store.url, orphan_grace_ms=0)
    tierer = Tierer(config, store)
    assert tierer.run_once().failures == 0
    return logs, config, tierer


def _gets(store: ObjectStore, config: TieringConfig, *, refresh: bool) -> tuple[list, int]:
    before = store.requests.snapshot().get(GET, 0)
    rows = collect_status(config, store, refresh=refresh)
    return rows, store.requests.snapshot().get(GET, 0) - before


def test_status_reads_the_copies_the_sidecar_keeps_and_sends_no_get(tmp_path, store) -> None:
    logs, config, _ = _tiered(tmp_path, store)
    for p in range(PARTITIONS):
        key = manifest_key(only(store, "tiered", p))
        assert read_copy(logs / f"tiered-{p}", key) == store.get_with_etag(key)
    copied, gets = _gets(store, config, refresh=False)
    fresh, refresh_gets = _gets(store, config, refresh=True)
    assert gets == 0 and refresh_gets == PARTITIONS
    assert copied == fresh and all(s.remote_segments > 0 for s in copied)


def test_idle_passes_leave_the_copies_untouched(tmp_path, store) -> None:
    logs, _, tierer = _tiered(tmp_path, store)
    stamps = {p: (logs / f"tiered-{p}" / COPY_NAME).stat().st_mtime_ns for p in range(PARTITIONS)}
    assert tierer.run_once().requests == {}
    assert stamps == {p: (logs / f"tiered-{p}" / COPY_NAME).stat().st_mtime_ns
                      for p in range(PARTITIONS)}  # fmt: skip


def test_a_write_elsewhere_shows_with_refresh_and_after_the_next_pass(tmp_path, store) -> None:
    """A writer that keeps no copies (another machine) leaves the copy behind the store until
    ``--refresh``, or a pass of this machine that reads the manifest again."""
    config = _tiered(tmp_path, store)[1]
    rp = only(store, "tiered", 1)

    def move_start(manifest: PartitionManifest) -> bool:
        manifest.log_start_offset = manifest.finished()[0].end_offset + 1
        return True

    ManifestStore(store).update(rp, move_start)
    before = {s.partition: s for s in collect_status(config, store)}
    after = {s.partition: s for s in collect_status(config, store, refresh=True)}
    assert before[1].remote_start != after[1].remote_start  # the copy, until refreshed
    assert before[0] == after[0]
    RemotePass(config, store).run()  # `clean --remote` reads every manifest anew
    assert collect_status(config, store) == collect_status(config, store, refresh=True)


def test_a_failed_conditional_write_drops_the_copy_then_the_reload_restores_it(
    tmp_path, store
) -> None:
    logs, config, tierer = _tiered(tmp_path, store)
    rp = only(store, "tiered", 0)
    ManifestStore(store).update(rp, lambda m: setattr(m, "cleaner_checkpoint", 7) or True)
    append_more(logs, "tiered", 0, steps=20, start=500)
    time.sleep(RACY_NS / 1e9 + 0.1)
    assert tierer.run_once().failures == 0  # a 412, a reload, the upload
    key = manifest_key(rp)
    assert read_copy(logs / "tiered-0", key) == store.get_with_etag(key)
    assert collect_status(config, store) == collect_status(config, store, refresh=True)


def test_a_restore_keeps_the_copy_of_each_partition_it_restores(tmp_path, store) -> None:
    """``status`` right after a restore sends no request for the restored partitions."""
    config = _tiered(tmp_path, store)[1]
    target = tmp_path / "restored"
    restore_topic(store, "tiered", target, partitions=[0, 1])
    restore_partition(store, "tiered", 2, target)
    for p in range(PARTITIONS):
        key = manifest_key(only(store, "tiered", p))
        assert read_copy(target / f"tiered-{p}", key) == store.get_with_etag(key)
    restored = TieringConfig(log_dirs=(target,), remote_url=config.remote_url)
    rows, gets = _gets(store, restored, refresh=False)
    assert gets == 0 and rows == collect_status(restored, store, refresh=True)


@pytest.mark.parametrize("damage", ["cut", "garbage", "other topic id", "empty"])
def test_an_unusable_copy_counts_as_none(tmp_path, damage) -> None:
    from kafkatier.tiering.store.object_store import FsspecStore

    store = FsspecStore(f"file://{tmp_path / 'remote'}")
    logs, config, _ = _tiered(tmp_path, store)
    path = logs / "tiered-2" / COPY_NAME
    raw = path.read_bytes()
    path.write_bytes({
        "cut": raw[:-10],
        "garbage": b"\x00\xff" * 40,
        "other topic id": raw.replace(b"tiered-", b"tiered-x", 1),
        "empty": b"",
    }[damage])
    rows, gets = _gets(store, config, refresh=False)
    assert gets == 1  # that partition's manifest, from the store
    assert rows == collect_status(config, store, refresh=True)


def test_copies_go_only_to_the_partition_of_the_same_topic_id(tmp_path) -> None:
    logs = write_tiered(tmp_path / "logs", partitions=1, steps=5)
    copies = ManifestCopies((logs,))
    copies.record("tiered-AAAAAAAAAAAAAAAAAAAAAA/0/manifest.json", b"{}", '"e"')
    copies.record("tiered-0/manifest.json", b"{}", '"e"')  # the layout before topic ids
    assert not (logs / "tiered-0" / COPY_NAME).exists()
    assert [p.name for p in (logs / "tiered-0").iterdir() if "manifest" in p.name] == []
