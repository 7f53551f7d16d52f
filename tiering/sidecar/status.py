"""Per-partition tiering status: local and remote offset ranges, bytes, upload lag.

Upload lag follows Kafka's ``RemoteCopyLagBytes`` / ``RemoteCopyLagSegments``: the closed local
segments (every one but the active) holding offsets above the highest offset in remote storage.

Remote data of another incarnation of a local topic (deleted and created again under its name:
another topic id) is listed on its own lines as ``stale``: the sidecar never applies it to the
new topic and never deletes it (``tiering.cleaner.stale``); ``kafkatier clean --remote
--delete-stale`` does, when nobody needs it any more.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kafkatier.tiering.cleaner.stale import stale
from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.metadata.identity import RemotePartition
from kafkatier.tiering.metadata.local import LocalPartition, local_partitions
from kafkatier.tiering.metadata.manifest import PartitionManifest
from kafkatier.tiering.metadata.manifest_store import ManifestStore
from kafkatier.tiering.store.object_store import ObjectStore

STATUS_WORKERS = 16


@dataclass(frozen=True)
class PartitionStatus:
    topic: str
    partition: int
    tiered: bool
    local_start: int | None
    local_end: int | None
    local_bytes: int
    local_segments: int
    remote_start: int | None
    remote_end: int | None  # exclusive: highest remote offset + 1
    remote_bytes: int
    remote_segments: int
    lag_bytes: int
    lag_segments: int
    topic_id: str = ""
    stale: bool = False
    """Remote data of another incarnation of a partition that exists locally (module docstring)."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def partition_status(part: LocalPartition | None, store: ObjectStore, rp: RemotePartition,
                     stale: bool = False, manifest: PartitionManifest | None = None,
                     ) -> PartitionStatus:  # fmt: skip
    topic, partition = rp.topic, rp.partition
    manifest = manifest if manifest is not None else ManifestStore(store).load(rp)[0]
    finished = manifest.finished()
    highest = manifest.highest_offset
    segs = part.segments if part is not None else []
    closed = segs[:-1]
    lagging = [s for s in closed if s.base_offset > highest]
    return PartitionStatus(
        topic=topic,
        partition=partition,
        tiered=part.config.remote_storage_enable if part is not None else bool(finished),
        local_start=max(segs[0].base_offset, part.log_start_offset()) if segs and part else None,
        local_end=part.log_end_offset() if part is not None and segs else None,
        local_bytes=sum(s.size for s in segs),
        local_segments=len(segs),
        remote_start=max(manifest.log_start_offset, finished[0].base_offset) if finished else None,
        remote_end=highest + 1 if finished else None,
        remote_bytes=sum(s.size for s in finished),
        remote_segments=len(finished),
        lag_bytes=sum(s.size for s in lagging),
        lag_segments=len(lagging),
        topic_id=rp.topic_id,
        stale=stale,
    )


def collect_status(
    config: TieringConfig, store: ObjectStore | None = None
) -> list[PartitionStatus]:
    """Every local partition, plus partitions that exist only remotely; ``STATUS_WORKERS``
    partitions at a time (each costs a manifest read, milliseconds of waiting on the store)."""
    store = store if store is not None else config.open_store()
    manifests = ManifestStore(store)

    def local(key: tuple[Path, str, int]) -> PartitionStatus:
        with LocalPartition(*key) as part:
            part.remote, manifest = manifests.find(key[1], key[2], part.topic_id())
            return partition_status(part, store, part.remote, manifest=manifest)

    with ThreadPoolExecutor(STATUS_WORKERS) as pool:
        found = list(pool.map(local, local_partitions(list(config.log_dirs))))
        seen = {(s.topic, s.partition, s.topic_id) for s in found}
        remote_only = manifests.partitions(exclude=seen)
        dead = stale(remote_only, seen)
        found += pool.map(lambda rp: partition_status(None, store, rp, stale=rp in dead),
                          remote_only)  # fmt: skip
    return sorted(found, key=lambda s: (s.topic, s.partition, s.stale))
