"""Key compaction of a partition's tiered copy, with the local cleaner's own code.

Kafka's tiered storage refuses compacted topics; kafkatier compacts the segments that exist only
in the object store. One call (:func:`compact_remote`) is one cleaning, as ``storage.cleaner
.compact_log`` is locally, over the whole log (:mod:`remote_view`: remote-only segments, then
the local ones):

* whether to clean and from where: ``storage.cleaner.choose`` over the combined log, with the remote
  cleaner checkpoint kept in the manifest (``cleaner_checkpoint``), so passes are incremental
  and the dirty ratio, ``min/max.compaction.lag.ms`` and the last stable offset apply as locally;
* the offset map: ``storage.cleaner.build_map.build_offset_map`` over the dirty section, remote and
local records alike (a key overwritten locally is removed remotely too);
* the rewrite: ``cleaner.group_segments`` and ``cleaner._clean_group`` (the filter, delete
  horizon and ``delete.retention.ms``, transactions, the active producers' last batches) over
  the remote-only segments with offsets the map covers, group by group, each group uploaded and
  swapped in by one conditional manifest update (:mod:`remote_swap`); local segments are the
  writer's and are never rewritten;
* more passes while the map budget needs them, as ``compact_log``; then the checkpoint (never
  past the remote-only part: what is local now is dirty for the remote copy once uploaded) and,
  after ``grace_ms`` for readers still holding the old manifest, the replaced objects go.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass
from pathlib import Path

from kafkatier.storage.cleaner.build_map import build_offset_map
from kafkatier.storage.cleaner.choose import LogToClean
from kafkatier.storage.cleaner.compact import (
    MAX_DEDUPE_BUFFER,
    MAX_PASSES,
    _clean_group,
    _Round,
    group_segments,
)
from kafkatier.storage.cleaner.filter import FilterStats
from kafkatier.storage.cleaner.kernels.offset_map import MURMUR3, OffsetMap
from kafkatier.storage.cleaner.txn import CleanedTransactionMetadata
from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.producer.snapshot import list_snapshot_files
from kafkatier.storage.scratch import new_scratch
from kafkatier.tiering.cleaner.segment_store import RemoteSegmentStore
from kafkatier.tiering.cleaner.swap import GroupReplacer
from kafkatier.tiering.cleaner.view import CombinedLog, active_producers, choose
from kafkatier.tiering.metadata.identity import RemotePartition
from kafkatier.tiering.metadata.local import LocalPartition
from kafkatier.tiering.metadata.manifest import PartitionManifest, RemoteSegment, object_key
from kafkatier.tiering.metadata.manifest_store import ManifestCache, ManifestStore
from kafkatier.tiering.store.object_store import ObjectStore

log = logging.getLogger("kafkatier.tiering")
REMOTE_READ_BYTES = 4 << 20
"""Bytes per ranged GET of a segment (at least; ``log.cleaner.io.buffer.size`` / 2 when larger):
a request to an object store costs milliseconds, so reads are larger than local ones."""


@dataclass
class RemoteCompactionResult:
    """What one :func:`compact_remote` did to one partition's remote copy."""

    cleaned: bool = False
    checkpoint: int | None = None
    dirty_ratio: float = 0.0
    passes: int = 0
    records_read: int = 0
    records_removed: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    segments_before: int = 0
    segments_after: int = 0
    objects_deleted: int = 0
    """Replaced attempts whose objects were removed (after the grace)."""


@dataclass
class _Partition:
    """The inputs of one compaction, read once."""

    store: ObjectStore
    rp: RemotePartition
    config: LogConfig
    manifest: PartitionManifest
    remote: list[RemoteSegment]
    local: LocalPartition | None
    now_ms: int
    cache: ManifestCache | None = None


def remote_only(manifest: PartitionManifest, local: LocalPartition | None) -> list[RemoteSegment]:
    """The contiguous FINISHED segments wholly below the local log start (all without one)."""
    start = local.segments[0].base_offset if local is not None and local.segments else None
    return [s for s in manifest.contiguous() if start is None or s.end_offset < start]


def _view(part: _Partition, store: RemoteSegmentStore) -> CombinedLog:
    local = part.local.segments if part.local is not None else []
    remote_end = store.remote[-1].remote.end_offset + 1
    start = max(part.manifest.log_start_offset, store.remote[0].base_offset)
    leo = part.local.log_end_offset() if part.local is not None and local else remote_end
    lso = part.local.last_stable_offset() if part.local is not None and local else remote_end
    return CombinedLog(store.remote, local, config=part.config, log_start_offset=start,
                       last_stable_offset=lso, log_end_offset=leo)  # fmt: skip


def _producers(part: _Partition, view: CombinedLog) -> dict[int, tuple[int | None, int]]:
    snapshots: list[tuple[int, bytes]] = []
    last = part.remote[-1]
    if "snapshot" in last.files:
        key = object_key(part.rp, last, "snapshot")
        snapshots.append((last.end_offset + 1, part.store.get_bytes(key)))
    local = part.local.segments if part.local is not None else []
    if part.local is not None and local:
        found = list_snapshot_files(part.local.directory)
        if found:
            newest = max(found, key=lambda f: f.offset)
            snapshots.append((newest.offset, newest.path.read_bytes()))
    return active_producers(snapshots, local, config=part.config, now_ms=part.now_ms,
                            log_start_offset=view.log_start_offset,
                            log_end_offset=view.log_end_offset)  # fmt: skip


def _remote_pass(rnd: _Round, ltc: LogToClean, store: RemoteSegmentStore) -> int:
    """``cleaner._clean_pass`` with the rewrite limited to the remote-only segments."""
    build_offset_map(store, rnd.offset_map, ltc.first_dirty, ltc.first_uncleanable)
    end = rnd.offset_map.latest_offset + 1
    infos = store.segment_infos()[: len(store.remote)]
    to_clean = [info for info in infos if info.base_offset < end]
    remote_end = store.remote[-1].remote.end_offset + 1
    cfg = rnd.config
    txn = CleanedTransactionMetadata()
    for group in group_segments(to_clean, cfg.segment_bytes, cfg.segment_index_bytes,
                                min(ltc.first_uncleanable, remote_end)):  # fmt: skip
        _clean_group(rnd, group, txn)
    return end


def _clean(part: _Partition, store: RemoteSegmentStore, result: RemoteCompactionResult) -> int:
    """The passes of ``compact_log``; returns the end offset (the new checkpoint)."""
    view = _view(part, store)
    ltc = choose(view, part.manifest.cleaner_checkpoint, part.now_ms)
    result.dirty_ratio = ltc.cleanable_ratio
    end = ltc.first_dirty
    if not ltc.eligible or _cleaned_already(part.manifest, ltc, store):
        return end
    cfg = part.config
    offset_map = OffsetMap(min(cfg.dedupe_buffer_size, MAX_DEDUPE_BUFFER),
                           cfg.dedupe_buffer_load_factor, MURMUR3)  # fmt: skip
    stats = FilterStats()
    producers = _producers(part, view)
    while ltc.eligible and result.passes < MAX_PASSES:
        rnd = _Round(store, offset_map, part.now_ms, cfg, producers, ltc.first_uncleanable,
                     stats, store.io_buffer_size)  # fmt: skip
        new_end = _remote_pass(rnd, ltc, store)
        result.passes += 1
        result.cleaned = True
        if new_end <= end:
            break
        end = new_end
        ltc = choose(_view(part, store), end, part.now_ms)
    result.records_read = stats.records_read
    result.records_removed = stats.records_read - stats.records_retained
    return end


def _cleaned_already(
    manifest: PartitionManifest, ltc: LogToClean, store: RemoteSegmentStore
) -> bool:
    """Whether the last cleaning already did what this one would: the checkpoint stays at the
    end of the remote-only segments (the local ones are dirty for the remote copy until they
    are uploaded), so the local segments kept the dirty ratio up, and every pass of an idle
    topic rewrote the same remote segments to the same records (seven PUTs and four DELETEs a
    partition a pass, for ever). Nothing new: no record past the last map's end, and no
    segment became remote-only since (its checkpoint is still the remote-only end)."""
    remote_end = store.remote[-1].remote.end_offset + 1
    last = manifest.cleaner_map_end
    return (last is not None and manifest.cleaner_checkpoint == remote_end
            and ltc.first_uncleanable <= last)  # fmt: skip


def _save_checkpoint(part: _Partition, checkpoint: int, map_end: int) -> None:
    def change(manifest: PartitionManifest) -> bool:
        if (manifest.cleaner_checkpoint, manifest.cleaner_map_end) == (checkpoint, map_end):
            return False
        manifest.cleaner_checkpoint = checkpoint
        manifest.cleaner_map_end = map_end
        return True

    ManifestStore(part.store, cache=part.cache).update(part.rp, change)


def compact_remote(
    store: ObjectStore,
    rp: RemotePartition,
    *,
    config: LogConfig,
    local: LocalPartition | None,
    now_ms: int,
    owner: str,
    grace_ms: int = 0,
    scratch_dir: Path | None = None,
    read_bytes: int | None = None,
    deferred: list[GroupReplacer] | None = None,
    cache: ManifestCache | None = None,
) -> RemoteCompactionResult:
    """Compact the remote-only segments of one partition once (module docstring).
    ``read_bytes``: bytes per ranged GET (default: :data:`REMOTE_READ_BYTES` or more).
    ``deferred``: step 4 is left to the caller, which gets the replacer in this list (a pass over
    many partitions then waits out the grace once, not once per partition). ``cache``: the
    manifests a long-running sidecar knows (manifest_store.py), read and kept current."""
    manifest, _ = ManifestStore(store, cache=cache).load(rp)
    remote = remote_only(manifest, local)
    result = RemoteCompactionResult(checkpoint=manifest.cleaner_checkpoint)
    if not remote:
        return result
    part = _Partition(store, rp, config, manifest, remote, local, now_ms, cache)
    replacer = GroupReplacer(store, rp, owner, cache=cache)
    scratch = new_scratch("compact", scratch_dir)  # a dead process's are removed first
    io_size = read_bytes or max(config.io_buffer_size // 2, REMOTE_READ_BYTES)
    seg_store = RemoteSegmentStore(store, rp, remote,
                                   local.segments if local is not None else [], config=config,
                                   replacer=replacer, scratch=scratch, io_buffer_size=io_size)
    result.segments_before = len(remote)
    result.bytes_before = sum(s.size for s in seg_store.remote)
    try:  # on failure, swapped-out segments are left DELETE_SEGMENT_STARTED for the sweep
        end = _clean(part, seg_store, result)
    finally:
        seg_store.close()
        shutil.rmtree(scratch, ignore_errors=True)
    if result.cleaned:
        remote_end = seg_store.remote[-1].remote.end_offset + 1
        result.checkpoint = min(end, remote_end)
        _save_checkpoint(part, result.checkpoint, end)
    result.segments_after = len(seg_store.remote)
    result.bytes_after = sum(s.size for s in seg_store.remote)
    if deferred is not None and replacer.replaced:
        deferred.append(replacer)
    else:
        result.objects_deleted = replacer.delete_replaced(grace_ms)
    if result.cleaned:
        log.info("compacted remote %s: %d -> %d bytes, %d records removed", rp,
                 result.bytes_before, result.bytes_after, result.records_removed)  # fmt: skip
    return result
