"""Finding and removing what failed or abandoned upload attempts left in the remote store.

An upload puts its objects first, under a fresh attempt id, and then names them in the manifest
in one conditional write, as COPY_SEGMENT_FINISHED (tiering/copy/upload.py): until that write, no
entry names the attempt. So an orphan is (a) an entry still COPY_SEGMENT_STARTED (written by
compaction's swaps and by earlier kafkatier versions) whose owner is another sidecar run and
which has not moved for ``grace_ms`` (its owner died: SIGKILL, power loss), or one of this
run's that it no longer works on; (b) an entry left DELETE_SEGMENT_STARTED (a deletion cut
short); (c) a second FINISHED entry for a segment already FINISHED (two sidecars raced; the older
entry is kept); (d) objects of an attempt the manifest does not name, once every one of them is
older than ``grace_ms`` (an uploader still at work names them within that time, or never).

The listing is taken *before* the manifest is read, so an attempt that committed meanwhile is
seen as named. Objects of kind (d) are claimed before they are deleted: the attempt id goes into
the manifest's ``abandoned`` list by a conditional write (refused if the attempt got named
meanwhile), and an uploader never commits an attempt that list holds, so a slow uploader and a
sweep cannot both win. An uploader gives up an attempt older than ``MAX_ATTEMPT_MS`` itself, and
claims are forgotten after ``ABANDONED_TTL_MS``, far beyond it.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass

from kafkatier.tiering.copy.upload import delete_attempt
from kafkatier.tiering.crash import crash_point
from kafkatier.tiering.errors import TieringError
from kafkatier.tiering.metadata.identity import RemotePartition
from kafkatier.tiering.metadata.manifest import (
    MANIFEST_NAME,
    PartitionManifest,
    RemoteSegment,
    SegmentState,
    manifest_key,
    now_ms,
)
from kafkatier.tiering.metadata.manifest_store import ManifestCache, ManifestStore
from kafkatier.tiering.store.object_store import ObjectInfo, ObjectStore

log = logging.getLogger("kafkatier.tiering")
ABANDONED_TTL_MS = 7 * 24 * 3600 * 1000
"""How long a claim on an unnamed attempt is kept (uploads give up after a day: upload.py)."""


@dataclass
class Sweep:
    """What one sweep of one partition did."""

    removed: int = 0
    """Orphan attempts and stray objects removed."""
    waiting: int = 0
    """Unnamed attempts left alone because they are younger than the grace: sweep again later."""


def sweep_orphans(
    store: ObjectStore,
    rp: RemotePartition,
    *,
    owner: str,
    grace_ms: int,
    active: Collection[str] = (),
    cache: ManifestCache | None = None,
    local_start: int | None = None,
) -> Sweep:
    """Remove the partition's orphans (module docstring). ``active``: attempts this process is
    uploading right now. The manifest is read afresh after the listing whenever the listing
    shows an object (``cache`` is kept current). ``local_start``: the first offset the local
    log still holds, where there is one (``_refuse_unknown``)."""
    manifests = ManifestStore(store, cache=cache)
    listed = [i for i in store.list(rp.prefix) if not i.key.endswith("/" + MANIFEST_NAME)]
    manifest, etag = manifests.load(rp, fresh=bool(listed) or cache is None)
    if etag is None and local_start is not None:
        _refuse_unknown(rp, listed, local_start)
    result = Sweep()
    doomed = [s.attempt for s in manifest.segments if _is_orphan(s, owner, grace_ms, active)]
    doomed += _duplicates(manifest.segments)
    for attempt in doomed:
        log.info("removing orphan attempt %s of %s", attempt, rp)
        delete_attempt(store, manifests, rp, attempt)
    result.removed = len(doomed)
    unnamed = _unnamed(listed, manifest, rp.prefix, active)
    now = now_ms()
    for attempt, infos in unnamed.items():
        old = all(now - i.last_modified_ms >= grace_ms for i in infos)
        if not (old or attempt in manifest.abandoned):
            result.waiting += 1
        elif _claim(manifests, rp, attempt, now):
            for info in infos:
                log.info("removing stray object %s", info.key)
                store.delete(info.key)
                crash_point("mid-delete")
            result.removed += len(infos)
    if any(now - at >= ABANDONED_TTL_MS for at in manifest.abandoned.values()):
        manifests.update(rp, lambda m: _forget_claims(m, now))
    return result


def _refuse_unknown(rp: RemotePartition, listed: list[ObjectInfo], local_start: int) -> None:
    """No manifest, yet objects of segments the local log no longer holds. An upload that died
    before its first commit leaves objects of segments still local (local retention deletes
    only what a manifest names); objects below the local log mean a manifest deleted by hand
    or a lifecycle rule, with the partition's copy of it gone too, and those objects may be
    the only copy of their records. Kafka never deletes remote data its metadata does not
    name; neither is anything deleted or uploaded here."""
    bases = sorted({b for i in listed if (b := _base_of(i.key[len(rp.prefix) :])) is not None})
    below = [b for b in bases if b < local_start]
    if below:
        raise TieringError(
            f"the remote store holds objects of {len(below)} segments of {rp} (base offsets "
            f"{below[0]}..{below[-1]}) below the local log's first offset {local_start} but no "
            f"manifest for them ({manifest_key(rp)} is missing): they may be the only copy of "
            "those records, so nothing is uploaded or deleted for the partition until the "
            "manifest is put back",
            key=manifest_key(rp),
        )


def has_orphans(manifest: PartitionManifest, owner: str, grace_ms: int) -> bool:
    """Whether ``manifest`` shows an orphan entry (kinds a-c of the module docstring): what a
    sidecar that knows the manifest checks before it spends a listing on a sweep."""
    found = any(_is_orphan(s, owner, grace_ms, ()) for s in manifest.segments)
    return found or bool(_duplicates(manifest.segments))


def _unnamed(
    listed: list[ObjectInfo], manifest: PartitionManifest, prefix: str, active: Collection[str]
) -> dict[str, list[ObjectInfo]]:
    known = {s.attempt for s in manifest.segments}
    found: dict[str, list[ObjectInfo]] = {}
    for info in listed:
        attempt = _attempt_of(info.key[len(prefix) :])
        if attempt not in known and (not attempt or attempt not in active):
            found.setdefault(attempt, []).append(info)
    return found


def _claim(manifests: ManifestStore, rp: RemotePartition, attempt: str, now: int) -> bool:
    """Record ``attempt`` as abandoned unless it got named meanwhile; whether it is claimed."""
    if not attempt:  # not an attempt's key at all: nothing could ever name it
        return True

    def claim(manifest: PartitionManifest) -> bool:
        if manifest.find(attempt) is not None or attempt in manifest.abandoned:
            return False
        manifest.abandoned[attempt] = now
        return True

    committed = manifests.update(rp, claim)
    return committed.find(attempt) is None and attempt in committed.abandoned


def _forget_claims(manifest: PartitionManifest, now: int) -> bool:
    expired = [a for a, at in manifest.abandoned.items() if now - at >= ABANDONED_TTL_MS]
    for attempt in expired:
        del manifest.abandoned[attempt]
    return bool(expired)


def _is_orphan(entry: RemoteSegment, owner: str, grace_ms: int, active: Collection[str]) -> bool:
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


def _base_of(relative_key: str) -> int | None:
    """``<base>-<attempt>/<kind>`` -> ``<base>`` (None for anything else)."""
    base, sep, _ = relative_key.split("/", 1)[0].partition("-")
    return int(base) if sep and base.isdigit() else None


def _attempt_of(relative_key: str) -> str:
    """``<base>-<attempt>/<kind>`` -> ``<attempt>`` ("" for anything else)."""
    head = relative_key.split("/", 1)[0]
    _, _, attempt = head.partition("-")
    return attempt
