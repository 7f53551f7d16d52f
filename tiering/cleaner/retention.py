"""Total retention of tiered partitions: expiring remote segments, Kafka's RLM expiration task.

With tiered storage ``retention.ms`` / ``retention.bytes`` and the log start offset apply to the
whole log, remote plus local. As Kafka's ``RLMExpirationTask``: oldest remote segments first,
those wholly below the log start offset, then while the total size (remote bytes plus the local
bytes not yet remote) stays at or above ``retention.bytes`` without them, then those whose max
timestamp is older than ``retention.ms``; each rule stops at the first segment that does not
qualify. The log start offset is the larger of the manifest's and the local
``log-start-offset-checkpoint`` (where the writer's DeleteRecords puts it).

Order of the steps, each idempotent and each redone by the next pass from the manifest alone:

1. the manifest's log start offset moves past the expired segments (the commit point: readers
   and restores no longer ask for them);
2. the local files follow (``local_log_start``: checkpoints, leader epochs, segments
   wholly below the new start), so local readers agree;
3. each expired copy goes through DELETE_SEGMENT_STARTED -> objects removed -> entry dropped
   (a copy left DELETE_SEGMENT_STARTED by a crash is finished by the orphan sweep).

A FINISHED entry therefore never names a deleted object.
"""

from __future__ import annotations

import logging

from kafkatier.storage.config.log_config import LogConfig
from kafkatier.tiering.cleaner.local_log_start import align_local_start
from kafkatier.tiering.copy.upload import delete_attempt
from kafkatier.tiering.crash import crash_point
from kafkatier.tiering.metadata.identity import RemotePartition
from kafkatier.tiering.metadata.local import LocalPartition
from kafkatier.tiering.metadata.manifest import PartitionManifest, RemoteSegment
from kafkatier.tiering.metadata.manifest_store import ManifestCache, ManifestStore
from kafkatier.tiering.store.object_store import ObjectStore

log = logging.getLogger("kafkatier.tiering")


def expired_segments(
    manifest: PartitionManifest, config: LogConfig, now_ms: int, local_only_bytes: int,
    log_start: int | None = None,
) -> list[RemoteSegment]:
    """The oldest contiguous FINISHED segments that go (module docstring); ``log_start``
    defaults to the manifest's."""
    chain = manifest.contiguous()
    start = manifest.log_start_offset if log_start is None else log_start
    count = sum(1 for s in chain if s.end_offset < start)
    if config.is_delete and config.retention_bytes >= 0:
        breach = sum(s.size for s in chain) + local_only_bytes - config.retention_bytes
        by_size = 0
        for seg in chain:
            if breach - seg.size < 0:
                break
            breach -= seg.size
            by_size += 1
        count = max(count, by_size)
    if config.is_delete and config.retention_ms >= 0:
        by_time = 0
        for seg in chain:
            if now_ms - seg.max_timestamp <= config.retention_ms:
                break
            by_time += 1
        count = max(count, by_time)
    return chain[:count]


def expire_remote(
    store: ObjectStore,
    part: LocalPartition,
    now_ms: int,
    local_only_bytes: int,
    cache: ManifestCache | None = None,
) -> int:
    """Apply total retention to ``part`` (module docstring); returns how many remote segments
    were deleted. ``cache``: the manifests a long-running sidecar knows (manifest_store.py)."""
    manifests = ManifestStore(store, cache=cache)
    manifest, etag = manifests.load(part.remote)
    start = max(manifest.log_start_offset, part.log_start_offset())
    doomed = expired_segments(manifest, part.config, now_ms, local_only_bytes, start)
    if doomed:
        start = max(start, doomed[-1].end_offset + 1)
    if etag is not None and start > manifest.log_start_offset:
        start = raise_log_start(manifests, part.remote, start)
        crash_point("after-remote-start")
    align_local_start(part, start)
    for seg in doomed:
        delete_attempt(store, manifests, part.remote, seg.attempt)
    if doomed:
        log.info("expired %d remote segments of %s-%d; log start offset now %d",
                 len(doomed), part.topic, part.partition, start)
    return len(doomed)


def raise_log_start(manifests: ManifestStore, rp: RemotePartition, offset: int) -> int:
    """Commit the manifest's log start offset as at least ``offset``; returns it as committed
    (a concurrent writer may have moved it further)."""

    def move_start(m: PartitionManifest) -> bool:
        if m.log_start_offset >= offset:
            return False
        m.log_start_offset = offset
        return True

    return manifests.update(rp, move_start).log_start_offset
