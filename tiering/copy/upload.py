"""Copying one eligible segment to the remote store, with Kafka's lifecycle
(tiering/metadata/manifest.py).

1. Upload the objects of a fresh attempt id (``<base>-<attempt>/<kind>``: the ``log``, the
   indexes and the producer snapshot, all at once).
2. Verify each object: its size and entity tag as the store answered must equal the local
   file's size and the tag computed locally (MD5, or S3's multipart MD5-of-MD5s), so every byte
   is known to have arrived without reading it back. Stores that hash while sending
   (``ObjectInfo.sha256`` set) do that check per part as the bytes go, reading the file once.
3. ONE conditional manifest write adds the segment as COPY_SEGMENT_FINISHED with sizes and
   SHA-256 checksums (the manifest written last is the commit point), on condition that no other
   attempt finished the same segment first, that no orphan sweep claimed this attempt
   (tiering/copy/orphans.py: ``abandoned``), and that the attempt is younger than
   ``MAX_ATTEMPT_MS``. Otherwise the attempt's objects are deleted.

So a segment costs its objects and one manifest write (Kafka's COPY_SEGMENT_STARTED intent is
not written: it would cost a second write per segment). A crash anywhere leaves either objects
no entry names (swept once older than the orphan grace) or a FINISHED entry whose objects all
exist: the manifest never calls a missing or partial object finished.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from kafkatier.tiering.crash import crash_point
from kafkatier.tiering.errors import RemoteVerifyError, TieringError
from kafkatier.tiering.metadata.identity import RemotePartition
from kafkatier.tiering.metadata.local import Candidate, LocalPartition, sha256_file
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
from kafkatier.tiering.store.object_store import ObjectStore, Progress

log = logging.getLogger("kafkatier.tiering")
MAX_ATTEMPT_MS = 24 * 3600 * 1000
"""An attempt older than this gives itself up instead of committing (orphans.py keeps its claims
on unnamed attempts for far longer)."""


def new_owner() -> str:
    """Identifies one sidecar run in the entries it starts (host, pid, random)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass
class Uploader:
    """Uploads the segments of partitions to one store on behalf of one owner."""

    store: ObjectStore
    owner: str
    progress: Progress | None = None
    manifest_lock: threading.Lock = field(default_factory=threading.Lock)
    cache: ManifestCache | None = None
    """The manifests a long-running sidecar knows (manifest_store.py), kept current."""
    active: set[str] = field(default_factory=set)
    """Attempts being uploaded right now (their objects are not orphans)."""

    @property
    def manifests(self) -> ManifestStore:
        return ManifestStore(self.store, lock=self.manifest_lock, cache=self.cache)

    def upload(self, part: LocalPartition, cand: Candidate) -> RemoteSegment | None:
        """Copy ``cand``; None when another attempt finished it first (this one is cleaned)."""
        entry = self._entry(part, cand)
        started = time.monotonic()
        self.active.add(entry.attempt)
        try:
            crash_point("after-started")
            try:
                files = self._put_objects(part, cand, entry)
            except Exception:
                self._remove_objects(part, cand, entry)
                raise
            crash_point("before-finished")
            committed = self._commit(part, entry, files, started)
        finally:
            self.active.discard(entry.attempt)
        if committed is None:
            self._remove_objects(part, cand, entry)
            return None
        crash_point("after-finished")
        log.info("uploaded %s-%d segment %d (%d bytes)", part.topic, part.partition,
                 cand.base_offset, cand.segment.size)
        return committed

    def _entry(self, part: LocalPartition, cand: Candidate) -> RemoteSegment:
        """The segment's entry as it will be committed (files and state set then)."""
        seg = cand.segment
        return RemoteSegment(
            base_offset=cand.base_offset,
            end_offset=cand.next_base - 1,
            max_timestamp=seg.max_timestamp,
            size=seg.size,
            state=SegmentState.COPY_SEGMENT_STARTED,
            attempt=uuid.uuid4().hex,
            owner=self.owner,
            updated_ms=now_ms(),
            leader_epochs=part.leader_epochs(cand.base_offset, cand.next_base),
        )

    def _put_objects(
        self, part: LocalPartition, cand: Candidate, entry: RemoteSegment
    ) -> dict[str, RemoteFile]:
        """Upload and verify the attempt's objects, all of them at once (the small index and
        snapshot objects ride along with the ``.log``)."""
        files = cand.files()
        if "log" not in files:
            raise _vanished(part, cand.segment.log_path)
        with ThreadPoolExecutor(max_workers=len(files)) as pool:
            done = pool.map(lambda kv: self._put_one(part, entry, *kv), files.items())
            try:
                return dict(zip(files, done, strict=True))
            except FileNotFoundError as exc:
                raise _vanished(part, Path(exc.filename or files["log"])) from None

    def _put_one(
        self, part: LocalPartition, entry: RemoteSegment, kind: str, path: Path
    ) -> RemoteFile:
        key = object_key(part.remote, entry, kind)
        size = path.stat().st_size
        info = self.store.put_file(key, path, progress=self.progress)
        if info.sha256:  # hashed while sent, the copy checked against those bytes by the store
            sha, expected = info.sha256, info.etag
        else:
            sha, expected = sha256_file(path), self.store.expected_etag(path)
        if info.size != size or info.etag != expected:
            raise RemoteVerifyError(
                f"uploaded object differs: size {info.size} vs {size}, etag {info.etag} vs "
                f"{expected}", key=key, file=str(path),
            )
        crash_point("mid-upload")
        return RemoteFile(size, sha, info.etag)

    def _commit(
        self,
        part: LocalPartition,
        entry: RemoteSegment,
        files: dict[str, RemoteFile],
        started: float,
    ) -> RemoteSegment | None:
        """Step 3 (module docstring); None when the attempt may not be committed."""
        outcome: list[RemoteSegment] = []
        overrides, count = part.topic_overrides(), part.recorded_partitions()
        log_start = part.log_start_offset()

        def finish(manifest: PartitionManifest) -> bool:
            outcome.clear()
            mine = manifest.find(entry.attempt)
            if mine is not None:  # our earlier put landed though its answer was lost
                if mine.finished and mine.files == files:
                    outcome.append(mine)
                return False
            too_old = (time.monotonic() - started) * 1000 >= MAX_ATTEMPT_MS
            if too_old or entry.attempt in manifest.abandoned:
                return False
            if manifest.finished_for(entry.base_offset) is not None:
                return False
            done = dataclasses.replace(entry, state=SegmentState.COPY_SEGMENT_FINISHED,
                                       files=files, updated_ms=now_ms())  # fmt: skip
            manifest.topic_config = overrides
            if count is not None:
                manifest.topic_partitions = count
            manifest.log_start_offset = max(manifest.log_start_offset, log_start)
            manifest.segments.append(done)
            outcome.append(done)
            return True

        self.manifests.update(part.remote, finish)
        return outcome[0] if outcome else None

    def _remove_objects(self, part: LocalPartition, cand: Candidate, entry: RemoteSegment) -> None:
        """Best effort: delete the uncommitted attempt's objects (else a sweep will)."""
        try:
            for kind in cand.files():
                self.store.delete(object_key(part.remote, entry, kind))
        except Exception as exc:
            log.warning("could not clean attempt %s: %s", entry.attempt, exc)


def _vanished(part: LocalPartition, path: Path) -> TieringError:
    """A segment file gone while it was being tiered: the partition deleted (a topic deleted
    by removing its directory), or another sidecar's local retention."""
    return TieringError(
        f"{part.topic}-{part.partition}: {path.name} is gone (the partition or the segment was "
        "deleted while it was being uploaded); nothing of it was committed", file=str(path),
    )  # fmt: skip


def delete_attempt(
    store: ObjectStore, manifests: ManifestStore, rp: RemotePartition, attempt: str
) -> None:
    """Kafka's deletion lifecycle for one attempt: DELETE_SEGMENT_STARTED committed, objects
    removed, then the entry dropped (DELETE_SEGMENT_FINISHED). Idempotent."""
    found: list[RemoteSegment] = []

    def mark(manifest: PartitionManifest) -> bool:
        entry = manifest.find(attempt)
        if entry is None:
            return False
        found.append(entry)
        if entry.state is SegmentState.DELETE_SEGMENT_STARTED:
            return False
        entry.state = SegmentState.DELETE_SEGMENT_STARTED
        entry.updated_ms = now_ms()
        return True

    manifests.update(rp, mark)
    base = found[0].base_offset if found else None
    if base is not None:
        for info in store.list(attempt_prefix(rp, base, attempt)):
            store.delete(info.key)
    crash_point("mid-delete")

    def drop(manifest: PartitionManifest) -> bool:
        before = len(manifest.segments)
        manifest.segments = [s for s in manifest.segments if s.attempt != attempt]
        return len(manifest.segments) != before

    manifests.update(rp, drop)


OnSegment = Callable[[RemoteSegment], None]
