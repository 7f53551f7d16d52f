"""Restore's downloads: each object of a segment into its file in the partition directory,
checked against the manifest (size and SHA-256) in a staging directory first and renamed into
place only then, so a file in place is always complete and verified and an interrupted restore
resumes by skipping the files that match. An index or snapshot object missing or damaged in the
store is left out, with the segment's other indexes: the partition's first open rebuilds them
from the segment, as Kafka rebuilds lost indexes (its records are all in the ``.log``)."""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

from kafkatier.storage.fsutil import fsync_file, naming
from kafkatier.storage.producer.snapshot import snapshot_path
from kafkatier.storage.wire import segment_file_name
from kafkatier.tiering.errors import ObjectNotFoundError, RemoteVerifyError
from kafkatier.tiering.metadata.identity import RemotePartition
from kafkatier.tiering.metadata.local import sha256_file
from kafkatier.tiering.metadata.manifest import RemoteFile, RemoteSegment, object_key
from kafkatier.tiering.store.object_store import ObjectStore, Progress

log = logging.getLogger(__name__)
_SUFFIXES = {"log": ".log", "index": ".index", "timeindex": ".timeindex", "txnindex": ".txnindex"}


@dataclass(frozen=True)
class Download:
    key: str
    target: Path
    meta: RemoteFile


def plan_downloads(
    rp: RemotePartition, segments: list[RemoteSegment], directory: Path
) -> list[Download]:
    plan: list[Download] = []
    for seg in segments:
        for kind, meta in sorted(seg.files.items()):
            if kind == "snapshot":
                target = snapshot_path(directory, seg.end_offset + 1)
            else:
                target = directory / segment_file_name(seg.base_offset, _SUFFIXES[kind])
            key = object_key(rp, seg, kind)
            plan.append(Download(key, target, meta))
    return plan


def _is_complete(path: Path, meta: RemoteFile, sha256: str | None = None) -> bool:
    """``path`` holds the manifest's bytes (``sha256``: their digest, when already known)."""
    if not path.exists() or path.stat().st_size != meta.size:
        return False
    return (sha256 or sha256_file(path)) == meta.sha256


def fetch(
    store: ObjectStore, item: Download, staging: Path, progress: Progress | None, attempts: int = 3
) -> int | None:
    """Download ``item`` unless already in place (None); returns the bytes downloaded. A copy that
    fails its checksum is discarded and fetched again (a flipped bit in transit), up to
    ``attempts`` times; a remote copy that is itself wrong is refused, never put in place.
    The digest is the one the store computed while writing the copy, else a read of it."""
    if _is_complete(item.target, item.meta):
        return None
    staging.mkdir(parents=True, exist_ok=True)
    temp = staging / item.target.name
    for attempt in range(attempts):
        try:
            with naming(temp):  # a full disk's ENOSPC names the file it was writing
                digest = store.get_file(item.key, temp, progress=progress, size=item.meta.size)
            if _is_complete(temp, item.meta, digest):
                fsync_file(temp)  # durable before its name is: the checkpoints follow the data
                os.replace(temp, item.target)
                return item.meta.size
        except RemoteVerifyError:
            pass
        temp.unlink(missing_ok=True)
        if attempt + 1 < attempts:
            time.sleep(0.05 * 2**attempt)
    raise RemoteVerifyError("downloaded object differs from the manifest", key=item.key)


LEFT_OUT = -1
"""What :func:`fetch_or_leave_out` returns for an object it left out."""


def fetch_or_leave_out(
    store: ObjectStore, item: Download, staging: Path, progress: Progress | None
) -> int | None:
    """:func:`fetch`; an index or snapshot object that is missing or differs from the manifest
    is left out (:data:`LEFT_OUT`): Kafka rebuilds a segment's indexes when its offset index is
    missing, and producer state from the batches, so the records stay restorable where they
    were refused (a ``.log`` that fails still fails the partition)."""
    try:
        return fetch(store, item, staging, progress)
    except (RemoteVerifyError, ObjectNotFoundError) as exc:
        if item.target.suffix == ".log":
            raise
        log.warning("%s; left out: rebuilt from its segment when the partition is opened",
                    exc)  # fmt: skip
        return LEFT_OUT


def drop_indexes(left_out: list[Path]) -> None:
    """The indexes of each segment one of whose index files was left out: all three go, so
    that opening the partition recovers the segment (a missing offset index is what starts
    Kafka's recovery of a segment; a missing time or transaction index alone is taken for an
    empty one, which would lose the timestamps and the aborted transactions)."""
    for path in left_out:
        if path.suffix in (".index", ".timeindex", ".txnindex"):
            for suffix in (".index", ".timeindex", ".txnindex"):
                path.with_suffix(suffix).unlink(missing_ok=True)
