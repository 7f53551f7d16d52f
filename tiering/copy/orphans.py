"""Finding and removing what failed or abandoned upload attempts left in the remote store.

An orphan is (a) an entry still COPY_SEGMENT_STARTED whose owner is another sidecar run and which
has not moved for ``grace_ms`` (its owner died: SIGKILL, power loss), or one of this run's that it
no longer works on; (b) an entry left DELETE_SEGMENT_STARTED (a deletion cut short); (c) a second
FINISHED entry for a segment already FINISHED (two sidecars raced; the older entry is kept);
(d) an object whose attempt the manifest does not name at all. The listing is taken *before* the
manifest is read: an attempt's STARTED entry is committed before its first object is written, so
every object listed belongs to an attempt the manifest read afterwards knows, unless it is an
orphan.
"""

from __future__ import annotations

import logging
from collections.abc import Collection

from kafkatier.tiering.copy.upload import delete_attempt
from kafkatier.tiering.metadata.identity import RemotePartition
from kafkatier.tiering.metadata.manifest import (
    MANIFEST_NAME,
    PartitionManifest,
    RemoteSegment,
    SegmentState,
    now_ms,
)
from kafkatier.tiering.metadata.manifest_store import ManifestCache, ManifestStore
from kafkatier.tiering.store.object_store import ObjectStore

log = logging.getLogger("kafkatier.tiering")


def sweep_orphans(
    store: ObjectStore,
    rp: RemotePartition,
    *,
    owner: str,
    grace_ms: int,
    active: Collection[str] = (),
    cache: ManifestCache | None = None,
) -> int:
    """Remove the partition's orphans (module docstring); returns how many attempts or stray
    objects were removed. ``active``: attempts this process is uploading right now. The
    manifest is read afresh after the listing, whatever ``cache`` holds (it is kept current)."""
    manifests = ManifestStore(store, cache=cache)
    prefix = rp.prefix
    listed = [i.key for i in store.list(prefix) if not i.key.endswith("/" + MANIFEST_NAME)]
    manifest, _ = manifests.load(rp, fresh=True)
    doomed = [s.attempt for s in manifest.segments if _is_orphan(s, owner, grace_ms, active)]
    doomed += _duplicates(manifest.segments)
    for attempt in doomed:
        log.info("removing orphan attempt %s of %s", attempt, rp)
        delete_attempt(store, manifests, rp, attempt)
    known = {s.attempt for s in manifest.segments}
    strays = [k for k in listed if _attempt_of(k[len(prefix):]) not in known]
    for key in strays:
        log.info("removing stray object %s", key)
        store.delete(key)
    return len(doomed) + len(strays)


def has_orphans(manifest: PartitionManifest, owner: str, grace_ms: int) -> bool:
    """Whether ``manifest`` shows an orphan entry (kinds a-c of the module docstring): what a
    sidecar that knows the manifest checks before it spends a listing on a sweep."""
    found = any(_is_orphan(s, owner, grace_ms, ()) for s in manifest.segments)
    return found or bool(_duplicates(manifest.segments))


def _is_orphan(
    entry: RemoteSegment, owner: str, grace_ms: int, active: Collection[str]
) -> bool:
    if entry.state is SegmentState.DELETE_SEGMENT_STARTED:
        return True
    if entry.state is not SegmentState.COPY_SEGMENT_STARTED:
        return False
    if entry.owner == owner:
        return entry.attempt not in active
    return now_ms() - entry.updated_ms >= grace_ms


def _duplicates(entries: list[RemoteSegment]) -> list[str]:
    kept: dict[int, RemoteSegment] = {}
    extra: list[str] = []
    for entry in sorted(entries, key=lambda s: (s.updated_ms, s.attempt)):
        if not entry.finished:
            continue
        if entry.base_offset in kept:
            extra.append(entry.attempt)
        else:
            kept[entry.base_offset] = entry
    return extra


def _attempt_of(relative_key: str) -> str:
    """``<base>-<attempt>/<kind>`` -> ``<attempt>`` ("" for anything else)."""
    head = relative_key.split("/", 1)[0]
    _, _, attempt = head.partition("-")
    return attempt
