"""Remote compaction against the real S3 server (SeaweedFS): a random keyed workload appended
locally, uploaded, locally retained and compacted in the remote store must equal, batch for batch,
record for record and offset for offset, what the local cleaner makes of a copy of the same log
at the same time; the restore verifies clean, and a remote read shows the same."""

from __future__ import annotations

import logging
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from compaction_support import (
    Workload,
    batch_rows,
    dir_batches,
)
from tier_fixtures import only

from kafkatier.storage.cleaner.compact import compact_log
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.verify.paths import verify_paths
from kafkatier.tiering.cleaner.compaction import RemoteCompactionResult, compact_remote
from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.errors import ObjectNotFoundError
from kafkatier.tiering.metadata.local import LocalPartition
from kafkatier.tiering.metadata.manifest import MANIFEST_NAME, object_key
from kafkatier.tiering.metadata.manifest_store import ManifestStore
from kafkatier.tiering.read.remote_reader import RemoteLogReader
from kafkatier.tiering.read.restore import restore_partition
from kafkatier.tiering.sidecar.tierer import Tierer
from kafkatier.tiering.store.s3store import S3Store

TOPIC = "kv"
T0 = int(time.time() * 1000) - 3_600_000


def settings(segment_bytes: int, local_keep: int, **extra: str) -> dict[str, str]:
    return {"cleanup.policy": "compact", "remote.storage.enable": "true",
            "segment.bytes": str(segment_bytes), "index.interval.bytes": "200",
            "local.retention.bytes": str(local_keep), "retention.bytes": "-1", **extra}


def append(path: Path, work: Workload, steps: int, start: int, config: dict[str, str]) -> None:
    with LogDirectory(path) as log_dir:
        write(log_dir, work, steps, start, config)


def write(log_dir: LogDirectory, work: Workload, steps: int, start: int,
          config: dict[str, str]) -> None:  # fmt: skip
    """Appends and a roll by a writer that stays open (as beside the sidecar), flushed so the
    recovery point lets every closed segment be uploaded."""
    log_dir.topic_configs.update(TOPIC, config, "test")
    log = log_dir.get_or_create(TOPIC, 0)
    for i in range(steps):
        work.step(log, T0 + start + i)
    work.close_all(log, T0 + start + steps)
    log.roll()
    log_dir.flush()


def tier(logs: Path, store: S3Store) -> None:
    config = TieringConfig(log_dirs=(logs,), remote_url=store.url, orphan_grace_ms=0, threads=1)
    tierer = Tierer(config, store)
    tierer.remote_compaction = False
    result = tierer.run_once()
    assert result.failures == 0, result


def compact_both(logs: Path, copy: Path, store: S3Store, now: int) -> RemoteCompactionResult:
    with LocalPartition(logs, TOPIC, 0) as part:
        done = compact_remote(store, part.remote, config=part.config, local=part, now_ms=now,
                              owner="t")  # fmt: skip
    with LogDirectory(copy) as log_dir:
        log = log_dir.get_or_create(TOPIC, 0)
        checkpoint = _checkpoints.get(copy)
        result = compact_log(log, now_ms=now, first_dirty_offset=checkpoint)
        if result.cleaned:
            _checkpoints[copy] = result.end_offset
        assert (done.cleaned, done.passes) == (result.cleaned, result.passes)
    return done


_checkpoints: dict[Path, int] = {}


def local_start(logs: Path) -> int:
    with LocalPartition(logs, TOPIC, 0) as part:
        return part.segments[0].base_offset


def assert_no_orphans(store: S3Store) -> None:
    rp = only(store, TOPIC, 0)
    manifest, _ = ManifestStore(store).load(rp)
    named = set()
    for seg in manifest.segments:
        assert seg.finished, seg
        named |= {object_key(rp, seg, kind) for kind in seg.files}
    listed = {i.key for i in store.list(rp.prefix) if not i.key.endswith(MANIFEST_NAME)}
    assert listed == named


def check(tmp_path: Path, store: S3Store, copy: Path, upto: int) -> list[tuple[object, ...]]:
    """Restore and remote read of [0, upto) equal the locally compacted copy there."""
    target = tmp_path / f"restored-{time.monotonic_ns()}"
    restore_partition(store, TOPIC, 0, target)
    assert verify_paths([target / f"{TOPIC}-0"]) == []
    restored = [r for r in batch_rows(dir_batches(target / f"{TOPIC}-0")) if r[1] < upto]
    expected = [r for r in batch_rows(dir_batches(copy / f"{TOPIC}-0")) if r[1] < upto]
    assert restored == expected
    remote = [r for r in batch_rows(RemoteLogReader(store, only(store, TOPIC, 0)).batches_from(0))
              if r[1] < upto]  # fmt: skip
    assert remote == expected
    assert_no_orphans(store)
    return expected


@pytest.mark.parametrize(("seed", "segment_bytes", "ratio", "budget", "passes"), [
    (1, 3000, "0.01", 1 << 20, 1),
    (3, 4000, "0.01", 24 * 16, 2),  # a small key map: several passes
])
def test_remote_only_log_matches_local_compaction(tmp_path, s3_store, seed, segment_bytes, ratio,
                                                  budget, passes):  # fmt: skip
    logs, copy = tmp_path / "logs", tmp_path / "copy"
    config = settings(segment_bytes, 0, **{"delete.retention.ms": "2000",
                                          "min.cleanable.dirty.ratio": ratio,
                                          "log.cleaner.dedupe.buffer.size": str(budget)})
    live, twin = Workload(seed), Workload(seed)
    with LogDirectory(logs) as writer:
        write(writer, live, 150, 0, config)
        append(copy, twin, 150, 0, config)
        tier(logs, store=s3_store)
        now = T0 + 10_000
        assert compact_both(logs, copy, s3_store, now).passes >= passes
        before = check(tmp_path, s3_store, copy, local_start(logs))
        assert any(len(r[6]) < r[1] - r[0] + 1 for r in before)  # something was removed
        write(writer, live, 80, 1000, config)  # more updates; then past the tombstone horizon
        append(copy, twin, 80, 1000, config)
        tier(logs, store=s3_store)
        compact_both(logs, copy, s3_store, now + 60_000)
        upto = local_start(logs)
        check(tmp_path, s3_store, copy, upto)
    manifest, _ = ManifestStore(s3_store).load(only(s3_store, TOPIC, 0))
    assert manifest.cleaner_checkpoint is not None and manifest.cleaner_checkpoint <= upto


def test_local_records_remove_remote_ones(tmp_path, s3_store):
    """Segments still local (cleanable, not yet remote-only) feed the key map: their keys
    remove older remote records, as Kafka's cleaner over the whole log would."""
    logs, copy = tmp_path / "logs", tmp_path / "copy"
    config = settings(3000, 6000, **{"min.cleanable.dirty.ratio": "0.01"})
    live, twin = Workload(7, keys=12), Workload(7, keys=12)
    append(logs, live, 250, 0, config)
    append(copy, twin, 250, 0, config)
    tier(logs, store=s3_store)
    start = local_start(logs)
    with LocalPartition(logs, TOPIC, 0) as part:
        assert len(part.segments) > 2  # cleanable local segments exist
    original = {r[0]: r for r in batch_rows(dir_batches(copy / f"{TOPIC}-0"))}
    compact_both(logs, copy, s3_store, T0 + 10_000)
    check(tmp_path, s3_store, copy, start)
    # the last remote-only batch's records whose key reappears only locally are gone
    local_keys = {rec[2] for row in batch_rows(dir_batches(logs / f"{TOPIC}-0"))
                  for rec in row[6]}  # fmt: skip
    reader = RemoteLogReader(s3_store, only(s3_store, TOPIC, 0))
    kept = {rec[0] for row in batch_rows(reader.batches_from(0)) for rec in row[6]}
    removed_for_local = [rec for row in original.values() if row[1] < start for rec in row[6]
                         if rec[2] in local_keys and rec[0] not in kept]  # fmt: skip
    assert removed_for_local


def test_an_idle_topic_is_not_compacted_again(tmp_path, s3_store):
    """Segments kept locally are dirty for the remote copy (the checkpoint stops where the
    remote-only segments end), so they kept the dirty ratio up: every pass of an idle topic
    rewrote the same remote segments to the same records. Now a cleaning with nothing new (no
    record past the last map, no segment become remote-only) is skipped, and new records make
    the next one due again."""
    logs = tmp_path / "logs"
    config = settings(3000, 6000, **{"min.cleanable.dirty.ratio": "0.01"})
    live = Workload(7, keys=12)
    append(logs, live, 250, 0, config)
    tier(logs, store=s3_store)

    def compact(now: int) -> tuple[RemoteCompactionResult, str | None]:
        with LocalPartition(logs, TOPIC, 0) as part:
            done = compact_remote(s3_store, part.remote, config=part.config, local=part,
                                  now_ms=now, owner="t")  # fmt: skip
            return done, ManifestStore(s3_store).load(part.remote)[1]

    first, etag = compact(T0 + 10_000)
    assert first.cleaned
    again, etag_again = compact(T0 + 20_000)
    assert not again.cleaned and etag_again == etag  # not a request that writes
    append(logs, live, 40, 250, config)
    assert compact(T0 + 30_000)[0].cleaned


def test_sidecar_pass_compacts_on_schedule(tmp_path, s3_store):
    logs = tmp_path / "logs"
    config = settings(1500, 0, **{"min.cleanable.dirty.ratio": "0.5"})
    append(logs, Workload(11, keys=8), 150, 0, config)
    config_obj = TieringConfig(log_dirs=(logs,), remote_url=s3_store.url, orphan_grace_ms=0)
    tierer = Tierer(config_obj, s3_store)
    tierer.compaction_grace_ms = 0
    first = tierer.run_once().partitions[0]
    assert first.error is None and first.remote_compactions == 1
    assert first.remote_records_removed > 0
    assert first.remote_bytes_after_compaction < first.remote_bytes_before_compaction
    again = tierer.run_once().partitions[0]  # nothing dirty since: the ratio says no
    assert again.error is None and again.remote_compactions == 0
    assert_no_orphans(s3_store)
    target = tmp_path / "restored"
    restore_partition(s3_store, TOPIC, 0, target)
    assert verify_paths([target / f"{TOPIC}-0"]) == []
    shutil.rmtree(target)


@pytest.mark.parametrize("read_bytes", [None, 700])  # 700: batches cut by every ranged GET
def test_partition_only_in_s3_matches_local_compaction(tmp_path, s3_store, read_bytes):
    """No log dir at all (``clean --remote`` for a partition only the store holds): the log ends
    at the remote end, producers come from the last segment's snapshot."""
    logs, copy = tmp_path / "logs", tmp_path / "copy"
    config = settings(3000, 0, **{"min.cleanable.dirty.ratio": "0.01"})
    append(logs, Workload(13, keys=15), 200, 0, config)
    append(copy, Workload(13, keys=15), 200, 0, config)
    tier(logs, s3_store)
    end = local_start(logs)
    with LocalPartition(logs, TOPIC, 0) as part:
        cfg = part.config
        assert [s.size for s in part.segments] == [0]  # nothing but the empty active segment
    shutil.rmtree(logs)
    done = compact_remote(s3_store, only(s3_store, TOPIC, 0), config=cfg, local=None,
                          now_ms=T0 + 10_000, owner="t", read_bytes=read_bytes)  # fmt: skip
    with LogDirectory(copy) as log_dir:
        local = compact_log(log_dir.get_or_create(TOPIC, 0), now_ms=T0 + 10_000,
                            first_dirty_offset=None)  # fmt: skip
    assert (done.cleaned, done.checkpoint, done.records_removed) == (
        True, local.end_offset, local.records_removed)
    check(tmp_path, s3_store, copy, end)


def test_a_reader_holding_the_old_manifest_reads_until_the_grace_ends(tmp_path, s3_store,
                                                                   caplog):
    logs = tmp_path / "logs"
    append(logs, Workload(17, keys=6), 120, 0,
           settings(3000, 0, **{"min.cleanable.dirty.ratio": "0.01"}))  # fmt: skip
    tier(logs, s3_store)
    caplog.set_level(logging.INFO, logger="kafkatier.tiering")
    rp = only(s3_store, TOPIC, 0)
    old_manifest, _ = ManifestStore(s3_store).load(rp)
    old = {s.attempt for s in old_manifest.finished()}
    before = batch_rows(RemoteLogReader(s3_store, rp).batches_from(0))
    with LocalPartition(logs, TOPIC, 0) as part, ThreadPoolExecutor(1) as pool:
        running = pool.submit(compact_remote, s3_store, rp, config=part.config, local=part,
                              now_ms=T0 + 10_000, owner="t", grace_ms=6000)  # fmt: skip
        deadline = time.monotonic() + 60
        while old & {s.attempt for s in ManifestStore(s3_store).load(rp)[0].finished()}:
            assert time.monotonic() < deadline and not running.done()
            time.sleep(0.1)
        # every group swapped: new readers see the new segments, the old reader still works
        stale = RemoteLogReader(s3_store, rp, manifest=old_manifest)
        assert batch_rows(stale.batches_from(0)) == before
        assert batch_rows(RemoteLogReader(s3_store, rp).batches_from(0)) != before
        assert running.result().objects_deleted == len(old)
    with pytest.raises(ObjectNotFoundError):  # after the grace the replaced objects are gone
        list(RemoteLogReader(s3_store, rp, manifest=old_manifest).batches_from(0))
    assert "readers may still hold the old manifest" in caplog.text  # the wait is said
    assert_no_orphans(s3_store)
