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
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from kafkatier.storage.checkpoint.metadata import partition_dir_name
from kafkatier.storage.config.topic_files import TopicConfigStore
from kafkatier.storage.errors import KafkaTierError
from kafkatier.storage.log.readonly import ReadOnlyPartition, checkpointed_log_starts
from kafkatier.tiering.cleaner.stale import stale
from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.metadata.identity import RemotePartition, topic_id_of
from kafkatier.tiering.metadata.local import LocalPartition, local_partitions
from kafkatier.tiering.metadata.manifest import PartitionManifest
from kafkatier.tiering.metadata.manifest_store import (
    ManifestCache,
    ManifestStore,
    copied_manifest,
)
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
    error: str | None = None
    """Why its remote side is unknown (its manifest unreadable, the store unreachable)."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class LocalSummary:
    """What status shows of a local partition: its segments (base offset, bytes) oldest first,
    log start (as the writer checkpointed it) and end, whether its topic is tiered."""

    segments: list[tuple[int, int]]
    log_start: int
    log_end: int
    tiered: bool

    @classmethod
    def of(cls, part: LocalPartition) -> LocalSummary:
        segments = [(s.base_offset, s.size) for s in part.segments]
        return cls(segments, part.log_start_offset(), part.log_end_offset(),
                   part.config.remote_storage_enable)  # fmt: skip

    @classmethod
    def read(
        cls, log_dir: Path, topic: str, partition: int, log_start: int, tiered: bool
    ) -> LocalSummary:
        """From the partition's listing, the sizes of its ``.log`` files and the headers of the
        last one: no segment or index opened (``status`` over thousands of partitions)."""
        with ReadOnlyPartition(log_dir, topic, partition) as view:
            sizes = view.log_sizes()
            return cls(list(zip(view.bases, sizes, strict=True)), log_start,
                       view.log_end_offset(), tiered)  # fmt: skip


def partition_status(part: LocalPartition | None, store: ObjectStore, rp: RemotePartition,
                     stale: bool = False, manifest: PartitionManifest | None = None,
                     ) -> PartitionStatus:  # fmt: skip
    local = LocalSummary.of(part) if part is not None else None
    manifest = manifest if manifest is not None else ManifestStore(store).load(rp)[0]
    return summary_status(local, rp, manifest, stale)


RemoteView = tuple[RemotePartition, PartitionManifest]


def summary_status(
    local: LocalSummary | None, rp: RemotePartition, manifest: PartitionManifest, stale: bool
) -> PartitionStatus:
    # below the log start: expired, their deletion under way (or cut short): not counted
    finished = [s for s in manifest.finished() if s.end_offset >= manifest.log_start_offset]
    highest = manifest.highest_offset
    segs = local.segments if local is not None else []
    lagging = [size for base, size in segs[:-1] if base > highest]
    return PartitionStatus(
        topic=rp.topic,
        partition=rp.partition,
        tiered=local.tiered if local is not None else bool(finished),
        local_start=max(segs[0][0], local.log_start) if segs and local else None,
        local_end=local.log_end if local is not None and segs else None,
        local_bytes=sum(size for _, size in segs),
        local_segments=len(segs),
        remote_start=max(manifest.log_start_offset, finished[0].base_offset) if finished else None,
        remote_end=highest + 1 if finished else None,
        remote_bytes=sum(s.size for s in finished),
        remote_segments=len(finished),
        lag_bytes=sum(lagging),
        lag_segments=len(lagging),
        topic_id=rp.topic_id,
        stale=stale,
    )


@dataclass
class StatusReport:
    """Every partition's status, and why the store's listing failed, if it did (the
    partitions only the store holds are then missing)."""

    partitions: list[PartitionStatus]
    store_error: Exception | None = None


def collect_status(
    config: TieringConfig, store: ObjectStore | None = None, *, refresh: bool = False
) -> list[PartitionStatus]:
    """:func:`status_report`'s partitions; a failed listing of the store raises, as it did
    before the report could carry it (``kafkatier run``'s report must not hide it)."""
    report = status_report(config, store, refresh=refresh)
    if report.store_error is not None:
        raise report.store_error
    return report.partitions


def status_report(
    config: TieringConfig, store: ObjectStore | None = None, *, refresh: bool = False
) -> StatusReport:
    """Every local partition, plus partitions that exist only remotely. A local partition's
    remote side comes from the copy of its manifest that the sidecar keeps beside it
    (manifest_copy.py; no request), or with ``refresh`` or without a copy from the store (a
    manifest GET, milliseconds of waiting, ``STATUS_WORKERS`` at a time). A remote-only
    partition's costs the read that found it. A partition whose remote side cannot be read
    (its manifest damaged, the store unreachable) is listed with the error, the others as
    they are: one bad manifest failed the whole command."""
    store = store if store is not None else config.open_store()
    manifests = ManifestStore(store, cache=ManifestCache())  # each manifest read once
    sides = local_sides(config)
    with ThreadPoolExecutor(STATUS_WORKERS) as pool:
        views: list[RemoteView | str | None] = [None if refresh else s.copied() for s in sides]
        missing = [i for i, view in enumerate(views) if view is None]
        for i, view in zip(missing, pool.map(lambda i: _found(sides[i], manifests), missing),
                           strict=True):  # fmt: skip
            views[i] = view
        found = [_local_status(side, view) for side, view in zip(sides, views, strict=True)
                 if view]  # fmt: skip
        seen = {(s.topic, s.partition, s.topic_id) for s in found}
        try:
            remote_only = manifests.partitions(exclude=seen)
        except (KafkaTierError, OSError) as exc:
            return StatusReport(_sorted(found), exc)
        dead = stale(remote_only, seen)
        found += [_remote_status(rp, manifests, rp in dead) for rp in remote_only]
    return StatusReport(_sorted(found))


def _found(side: LocalSide, manifests: ManifestStore) -> RemoteView | str | None:
    try:
        return side.find(manifests)
    except (KafkaTierError, OSError) as exc:
        return str(exc)


def _local_status(side: LocalSide, view: RemoteView | str) -> PartitionStatus:
    if isinstance(view, str):
        rp = RemotePartition(side.topic, side.partition, side.topic_id)
        return _unknown_remote(side.summary, rp, False, view)
    return summary_status(side.summary, *view, stale=False)


def _remote_status(rp: RemotePartition, manifests: ManifestStore, dead: bool) -> PartitionStatus:
    try:
        return summary_status(None, rp, manifests.load(rp)[0], dead)
    except (KafkaTierError, OSError) as exc:
        return _unknown_remote(None, rp, dead, str(exc))


def _unknown_remote(
    local: LocalSummary | None, rp: RemotePartition, dead: bool, error: str
) -> PartitionStatus:
    """The local side alone, the remote one and the lag unknown (none counted)."""
    empty = summary_status(local, rp, PartitionManifest(rp.topic, rp.partition), dead)
    return replace(empty, lag_bytes=0, lag_segments=0, error=error)


def _sorted(found: list[PartitionStatus]) -> list[PartitionStatus]:
    return sorted(found, key=lambda s: (s.topic, s.partition, s.stale))


@dataclass(frozen=True)
class LocalSide:
    """A local partition as status sees it: its summary, where it is, which topic id."""

    summary: LocalSummary
    topic: str
    partition: int
    topic_id: str
    directory: Path

    def copied(self) -> RemoteView | None:
        """Its remote side from the manifest copy beside it, if there is a usable one."""
        return copied_manifest(self.directory, self.topic, self.partition, self.topic_id)

    def find(self, manifests: ManifestStore) -> RemoteView:
        """Its remote side from the store (a GET; two for a partition of the old layout)."""
        return manifests.find(self.topic, self.partition, self.topic_id)


def local_sides(config: TieringConfig) -> list[LocalSide]:
    """Every local partition, read in this thread: file reads only, which threads would only
    make queue for the GIL. Each log dir's checkpoint and each topic's configuration are read
    once."""
    keys = local_partitions(list(config.log_dirs))
    starts = {d: checkpointed_log_starts(d) for d in {k[0] for k in keys}}
    topics = {(d, t) for d, t, _ in keys}
    tiered = {(d, t): TopicConfigStore(d).get(t).remote_storage_enable for d, t in topics}
    sides = []
    for log_dir, topic, partition in keys:
        summary = LocalSummary.read(log_dir, topic, partition,
                                    starts[log_dir].get((topic, partition), 0),
                                    tiered[(log_dir, topic)])  # fmt: skip
        directory = Path(log_dir) / partition_dir_name(topic, partition)
        sides.append(LocalSide(summary, topic, partition, topic_id_of(directory), directory))
    return sides
