"""Putting one cleaned group of remote segments in place of the segments it was cleaned from.

The remote counterpart of the local cleaner's ``.cleaned`` -> ``.swap`` -> ``.deleted`` protocol
(kafka-format.md §11.4), with the manifest as the only commit point:

1. commit a COPY_SEGMENT_STARTED entry for a fresh attempt (the intent; readers skip it);
2. upload the cleaned ``log``, ``index``, ``timeindex``, ``txnindex`` and the producer snapshot
   (the old last segment's: compaction does not change producer state at the group's end) under
   the attempt's new keys, each verified as the uploader does;
3. ONE conditional manifest update: the new entry becomes FINISHED and every replaced entry
   DELETE_SEGMENT_STARTED, on condition that the new entry is still STARTED and every replaced
   entry still FINISHED (retention or another sidecar did not move first); else the new attempt
   is abandoned;
4. later (:meth:`GroupReplacer.delete_replaced`, after a grace for readers that hold the old
   manifest), the replaced objects are deleted and their entries dropped.

Killed before 3, the old segments are in force and the STARTED attempt is an orphan the next
sweep removes; killed after 3, the new ones are, and the DELETE_SEGMENT_STARTED entries are
finished by the next sweep. No state names a missing object as FINISHED.
"""

from __future__ import annotations

import logging
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import cast

from kafkatier.storage.log.segment import LogSegment
from kafkatier.storage.producer.snapshot import snapshot_path
from kafkatier.tiering.copy.upload import Uploader, delete_attempt
from kafkatier.tiering.crash import crash_point
from kafkatier.tiering.metadata.identity import RemotePartition
from kafkatier.tiering.metadata.local import Candidate, LocalPartition
from kafkatier.tiering.metadata.manifest import (
    PartitionManifest,
    RemoteFile,
    RemoteSegment,
    SegmentState,
    attempt_prefix,
    now_ms,
    object_key,
)
from kafkatier.tiering.metadata.manifest_store import ManifestCache, ManifestStore
from kafkatier.tiering.store.object_store import ObjectStore

log = logging.getLogger("kafkatier.tiering")
DELETE_THREADS = 8
WAIT_SAID_S = 2.0
"""A grace wait at least this long is logged, with what it waits for and until when."""


@dataclass(frozen=True)
class _Names:
    """The one attribute of a partition the uploader's object puts read."""

    remote: RemotePartition


def merged_epochs(old: list[RemoteSegment]) -> list[tuple[int, int]]:
    """The replaced segments' leader-epoch entries, one entry per epoch change."""
    out: list[tuple[int, int]] = []
    for seg in old:
        for epoch, start in seg.leader_epochs:
            if not out or out[-1][0] != epoch:
                out.append((epoch, start))
    return out


@dataclass
class GroupReplacer:
    """Swaps cleaned groups into one partition's manifest (module docstring)."""

    store: ObjectStore
    rp: RemotePartition
    owner: str
    replaced: list[RemoteSegment] = field(default_factory=list)
    swapped_at: float = 0.0
    cache: ManifestCache | None = None
    """The sidecar's knowledge of the manifests, kept current by the swaps' writes."""

    @property
    def topic(self) -> str:
        return self.rp.topic

    @property
    def partition(self) -> int:
        return self.rp.partition

    @property
    def manifests(self) -> ManifestStore:
        return ManifestStore(self.store, cache=self.cache)

    def replace(self, cleaned: LogSegment, old: list[RemoteSegment]) -> RemoteSegment | None:
        """Steps 1-3 for ``cleaned`` (finished, indexes trimmed); None: the swap lost a race
        (the new attempt is then removed and the old segments stay)."""
        next_base = old[-1].end_offset + 1
        self._stage_snapshot(cleaned.directory, old[-1], next_base)
        entry = self._new_entry(cleaned, old)
        self.manifests.update(self.rp, lambda m: _add(m, entry))
        try:
            uploader = Uploader(self.store, self.owner)
            target = cast(LocalPartition, _Names(self.rp))
            files = uploader._put_objects(target, Candidate(cleaned, next_base), entry)
        except Exception:
            self._abandon(entry.attempt)
            raise
        crash_point("compact-after-upload")
        if not self._swap(entry, files, old):
            self._abandon(entry.attempt)
            return None
        crash_point("compact-after-swap")
        self.replaced.extend(old)
        self.swapped_at = time.monotonic()
        entry.state, entry.files = SegmentState.COPY_SEGMENT_FINISHED, files
        return entry

    def _stage_snapshot(self, directory: Path, last: RemoteSegment, next_base: int) -> None:
        path = snapshot_path(directory, next_base)
        path.unlink(missing_ok=True)
        if "snapshot" in last.files:
            key = object_key(self.rp, last, "snapshot")
            path.write_bytes(self.store.get_bytes(key))

    def _new_entry(self, cleaned: LogSegment, old: list[RemoteSegment]) -> RemoteSegment:
        stamp = cleaned.max_timestamp
        if stamp < 0:  # nothing kept: the range keeps the newest time it had
            stamp = max(o.max_timestamp for o in old)
        return RemoteSegment(
            base_offset=old[0].base_offset,
            end_offset=old[-1].end_offset,
            max_timestamp=stamp,
            size=cleaned.size,
            state=SegmentState.COPY_SEGMENT_STARTED,
            attempt=uuid.uuid4().hex,
            owner=self.owner,
            updated_ms=now_ms(),
            leader_epochs=merged_epochs(old),
        )

    def _swap(self, entry: RemoteSegment, files: dict[str, RemoteFile],
              old: list[RemoteSegment]) -> bool:  # fmt: skip
        """Step 3, the commit point."""
        outcome: list[bool] = []

        def change(manifest: PartitionManifest) -> bool:
            outcome.clear()
            mine = manifest.find(entry.attempt)
            if mine is not None and mine.finished and mine.files == files:
                outcome.append(True)  # our earlier put landed though its answer was lost
                return False
            current = [manifest.find(o.attempt) for o in old]
            if mine is None or mine.state is not SegmentState.COPY_SEGMENT_STARTED:
                return False
            if any(c is None or not c.finished for c in current):
                return False
            stamp = now_ms()
            mine.state, mine.files = SegmentState.COPY_SEGMENT_FINISHED, files
            mine.updated_ms = stamp
            for c in current:
                assert c is not None
                c.state, c.updated_ms = SegmentState.DELETE_SEGMENT_STARTED, stamp
            outcome.append(True)
            return True

        self.manifests.update(self.rp, change)
        return bool(outcome)

    def _abandon(self, attempt: str) -> None:
        try:
            delete_attempt(self.store, self.manifests, self.rp, attempt)
        except Exception as exc:  # the orphan sweep will retry
            log.warning("could not clean compaction attempt %s: %s", attempt, exc)

    def delete_replaced(self, grace_ms: int) -> int:
        """Step 4 once ``grace_ms`` passed since the last swap; returns how many attempts went.
        The entries are DELETE_SEGMENT_STARTED since the swap: objects first (one listing, the
        deletes in parallel), then one manifest update drops them all."""
        if not self.replaced:
            return 0
        wait = self.swapped_at + grace_ms / 1000 - time.monotonic()
        if wait > 0:
            if wait >= WAIT_SAID_S:  # no wait of more than a moment goes unsaid
                until = datetime.now() + timedelta(seconds=wait)
                log.info("%s: waiting %.0f s (until %s) before deleting %d segments replaced by "
                         "compaction: readers may still hold the old manifest", self.rp, wait,
                         f"{until:%H:%M:%S}", len(self.replaced))  # fmt: skip
            time.sleep(wait)
        prefixes = tuple(attempt_prefix(self.rp, s.base_offset, s.attempt)
                         for s in self.replaced)  # fmt: skip
        listed = self.store.list(self.rp.prefix)
        keys = [i.key for i in listed if i.key.startswith(prefixes)]
        first = [k for k in keys if k.startswith(prefixes[0])]
        for key in first:
            self.store.delete(key)
        crash_point("compact-mid-delete")
        with ThreadPoolExecutor(max_workers=DELETE_THREADS) as pool:
            list(pool.map(self.store.delete, [k for k in keys if k not in first]))
        doomed = {s.attempt for s in self.replaced}

        def drop(manifest: PartitionManifest) -> bool:
            before = len(manifest.segments)
            manifest.segments = [s for s in manifest.segments if s.attempt not in doomed]
            return len(manifest.segments) != before

        self.manifests.update(self.rp, drop)
        self.replaced.clear()
        return len(doomed)


def _add(manifest: PartitionManifest, entry: RemoteSegment) -> bool:
    if manifest.find(entry.attempt) is not None:
        return False  # our earlier put landed though its answer was lost
    manifest.segments.append(entry)
    return True
