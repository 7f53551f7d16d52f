"""Kafka 3.9's tiered-storage switches (KIP-950) on a real sidecar pass over a file store:
``remote.log.copy.disable`` keeps the remote copy read-only (no upload, local retention by the
total ``retention.*``, uploaded or not) and turning ``remote.storage.enable`` off is refused
unless ``remote.log.delete.on.disable`` says to delete the remote data, as Kafka refuses it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from tier_fixtures import append_more, only, write_tiered

from kafkatier.storage.config.topic_files import TopicConfigStore
from kafkatier.storage.errors import ConfigError
from kafkatier.storage.log.readonly import ReadOnlyPartition, checkpointed_log_starts
from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.crash import ENV
from kafkatier.tiering.metadata.manifest_copy import COPY_NAME
from kafkatier.tiering.metadata.manifest_store import ManifestStore
from kafkatier.tiering.sidecar.tierer import PassResult, Tierer
from kafkatier.tiering.store.object_store import FsspecStore, ObjectStore

TP = ("tiered", 0)
TURN_OFF = {"remote.storage.enable": "false", "remote.log.delete.on.disable": "true"}
KEEP_REMOTE = {"retention.bytes": "-1", "retention.ms": "-1", "local.retention.bytes": "6000"}


def tierer(logs: Path, store: ObjectStore) -> Tierer:
    config = TieringConfig(log_dirs=(logs,), remote_url=getattr(store, "url", ""),
                           orphan_grace_ms=0, threads=1)  # fmt: skip
    return Tierer(config, store)


def tier(logs: Path, store: ObjectStore, sidecar: Tierer | None = None) -> PassResult:
    result = (sidecar or tierer(logs, store)).run_once()
    assert result.failures == 0, [p.error for p in result.partitions]
    return result


def local_segments(logs: Path) -> list[tuple[int, int]]:
    """(base offset, size) of each local segment, from the log start readers use."""
    with ReadOnlyPartition(logs, *TP, checkpointed_log_starts(logs).get(TP, 0)) as part:
        return [(s.base_offset, s.size) for s in part.segments]


def test_copy_disabled_uploads_nothing_and_local_goes_by_total_retention(tmp_path: Path) -> None:
    logs = write_tiered(tmp_path / "logs", steps=60, overrides=KEEP_REMOTE)
    store = FsspecStore(f"file://{tmp_path / 'remote'}")
    assert tier(logs, store).total("uploaded_segments") > 0
    manifest, _ = ManifestStore(store).load(only(store, *TP))
    highest = manifest.highest_offset
    TopicConfigStore(logs).update("tiered", {"remote.log.copy.disable": "true"}, "test")
    append_more(logs, "tiered", 0, steps=40, start=60)
    before = local_segments(logs)
    assert len(before) > 4
    # retention.bytes=-1: nothing local goes though local.retention.bytes=6000 is exceeded,
    # and the remote copy stays as it was: read-only
    result = tier(logs, store)
    assert result.total("uploaded_segments") == 0
    assert result.total("local_segments_deleted") == 0
    assert local_segments(logs) == before
    assert ManifestStore(store).load(only(store, *TP))[0] == manifest
    # the total retention.bytes now rules the local log, whether a segment was uploaded or not
    gone = 1 + next(i for i, (base, _) in enumerate(before) if base > highest)
    assert gone < len(before) - 1  # one never uploaded among those to go; the active stays
    limit = sum(size for _, size in before[gone:])
    TopicConfigStore(logs).update("tiered", {"retention.bytes": str(limit)}, "test")
    result = tier(logs, store)
    assert result.total("uploaded_segments") == 0
    assert result.total("local_segments_deleted") == gone
    assert local_segments(logs) == before[gone:]  # never uploaded, gone: a gap after the copy
    # the remote copy counts toward retention.bytes with the local log and is older: Kafka's
    # remote expiry (RLMExpirationTask) takes it first, whole here
    after, _ = ManifestStore(store).load(only(store, *TP))
    assert not after.segments and after.log_start_offset == highest + 1


def test_turning_remote_storage_off_needs_delete_on_disable(tmp_path: Path) -> None:
    logs = write_tiered(tmp_path / "logs", steps=4)
    topics = TopicConfigStore(logs)
    with pytest.raises(ConfigError, match=r"remote\.log\.delete\.on\.disable=true") as caught:
        topics.update("tiered", {"remote.storage.enable": "false"}, "--config")
    assert "remote.log.copy.disable=true" in str(caught.value)
    assert topics.get("tiered").remote_storage_enable  # nothing saved
    read_only = topics.update("tiered", {"remote.log.copy.disable": "true"}, "--config")
    assert read_only.remote_storage_enable and read_only.remote_log_copy_disable
    off = topics.update("tiered", {"remote.storage.enable": "false",
                                   "remote.log.delete.on.disable": "true"}, "--config")  # fmt: skip
    assert not off.remote_storage_enable and topics.get("tiered").remote_log_delete_on_disable
    again = topics.update("tiered", {"retention.ms": "1000"}, "--config")  # off stays allowed
    assert not again.remote_storage_enable


def test_turned_off_with_delete_on_disable_the_sidecar_deletes_the_remote_data(
    tmp_path: Path,
) -> None:
    """Kafka's RemoteLogManager deletes a partition's remote segments and their metadata when
    remote storage is turned off with remote.log.delete.on.disable=true; the local log (and
    its start) is what is left, and later passes send nothing for it."""
    logs = write_tiered(tmp_path / "logs", steps=60, overrides=KEEP_REMOTE)
    store = FsspecStore(f"file://{tmp_path / 'remote'}")
    assert tier(logs, store).total("uploaded_segments") > 0
    rp = only(store, *TP)
    manifest, _ = ManifestStore(store).load(rp)
    local_before = local_segments(logs)
    copy = logs / "tiered-0" / COPY_NAME
    assert copy.stat().st_size > 0
    TopicConfigStore(logs).update("tiered", TURN_OFF, "test")
    sidecar = tierer(logs, store)
    result = tier(logs, store, sidecar)
    assert result.total("remote_segments_expired") == len(manifest.segments) > 0
    assert list(store.list(rp.prefix)) == []  # every object and the manifest
    assert not copy.exists() or copy.stat().st_size == 0
    assert local_segments(logs) == local_before
    again = tier(logs, store, sidecar)  # the same sidecar's next pass: nothing to ask
    assert again.total("remote_segments_expired") == 0 and sum(again.requests.values()) == 0
    assert tier(logs, store).total("remote_segments_expired") == 0  # a new one: no error
    never = write_tiered(tmp_path / "never", overrides={"remote.storage.enable": "false",
                                                        "remote.log.delete.on.disable": "true"})
    assert tier(never, store).total("remote_segments_expired") == 0  # nothing remote: no error


@pytest.mark.parametrize("crash", ["mid-delete:2", "stale-segments-deleted",
                                   "disabled-remote-deleted"])
def test_a_sidecar_killed_while_deleting_a_disabled_partition_finishes_next_run(
    tmp_path: Path, crash: str
) -> None:
    """SIGKILL among the segments' deletions, before the manifest's, and after it (the
    partition's manifest copy was emptied first: a manifest gone that its copy still named
    would stop the partition as a lost manifest); the next run deletes the rest, no error."""
    logs = write_tiered(tmp_path / "logs", steps=60, overrides=KEEP_REMOTE)
    store = FsspecStore(f"file://{tmp_path / 'remote'}")
    tier(logs, store)
    rp = only(store, *TP)
    TopicConfigStore(logs).update("tiered", TURN_OFF, "test")
    conf = tmp_path / "sidecar.properties"
    conf.write_text(f"log.dirs={logs}\nremote.storage.url={store.url}\n")
    command = [sys.executable, "-m", "kafkatier.cli.main", "sidecar", "--config", str(conf),
               "--once"]  # fmt: skip
    killed = subprocess.run(command, env={**os.environ, ENV: crash}, capture_output=True,
                            text=True, timeout=120)  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    again = subprocess.run(command, env={k: v for k, v in os.environ.items() if k != ENV},
                           capture_output=True, text=True, timeout=120)  # fmt: skip
    assert again.returncode == 0, again.stderr[-2000:]
    assert list(store.list(rp.prefix)) == []
