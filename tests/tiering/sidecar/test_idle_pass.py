"""What a long-running sidecar's passes cost: an idle pass sends no request and opens no
partition; new data costs what it moves; a stale view of a manifest costs one failed write, never
a lost update; time-based work still happens when its time comes."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from tier_fixtures import append_more, only, write_tiered

from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.metadata.local import LocalPartition
from kafkatier.tiering.metadata.manifest import PartitionManifest
from kafkatier.tiering.metadata.manifest_store import ManifestStore
from kafkatier.tiering.sidecar.quiet import RACY_NS, next_due_ms
from kafkatier.tiering.sidecar.tierer import PassResult, Tierer
from kafkatier.tiering.store.object_store import ObjectStore
from kafkatier.tiering.store.requests import GET, LIST, PUT


def _settled(path: Path) -> Path:
    """Let the time stamps of what was just written age past the racy window (quiet.py)."""
    time.sleep(RACY_NS / 1e9 + 0.1)
    return path


def _tierer(logs: Path, store: ObjectStore) -> Tierer:
    config = TieringConfig(log_dirs=(logs,), remote_url=store.url, orphan_grace_ms=0)
    return Tierer(config, store)


def _first_passes(tierer: Tierer, logs: Path) -> PassResult:
    """The first pass, then the look it costs: the first upload creates each partition's
    manifest copy (manifest_copy.py), a change of its directory, which one more pass (sending
    no request) examines once it has aged past the racy window. Returns the first pass."""
    first = tierer.run_once()
    _settled(logs)
    again = tierer.run_once()
    assert again.requests == {} and again.failures == 0, again.requests
    return first


def _skipped(result: PassResult) -> int:
    return sum(1 for p in result.partitions if p.skipped)


def test_idle_passes_send_no_request_and_open_nothing(tmp_path, store) -> None:
    logs = _settled(write_tiered(tmp_path / "logs", partitions=3, steps=20))
    tierer = _tierer(logs, store)
    first = _first_passes(tierer, logs)
    assert first.total("uploaded_segments") > 0 and first.failures == 0
    assert first.requests.get(PUT, 0) > 0
    for _ in range(2):
        idle = tierer.run_once()
        assert idle.requests == {}, idle.requests
        assert _skipped(idle) == 3 and idle.total("uploaded_segments") == 0
    assert sorted(tierer.statuses) == [("tiered", p) for p in range(3)]
    assert all(s.lag_segments == 0 for s in tierer.statuses.values())


def test_new_data_costs_its_objects_and_the_manifest_writes_only(tmp_path, store) -> None:
    logs = _settled(write_tiered(tmp_path / "logs", partitions=3, steps=20))
    tierer = _tierer(logs, store)
    _first_passes(tierer, logs)
    append_more(logs, "tiered", 1, steps=20, start=500)
    _settled(logs)
    result = tierer.run_once()
    moved = next(p for p in result.partitions if p.partition == 1)
    assert moved.uploaded_segments > 0 and _skipped(result) == 2
    assert GET not in result.requests and LIST not in result.requests, result.requests
    objects = sum(len(s.files) for s in ManifestStore(store).load(only(store, "tiered", 1))[0]
                  .finished()[-moved.uploaded_segments:])  # fmt: skip
    assert result.requests[PUT] == objects + moved.uploaded_segments  # one manifest write each
    assert tierer.run_once().requests == {}


def test_a_stale_cached_manifest_costs_a_failed_write_not_a_lost_update(tmp_path, store) -> None:
    logs = _settled(write_tiered(tmp_path / "logs", partitions=1, steps=20))
    tierer = _tierer(logs, store)
    tierer.run_once()
    rp = only(store, "tiered", 0)

    def other_writer(manifest: PartitionManifest) -> bool:  # e.g. `kafkatier clean --remote`
        manifest.cleaner_checkpoint = 7
        return True

    ManifestStore(store).update(rp, other_writer)
    append_more(logs, "tiered", 0, steps=20, start=500)
    _settled(logs)
    result = tierer.run_once()
    assert result.failures == 0 and result.total("uploaded_segments") > 0
    assert result.requests.get(GET, 0) >= 1  # the reload after the 412
    manifest, _ = ManifestStore(store).load(rp)
    assert manifest.cleaner_checkpoint == 7
    assert manifest.highest_offset == tierer.statuses[("tiered", 0)].remote_end - 1


def test_a_change_of_topic_config_or_checkpoint_ends_the_quiet(tmp_path, store) -> None:
    logs = _settled(write_tiered(tmp_path / "logs", partitions=2, steps=20))
    tierer = _tierer(logs, store)
    _first_passes(tierer, logs)
    assert _skipped(tierer.run_once()) == 2
    config = next(logs.glob("kafkatier-topic.tiered.properties"))
    config.write_text(config.read_text() + "retention.bytes=-1\n")
    assert _skipped(tierer.run_once()) == 0


def test_time_alone_ends_the_quiet_when_retention_comes_due(tmp_path) -> None:
    now = int(time.time() * 1000)
    logs = write_tiered(tmp_path / "logs", partitions=1, steps=20,
                        overrides={"local.retention.ms": str(now)})  # fmt: skip
    with LocalPartition(logs, "tiered", 0) as part:
        closed = part.segments[:-1]
        due = next_due_ms(part, PartitionManifest("tiered", 0), 0, now)
        assert due == min(s.max_timestamp for s in closed) + now + 1


@pytest.mark.parametrize("when", ["fresh", "settled"])
def test_a_partition_written_within_the_racy_window_is_examined_again(tmp_path, when) -> None:
    from kafkatier.tiering.store.object_store import FsspecStore

    store = FsspecStore(f"file://{tmp_path / 'remote'}")
    logs = _settled(write_tiered(tmp_path / "logs", partitions=1, steps=20))
    tierer = _tierer(logs, store)
    _first_passes(tierer, logs)
    if when == "fresh":
        os.utime(logs / "tiered-0")  # modified just now
    tierer.run_once()
    assert _skipped(tierer.run_once()) == (1 if when == "settled" else 0)
