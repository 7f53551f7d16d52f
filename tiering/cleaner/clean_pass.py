"""One remote-compaction pass by hand (``kafkatier clean --remote``), outside the sidecar loop.

For every partition of the sidecar configuration's log dirs whose topic is compacted and tiered,
and for every partition the remote store holds a manifest of but no log dir does (its topic
settings then come from the manifest), as the sidecar would: sweep the partition's orphans
(attempts a killed run left behind), then :func:`~kafkatier.tiering.cleaner.compaction
.compact_remote`. A failing partition is reported and the others carry on. Remote data of another
incarnation of a local topic (deleted and created again: ``stale.py``) is not compacted; with
``delete_stale`` it is deleted, and so is all the remote data of a topic named that no log dir
holds (deleted, not created again: only a name given says so, as a log dir lost with its disk
looks the same).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.log.log import wall_clock_ms
from kafkatier.tiering.cleaner.compaction import RemoteCompactionResult, compact_remote
from kafkatier.tiering.cleaner.stale import delete_incarnation, stale
from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.copy.orphans import sweep_orphans
from kafkatier.tiering.copy.upload import new_owner
from kafkatier.tiering.metadata.identity import RemotePartition
from kafkatier.tiering.metadata.local import LocalPartition, local_partitions
from kafkatier.tiering.metadata.manifest_copy import ManifestCopies
from kafkatier.tiering.metadata.manifest_store import ManifestCache, ManifestStore
from kafkatier.tiering.store.object_store import ObjectStore

log = logging.getLogger("kafkatier.tiering")


@dataclass
class RemotePartitionOutcome:
    topic: str
    partition: int
    orphans_removed: int = 0
    result: RemoteCompactionResult = field(default_factory=RemoteCompactionResult)
    error: str | None = None
    stale_topic_id: str | None = None
    """Set for a stale incarnation deleted by this pass (the id it had)."""
    stale_segments_deleted: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition,
                "orphans_removed": self.orphans_removed, **asdict(self.result),
                "stale_topic_id": self.stale_topic_id,
                "stale_segments_deleted": self.stale_segments_deleted,
                "error": self.error}  # fmt: skip


@dataclass
class RemotePass:
    """Runs one pass for one sidecar configuration."""

    config: TieringConfig
    store: ObjectStore
    overrides: Mapping[str, str] = field(default_factory=dict)
    grace_ms: int = 0
    owner: str = field(default_factory=new_owner)

    def run(
        self, topic: str | None = None, *, delete_stale: bool = False
    ) -> list[RemotePartitionOutcome]:
        outcomes: list[RemotePartitionOutcome] = []
        seen: set[tuple[str, int, str]] = set()
        copies = ManifestCopies(self.config.log_dirs)  # kept current for status
        manifests = ManifestStore(self.store, cache=ManifestCache(copies))  # read once each
        for log_dir, name, partition in local_partitions(list(self.config.log_dirs)):
            if topic is not None and name != topic:
                continue
            with LocalPartition(log_dir, name, partition) as part:
                part.remote = manifests.locate(name, partition, part.topic_id())
                seen.add(part.remote.identity)
                cfg = part.config.with_overrides(self.overrides, source="--config")
                if cfg.is_compacted and cfg.remote_storage_enable:
                    outcomes.append(self._one(part.remote, cfg, part))
        remote_only = manifests.partitions(topic=topic, exclude=seen)
        dead = stale(remote_only, seen)
        if delete_stale and topic is not None and all(t != topic for t, _, _ in seen):
            dead = remote_only  # named, and no log dir holds it: a deleted topic
        if delete_stale:
            outcomes += [self._delete(rp) for rp in dead]
        for rp in remote_only:
            if rp in dead:
                continue
            manifest, _ = manifests.load(rp)
            cfg = LogConfig().with_overrides({**manifest.topic_config, **self.overrides},
                                             source=f"manifest of {rp}")  # fmt: skip
            if cfg.is_compacted:
                outcomes.append(self._one(rp, cfg, None))
        return outcomes

    def _delete(self, rp: RemotePartition) -> RemotePartitionOutcome:
        outcome = RemotePartitionOutcome(rp.topic, rp.partition, stale_topic_id=rp.topic_id)
        try:
            outcome.stale_segments_deleted = delete_incarnation(self.store, rp)
            log.info("deleted the remote data of %s: %d segments", rp,
                     outcome.stale_segments_deleted)  # fmt: skip
        except Exception as exc:
            log.exception("deleting the remote data of %s failed", rp)
            outcome.error = f"{type(exc).__name__}: {exc}"
        return outcome

    def _one(self, rp: RemotePartition, cfg: LogConfig,
             part: LocalPartition | None) -> RemotePartitionOutcome:  # fmt: skip
        outcome = RemotePartitionOutcome(rp.topic, rp.partition)
        try:
            outcome.orphans_removed = sweep_orphans(
                self.store, rp, owner=self.owner, grace_ms=self.config.orphan_grace_ms,
                local_start=None if part is None else part.first_local_offset(),
            ).removed  # fmt: skip
            outcome.result = compact_remote(self.store, rp, config=cfg, local=part,
                                            now_ms=wall_clock_ms(), owner=self.owner,
                                            grace_ms=self.grace_ms)  # fmt: skip
        except Exception as exc:
            log.exception("remote compaction of %s failed", rp)
            outcome.error = f"{type(exc).__name__}: {exc}"
        return outcome
