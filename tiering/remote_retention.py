"""Total retention of tiered partitions: expiring remote segments, Kafka's RLM expiration task.

With tiered storage ``retention.ms`` / ``retention.bytes`` apply to the whole log, remote plus
local. As Kafka's ``RLMExpirationTask``: oldest remote segments first, those wholly below the
log start offset, then while the total size (remote bytes plus the local bytes not yet remote)
stays at or above ``retention.bytes`` without them, then those whose max timestamp is older than
``retention.ms``; each rule stops at the first segment that does not qualify. The partition's log
start offset in the manifest moves past them first (readers and restores no longer ask for
them), then each copy goes through DELETE_SEGMENT_STARTED -> objects removed -> entry dropped.
"""

from __future__ import annotations

from kafkatier.storage.config import LogConfig
from kafkatier.tiering.local import LocalPartition
from kafkatier.tiering.manifest import ManifestStore, PartitionManifest, RemoteSegment
from kafkatier.tiering.store import ObjectStore
from kafkatier.tiering.upload import delete_attempt


def expired_segments(
    manifest: PartitionManifest, config: LogConfig, now_ms: int, local_only_bytes: int
) -> list[RemoteSegment]:
    chain = manifest.contiguous()
    count = sum(1 for s in chain if s.end_offset < manifest.log_start_offset)
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
    store: ObjectStore, part: LocalPartition, now_ms: int, local_only_bytes: int
) -> int:
    """Delete the expired remote segments (module docstring); returns how many."""
    topic, partition, config = part.topic, part.partition, part.config
    manifests = ManifestStore(store)
    manifest, _ = manifests.load(topic, partition)
    doomed = expired_segments(manifest, config, now_ms, local_only_bytes)
    if not doomed:
        return 0
    new_start = doomed[-1].end_offset + 1

    def move_start(m: PartitionManifest) -> bool:
        if m.log_start_offset >= new_start:
            return False
        m.log_start_offset = new_start
        return True

    manifests.update(topic, partition, move_start)
    for seg in doomed:
        delete_attempt(store, manifests, topic, partition, seg.attempt)
    return len(doomed)
