"""One tiering pass over every partition of the configured log dirs.

Per partition of a topic with ``remote.storage.enable=true``, in order: sweep orphans, upload
each eligible segment not yet FINISHED remotely (oldest first, as Kafka's copier), apply local
retention against the fresh manifest, then total retention to the remote segments, then, for
topics whose ``cleanup.policy`` contains ``compact``, key compaction of the segments that exist
only remotely (``tiering.cleaner.compaction``: it cleans only when the topic's dirty ratio or
``max.compaction.lag.ms`` says so, as the local cleaner).
Partitions run in parallel on a thread pool (``remote.log.manager.copier.thread.pool.size``);
a failing partition is logged and counted, and the others carry on.

What a pass costs follows the work it finds, not the partitions that exist: a Tierer keeps the
manifests it read and wrote between passes (``ManifestCache``: an idle partition costs no request;
an upload costs its objects and one manifest read-modify-write), sweeps a partition's orphans
with a listing only the first time it sees the partition, after a failure there, or when the
manifest shows one, and skips partitions whose files have not changed since a pass left them
with nothing to do (quiet.py). The store's request counts per pass are in :class:`PassResult`.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from kafkatier.storage.errors import ConfigError, KafkaTierError, StorageError
from kafkatier.storage.log.tail_cache import TailCache
from kafkatier.tiering.cleaner.compaction import compact_remote
from kafkatier.tiering.cleaner.disable import delete_on_disable
from kafkatier.tiering.cleaner.retention import expire_remote
from kafkatier.tiering.cleaner.swap import GroupReplacer
from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.copy.local_retention import (
    check_remote_copies,
    delete_local,
    interrupted_deletes,
    locally_deletable,
    remove_deleted_leftovers,
)
from kafkatier.tiering.copy.orphans import has_orphans, sweep_orphans
from kafkatier.tiering.copy.upload import Uploader, new_owner
from kafkatier.tiering.errors import RemoteStoreError, TieringError
from kafkatier.tiering.metadata.identity import RemotePartition
from kafkatier.tiering.metadata.local import Candidate, LocalPartition, local_partitions
from kafkatier.tiering.metadata.manifest import PartitionManifest, manifest_key, now_ms
from kafkatier.tiering.metadata.manifest_copy import ManifestCopies
from kafkatier.tiering.metadata.manifest_store import ManifestCache, ManifestStore
from kafkatier.tiering.sidecar.quiet import (
    NEVER,
    LogDirCheckpoints,
    PartitionKey,
    QuietPartitions,
    next_due_ms,
    observe,
)
from kafkatier.tiering.sidecar.status import PartitionStatus, partition_status
from kafkatier.tiering.store.object_store import ObjectStore
from kafkatier.tiering.store.requests import since

log = logging.getLogger("kafkatier.tiering")
SEGMENTS_IN_FLIGHT = 2
COMPACTION_GRACE_MS = 1000
"""How long replaced remote segments outlive their swap, for readers holding the old manifest."""


@dataclass
class PartitionPass:
    """What one pass did to one partition."""

    topic: str
    partition: int
    uploaded_segments: int = 0
    uploaded_bytes: int = 0
    orphans_removed: int = 0
    local_segments_deleted: int = 0
    local_bytes_deleted: int = 0
    remote_segments_expired: int = 0
    remote_compactions: int = 0
    remote_records_removed: int = 0
    remote_bytes_before_compaction: int = 0
    remote_bytes_after_compaction: int = 0
    error: str | None = None
    skipped: bool = False
    """Quiet since an earlier pass (quiet.py): not opened, no request sent."""


@dataclass
class PassResult:
    partitions: list[PartitionPass] = field(default_factory=list)
    requests: dict[str, int] = field(default_factory=dict)
    """Requests the store sent during the pass, by kind (``GetObject``, ``PutObject``, ...)."""
    seconds: float = 0.0

    @property
    def failures(self) -> int:
        return sum(1 for p in self.partitions if p.error is not None)

    def total(self, name: str) -> int:
        return sum(int(getattr(p, name)) for p in self.partitions)


class Tierer:
    """Runs tiering passes for one configuration (one owner id per instance)."""

    def __init__(self, config: TieringConfig, store: ObjectStore | None = None) -> None:
        self.config = config
        self.store = store if store is not None else config.open_store()
        self.owner = new_owner()
        self.uploader = Uploader(self.store, self.owner)
        self.compaction_grace_ms = COMPACTION_GRACE_MS
        self._replaced: list[GroupReplacer] = []  # this pass's compactions, for step 4
        self._located: dict[tuple[str, int, str], RemotePartition] = {}
        self.cache = ManifestCache(ManifestCopies(config.log_dirs))  # status reads the copies
        self.uploader.cache = self.cache
        self.quiet = QuietPartitions()
        self.tails = TailCache()  # what the active segments said: a pass frames what is new
        self._swept: set[tuple[str, int, str]] = set()  # partitions swept by this process
        self.statuses: dict[tuple[str, int], PartitionStatus] = {}
        """The last status of every tiered partition a pass examined (the metrics' gauges)."""
        self.remote_compaction = True
        """False: upload and retention only (tests comparing compactions at one instant)."""
        self._store_failure: RemoteStoreError | None = None
        """Set by the first partition that found the store itself unusable: the others of the
        pass stop asking it (each would wait out the same retries)."""
        self.reached = False
        """Whether the store answered a request of this sidecar's (a manifest's read)."""

    def run_once(self) -> PassResult:
        started, before = time.monotonic(), self.store.requests.snapshot()
        keys = local_partitions(list(self.config.log_dirs))
        seen = {log_dir: LogDirCheckpoints(log_dir) for log_dir in {k[0] for k in keys}}
        now = now_ms()
        result = PassResult()
        with ThreadPoolExecutor(max_workers=max(self.config.threads, 1)) as pool:
            for outcome in pool.map(lambda k: self._partition(k, seen[k[0]], now), keys):
                if outcome is not None:
                    result.partitions.append(outcome)
        failure, self._store_failure = self._store_failure, None
        if failure is not None:  # the store itself, not a partition: the pass fails as a whole
            raise failure
        self._delete_replaced()
        result.requests = since(before, self.store.requests.snapshot())
        result.seconds = time.monotonic() - started
        return result

    def _delete_replaced(self) -> None:
        """Step 4 of this pass's remote compactions, after one grace counted from each swap
        (they ran in parallel, so at most about one grace in all). What fails here stays
        DELETE_SEGMENT_STARTED in the manifest, invisible to readers, for the next sweep."""
        replaced, self._replaced = self._replaced, []  # a pass overlapping this one keeps its own
        for replacer in replaced:
            try:
                replacer.delete_replaced(self.compaction_grace_ms)
            except Exception:
                log.exception("deleting objects replaced by compaction of %s-%d failed",
                              replacer.topic, replacer.partition)  # fmt: skip

    def _partition(
        self, key: PartitionKey, seen: LogDirCheckpoints, now: int
    ) -> PartitionPass | None:
        """One partition's part of the pass; None for a partition that is not tiered."""
        log_dir, topic, partition = key
        if self._store_failure is not None:
            return None
        quiet = self.quiet.skip(key, seen, now)
        if quiet is not None:
            return PartitionPass(topic, partition, skipped=True) if quiet else None
        observed = observe(key, seen)
        part = _open(log_dir, topic, partition, self.tails)
        if part is None:
            return None
        outcome = PartitionPass(topic, partition)
        with part:
            tiered = part.config.remote_storage_enable
            if not tiered and not part.config.remote_log_delete_on_disable:
                self.quiet.record(key, seen, observed, part, NEVER)
                return None
            try:
                due = self._tier(part, outcome) if tiered else self._disabled(part, outcome)
            except RemoteStoreError as exc:
                self._store_failure = exc
                self.quiet.forget(key)
                return None
            except Exception as exc:  # a known fault is one line, a bug also its traceback
                known = isinstance(exc, KafkaTierError) and not log.isEnabledFor(logging.DEBUG)
                log.error("tiering %s-%d failed: %s", topic, partition, exc, exc_info=not known)
                outcome.error = f"{type(exc).__name__}: {exc}"
                self._swept.discard(part.remote.identity)  # what failed may have left strays
                due = None
            if due is None:
                self.quiet.forget(key)
            else:
                self.quiet.record(key, seen, observed, part, due)
        return outcome

    def _tier(self, part: LocalPartition, outcome: PartitionPass) -> int | None:
        """Tier one partition (module docstring); returns until when it is quiet (quiet.py),
        None when something is left to do."""
        manifests = ManifestStore(self.store, cache=self.cache)
        part.remote = self._locate(manifests, part)
        manifest, _ = manifests.load(part.remote)
        self.reached = True
        grace = self.config.orphan_grace_ms
        if self._needs_sweep(part.remote, manifest):
            sweep = sweep_orphans(self.store, part.remote, owner=self.owner, grace_ms=grace,
                                  active=self.uploader.active, cache=self.cache,
                                  local_start=part.first_local_offset())  # fmt: skip
            outcome.orphans_removed = sweep.removed
            if not sweep.waiting:  # else: again next pass, when the grace may have passed
                self._swept.add(part.remote.identity)
            manifest, _ = manifests.load(part.remote)
        candidates = part.candidates()
        _check_not_diverged(part, manifest, candidates)
        all_closed_eligible = len(candidates) == max(len(part.segments) - 1, 0)
        pending = _pending(part, manifest, candidates)
        # A few segments in flight per partition, oldest first: the remote log may have a
        # short-lived gap, which readers treat as its end (PartitionManifest.contiguous).
        with ThreadPoolExecutor(max_workers=SEGMENTS_IN_FLIGHT) as pool:
            for entry in pool.map(lambda c: self.uploader.upload(part, c), pending):
                if entry is not None:
                    outcome.uploaded_segments += 1
                    outcome.uploaded_bytes += sum(f.size for f in entry.files.values())
        manifest = self._delete_local(manifests, part, outcome)
        highest = manifest.highest_offset
        local_only = sum(s.size for s in part.segments if s.base_offset > highest)
        outcome.remote_segments_expired = expire_remote(
            self.store, part, now_ms(), local_only, cache=self.cache
        )
        if part.config.is_compacted and self.remote_compaction:
            self._compact(part, outcome)
        manifest, _ = manifests.load(part.remote)
        self.statuses[(part.topic, part.partition)] = partition_status(
            part, self.store, part.remote, manifest=manifest
        )
        busy = (outcome.remote_compactions or not all_closed_eligible
                or _pending(part, manifest, candidates)
                or has_orphans(manifest, self.owner, grace))  # fmt: skip
        return None if busy else next_due_ms(part, manifest, grace, now_ms())

    def _disabled(self, part: LocalPartition, outcome: PartitionPass) -> int:
        """Remote storage turned off with remote.log.delete.on.disable: its data deleted
        (tiering/cleaner/disable.py); quiet for ever after, unless the partition changes."""
        manifests = ManifestStore(self.store, cache=self.cache)
        part.remote = self._locate(manifests, part)
        outcome.remote_segments_expired = delete_on_disable(self.store, manifests, part.remote)
        self.reached = True
        return NEVER

    def _needs_sweep(self, rp: RemotePartition, manifest: PartitionManifest) -> bool:
        """A listing sweep (orphans.py) the first time this process sees a partition (a run
        that died may have left objects no entry names), after a failure there, until no
        unnamed attempt waits out its grace, or when the manifest itself shows an orphan."""
        first = rp.identity not in self._swept
        return first or has_orphans(manifest, self.owner, self.config.orphan_grace_ms)

    def _delete_local(
        self, manifests: ManifestStore, part: LocalPartition, outcome: PartitionPass
    ) -> PartitionManifest:
        """Local retention; a deletion is decided on a manifest read afresh (never a cached
        one), so it costs a request only when local data is about to go."""
        manifest, _ = manifests.load(part.remote)
        if interrupted_deletes(part, manifest) or locally_deletable(part, manifest, now_ms()):
            manifest, _ = manifests.load(part.remote, fresh=True)
        doomed = interrupted_deletes(part, manifest)
        doomed += locally_deletable(part, manifest, now_ms())[len(doomed) :]
        check_remote_copies(self.store, part.remote, manifest, doomed)
        outcome.local_segments_deleted = len(doomed)
        outcome.local_bytes_deleted = delete_local(part, doomed)
        remove_deleted_leftovers(part)
        return manifest

    def _locate(self, manifests: ManifestStore, part: LocalPartition) -> RemotePartition:
        """Where the partition's incarnation lives remotely (``ManifestStore.locate``), found
        once per topic id: only a store written before topic ids were in the layout can move
        it away from its own folder, and never after the first lookup."""
        key = (part.topic, part.partition, part.topic_id())
        found = self._located.get(key)
        if found is None:
            found = self._located[key] = manifests.locate(*key)
        return found

    def _compact(self, part: LocalPartition, outcome: PartitionPass) -> None:
        done = compact_remote(self.store, part.remote, config=part.config,
                              local=part, now_ms=now_ms(), owner=self.owner,
                              deferred=self._replaced, cache=self.cache)  # fmt: skip
        if done.cleaned:
            outcome.remote_compactions += 1
            outcome.remote_records_removed += done.records_removed
            outcome.remote_bytes_before_compaction += done.bytes_before
            outcome.remote_bytes_after_compaction += done.bytes_after


def _pending(
    part: LocalPartition, manifest: PartitionManifest, candidates: list[Candidate]
) -> list[Candidate]:
    """Eligible segments not yet FINISHED remotely, except those wholly below the log start
    offset (DeleteRecords, or retention already applied remotely): total retention would expire
    them in this same pass (``end_offset < log start``, as ``expired_segments``); none once
    ``remote.log.copy.disable`` is set."""
    if part.config.remote_log_copy_disable:
        return []
    done = {s.base_offset for s in manifest.finished()}
    start = max(manifest.log_start_offset, part.log_start_offset())
    return [c for c in candidates if c.base_offset not in done and c.next_base > start]


def _check_not_diverged(
    part: LocalPartition, manifest: PartitionManifest, candidates: list[Candidate]
) -> None:
    """Refuse a local log changed below what was tiered. Segments are copied whole, in order,
    and remote compaction keeps a group's end offset, so every closed local segment lies either
    wholly within the remote copy's range or wholly past it; one that starts within it and ends
    past it was written after the local log was cut back (its newest segments removed by hand
    and the offsets written again). Uploaded, it overlapped a FINISHED entry holding other
    records of the same offsets, and a restore gave either history. (A rewrite that ends
    exactly on the old segments' boundaries cannot be told apart by offsets.)"""
    highest = manifest.highest_offset
    for c in candidates:
        if c.base_offset <= highest < c.next_base - 1:
            raise TieringError(
                f"local segment {c.base_offset} of {part.topic}-{part.partition} holds offsets "
                f"{c.base_offset}..{c.next_base - 1} but the remote copy already holds offsets "
                f"up to {highest}: the local log was changed below what was tiered (segments "
                "removed and their offsets written again); nothing is uploaded for the "
                "partition until one side is set right (restore the partition from the remote "
                "copy, or move the local records to a new topic)",
                key=manifest_key(part.remote),
            )


def _open(log_dir: Path, topic: str, partition: int, tails: TailCache) -> LocalPartition | None:
    try:
        return LocalPartition(log_dir, topic, partition, tails=tails)
    except ConfigError:
        log.warning("bad topic config for %s in %s: not tiered", topic, log_dir)
    except (OSError, StorageError) as exc:  # a partition being created or deleted right now
        log.warning("skipping %s-%d this pass: %s", topic, partition, exc)
    return None
