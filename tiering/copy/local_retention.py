"""Local retention of tiered partitions: local segments go once their remote copy is durable.

Kafka's rules for topics with ``remote.storage.enable=true`` (kafka-format.md §10): the
``local.retention.bytes`` and ``local.retention.ms`` limits (``-2``: the total ``retention.*``)
select the oldest segments, each rule walking from the oldest and stopping at the first segment
that does not qualify; a segment also qualifies only if it is uploaded: a FINISHED remote copy of
exactly its offset range exists, and here additionally its ``.log`` has the size and SHA-256 the
manifest recorded (verified, not assumed). The active segment is never deleted.

With ``remote.log.copy.disable=true`` (Kafka 3.9) nothing more is uploaded and a segment
qualifies by the total ``retention.*`` alone, uploaded or not: the remote copy keeps what it had
(its own retention goes on), and the offsets between its end and the local start are a gap that
readers skip, as Kafka's.

Only the *local* log start moves: the partition's log start offset stays in the manifest, where
readers and restores find it. Segments wholly below that log start offset go whether uploaded or
not, once the manifest has it (tiering/cleaner/local_log_start.py, with this module's
``delete_local``).
The engine's retention (storage/cleaner/retention.py) works on a writer's in-memory ``Log`` (and
leaves tiered partitions to the sidecar); the sidecar is a separate process beside the writer, so it
deletes as that code does, on the files: the four segment files are renamed ``.deleted`` (the
``.log`` last, so a crash leaves a recognisable segment or none) and then unlinked; producer
snapshots below the new local start go too.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from kafkatier.storage.log.segment import LogSegment
from kafkatier.storage.producer.snapshot import DELETED_SUFFIX, list_snapshot_files
from kafkatier.tiering.crash import crash_point
from kafkatier.tiering.errors import CorruptRemoteObjectError
from kafkatier.tiering.metadata.identity import RemotePartition
from kafkatier.tiering.metadata.local import LocalPartition, sha256_file
from kafkatier.tiering.metadata.manifest import PartitionManifest, object_key
from kafkatier.tiering.store.object_store import ObjectStore


def locally_deletable(
    part: LocalPartition, manifest: PartitionManifest, now_ms: int
) -> list[LogSegment]:
    """The oldest local segments that local retention removes (module docstring)."""
    segs = part.segments[:-1]  # never the active segment
    cfg = part.config
    by_size = _size_prefix(part.segments, cfg.effective_local_retention_bytes)
    by_time = _time_prefix(segs, cfg.effective_local_retention_ms, now_ms)
    wanted = max(by_size, by_time)
    chosen: list[LogSegment] = []
    for i, seg in enumerate(segs[:wanted]):
        if not _may_go(part, seg, part.segments[i + 1].base_offset, manifest):
            break
        chosen.append(seg)
    return chosen


def _may_go(
    part: LocalPartition, seg: LogSegment, next_base: int, manifest: PartitionManifest
) -> bool:
    """Whether retention may delete ``seg``: once uploaded, or at any time once copying is
    disabled (Kafka's ``isSegmentEligibleForDeletion``: the remote copy then ends where it
    stopped, and the local log goes by the total retention)."""
    return part.config.remote_log_copy_disable or _uploaded(seg, next_base, manifest)


def _size_prefix(segments: list[LogSegment], retention: int) -> int:
    if retention < 0:
        return 0
    diff = sum(s.size for s in segments) - retention
    count = 0
    for seg in segments[:-1]:
        if diff - seg.size < 0:
            break
        diff -= seg.size
        count += 1
    return count


def _time_prefix(segments: list[LogSegment], retention: int, now_ms: int) -> int:
    if retention < 0:
        return 0
    count = 0
    for seg in segments:
        if now_ms - seg.largest_timestamp <= retention:
            break
        count += 1
    return count


def _uploaded(seg: LogSegment, next_base: int, manifest: PartitionManifest) -> bool:
    remote = manifest.finished_for(seg.base_offset)
    if remote is None or remote.end_offset != next_base - 1:
        return False
    meta = remote.files.get("log")
    if meta is None or meta.size != seg.size:
        return False
    return sha256_file(seg.log_path) == meta.sha256


def interrupted_deletes(part: LocalPartition, manifest: PartitionManifest) -> list[LogSegment]:
    """Live segments a crash caught mid-deletion: some of their files already renamed
    ``.deleted``. Only the oldest segments with a verified remote copy are ever deleted, so they
    are finished off (as Kafka completes deletions at startup) if that still holds."""
    found: list[LogSegment] = []
    segs = part.segments
    for i, seg in enumerate(segs[:-1]):
        started = any(p.with_name(p.name + DELETED_SUFFIX).exists() for p in _files(seg))
        if not started or not _may_go(part, seg, segs[i + 1].base_offset, manifest):
            break
        found.append(seg)
    return found


def remove_deleted_leftovers(part: LocalPartition) -> int:
    """Unlink ``.deleted`` files of segments no longer live (a crash between rename and unlink;
    the engine's delayed deletions below the local start are due by then too)."""
    live = {s.base_offset for s in part.segments}
    removed = 0
    for path in part.directory.iterdir():
        if _is_stale_deleted(path.name, live):
            path.unlink(missing_ok=True)
            removed += 1
    return removed


def _is_stale_deleted(name: str, live: set[int]) -> bool:
    """``<base>.<ext>.deleted`` of a segment or snapshot that is no longer live."""
    if not (name.endswith(DELETED_SUFFIX) and name[:20].isdigit() and name.count(".") == 2):
        return False
    return int(name[:20]) not in live


def _files(seg: LogSegment) -> list[Path]:
    return [seg.offset_index.path, seg.time_index.path, seg.txn_index.path, seg.log_path]


def delete_local(part: LocalPartition, doomed: list[LogSegment]) -> int:
    """Remove ``doomed`` (oldest first) and the snapshots below the new local start; returns
    the bytes freed."""
    freed = 0
    for seg in doomed:
        seg.close_handlers()
        renamed = []
        for path in _files(seg):
            target = path.with_name(path.name + DELETED_SUFFIX)
            with contextlib.suppress(FileNotFoundError):
                os.replace(path, target)
                renamed.append(target)
            crash_point("mid-local-delete")
        freed += seg.size
        for path in renamed:
            path.unlink(missing_ok=True)
        crash_point("after-local-delete")
        part.segments.remove(seg)
    if doomed:
        first = part.segments[0].base_offset
        for snap in list_snapshot_files(part.directory):
            if snap.offset < first:
                snap.delete_if_exists()
    return freed



def check_remote_copies(
    store: ObjectStore, rp: RemotePartition, manifest: PartitionManifest, doomed: list[LogSegment]
) -> None:
    """Before local segments go on the strength of the manifest: each one's remote ``.log``
    (the data; its indexes can be rebuilt from it) is there with the size and entity tag the
    manifest recorded (one HEAD per segment deleted), else :class:`CorruptRemoteObjectError`
    names the object and nothing is deleted. Segments below the log start have no copy to
    check: retention took them from both tiers."""
    copies = {seg.base_offset: seg for seg in manifest.finished()}
    for segment in doomed:
        seg = copies.get(segment.base_offset)
        meta = seg.files.get("log") if seg is not None else None
        if seg is None or meta is None:
            continue
        key = object_key(rp, seg, "log")
        info = store.head(key)
        if info is None or info.size != meta.size or (meta.etag and info.etag != meta.etag):
            found = "missing" if info is None else f"{info.size} bytes, etag {info.etag}"
            raise CorruptRemoteObjectError(
                f"remote copy differs from the manifest ({found}; manifest: {meta.size} bytes, "
                f"etag {meta.etag or '-'}): local segment kept",
                key=key, local=str(segment.log_path),
            )  # fmt: skip
