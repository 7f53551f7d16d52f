"""The manifests of one remote store: found, read and committed by conditional put, each checked
against the topic incarnation it is read for (identity.py).

Every change is read-modify-write with ``If-Match`` on the manifest's entity tag (``If-None-Match:
*`` to create it), retried from a fresh read when another writer won: the manifest can only move
from one consistent state to the next. A manifest recording another topic id than the partition
it is read for is refused (:class:`TopicIdMismatchError`), so the remote state of a deleted topic
is never applied to a topic created again under its name.

A long-running sidecar keeps what it read and wrote in a :class:`ManifestCache`, so a pass over a
partition with nothing to do sends no request at all (Kafka's tiered storage keeps its remote
segment metadata in memory too). kafkatier's own commands are the only writers of the manifests
and every write is conditional: a stale cached manifest costs a failed write (412), after which
the entry is forgotten and read again; it never turns into a lost update.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kafkatier.storage.checkpoint.metadata import parse_partition_dir_name
from kafkatier.tiering.errors import PreconditionFailedError, TieringError, TopicIdMismatchError
from kafkatier.tiering.metadata.identity import (
    RemotePartition,
    parse_partition_folder,
    parse_topic_folder,
)
from kafkatier.tiering.metadata.manifest import PartitionManifest, manifest_key
from kafkatier.tiering.metadata.manifest_copy import COPY_NAME, ManifestCopies, read_copy
from kafkatier.tiering.store.object_store import ObjectStore

_HEAD_WORKERS = 8
"""Manifest requests in flight while listing partitions (a boto3 client pools 10+ connections)."""
_ABSENT = None


class ManifestCache:
    """The manifests one process last read or wrote, with their entity tags (module docstring).
    An entry of ``(None, None)`` records a manifest known not to exist yet. With ``copies``,
    what it learns is also kept in the local partitions' directories (manifest_copy.py)."""

    def __init__(self, copies: ManifestCopies | None = None) -> None:
        self._lock = threading.Lock()
        self._known: dict[str, tuple[bytes | None, str | None]] = {}
        self.copies = copies

    def get(self, key: str) -> tuple[bytes | None, str | None] | None:
        """The cached bytes and tag; None when nothing is known of ``key``."""
        with self._lock:
            return self._known.get(key)

    def put(self, key: str, data: bytes | None, etag: str | None, *, copy: bool = True) -> None:
        """Remember ``data`` (None: known not to exist, which empties the copy). ``copy``:
        also keep it in the partition directory; a manifest read from the store is copied
        only once :meth:`ManifestStore.load` has checked it (:meth:`checked`)."""
        with self._lock:
            self._known[key] = (data, etag)
        if self.copies is not None and (copy or data is None):
            self.copies.record(key, data, etag)

    def checked(self, key: str, data: bytes, etag: str | None, ok: bool) -> None:
        """The manifest ``data`` read from ``key`` passed its checks (``ok``: it is copied) or
        not (the copy keeps the last good one, marked superseded)."""
        if self.copies is None:
            return
        if ok and etag is not None:
            self.copies.record(key, data, etag)
        elif not ok:
            self.copies.supersede(key)

    def forget(self, key: str) -> None:
        with self._lock:
            self._known.pop(key, None)
        if self.copies is not None:
            self.copies.forget(key)

    def copy_again(self, key: str) -> None:
        """Keep the known manifest of ``key`` in its partition directory once more: for a
        partition created after the manifest was read (``restore`` builds it from it)."""
        with self._lock:
            known = self._known.get(key)
        if known is not None and self.copies is not None:
            self.copies.record(key, *known)


class ManifestStore:
    """Reads and conditionally updates the manifests of one remote store."""

    def __init__(
        self,
        store: ObjectStore,
        *,
        max_retries: int = 50,
        lock: threading.Lock | None = None,
        cache: ManifestCache | None = None,
    ) -> None:
        self.store = store
        self.cache = cache
        self.max_retries = max_retries
        # Writers sharing ``lock`` (one sidecar's upload threads) take turns instead of racing
        # each other to a 412, a sleep and a re-read; the conditional PUT still keeps apart
        # writers that do not share it (another sidecar).
        self.lock = lock if lock is not None else contextlib.nullcontext()

    def load(
        self, rp: RemotePartition, *, fresh: bool = False
    ) -> tuple[PartitionManifest, str | None]:
        """The manifest and its entity tag (None: not created yet, an empty manifest); from the
        cache unless ``fresh`` or unknown there. Each call parses anew: callers may change it."""
        key = manifest_key(rp)
        data, etag = self._fetch(key, fresh)
        if data is None:
            return PartitionManifest(rp.topic, rp.partition, topic_id=rp.topic_id), None
        try:
            manifest = checked_manifest(data, rp, key)
        except TieringError:
            if self.cache is not None:
                self.cache.checked(key, data, etag, ok=False)
            raise
        if self.cache is not None:
            self.cache.checked(key, data, etag, ok=True)
        return manifest, etag

    def forget(self, rp: RemotePartition) -> None:
        """Drop what is known of the manifest of ``rp`` (the cache's entry, the partition's
        copy): before kafkatier deletes it on purpose, so that its absence afterwards is not
        taken for a lost manifest (``_refuse_lost``), even after a crash half-way."""
        self._forget(manifest_key(rp))

    def copy_again(self, rp: RemotePartition) -> None:
        """Keep the manifest of ``rp`` as last read in its partition directory once more (when
        the cache keeps copies): for a partition created since (``restore`` builds it from it)."""
        if self.cache is not None:
            self.cache.copy_again(manifest_key(rp))

    def _fetch(self, key: str, fresh: bool) -> tuple[bytes | None, str | None]:
        cached = None if fresh or self.cache is None else self.cache.get(key)
        if cached is not None:
            return cached
        got = self.store.get_with_etag(key)
        if got is None:
            self._refuse_lost(key)
        found = (None, None) if got is None else got
        if self.cache is not None:
            self.cache.put(key, *found, copy=False)  # copied once load checked it
        return found

    def _refuse_lost(self, key: str) -> None:
        """A manifest the store no longer holds although this process, or the partition's copy
        of it, knew it naming segments: it was deleted by a hand or a lifecycle rule, not by
        kafkatier (whose commands keep a partition's manifest for its life). Taken as "not
        created yet", its segments' objects would be swept as strays, the only copy of the
        records that local retention already deleted; so nothing is done to the partition."""
        known = None if self.cache is None else self.cache.get(key)
        data = known[0] if known is not None else None
        if data is None and self.cache is not None and self.cache.copies is not None:
            data = self.cache.copies.known(key)
        if data is None:
            return
        try:
            segments = len(PartitionManifest.from_bytes(data, key).segments)
        except TieringError:
            return  # a copy that does not parse tells nothing
        if segments:
            raise TieringError(
                f"remote manifest {key} is gone from the store, which held {segments} segments "
                "by it: nothing is uploaded or deleted for the partition until it is put back "
                f"(its last known bytes are in the partition directory's {COPY_NAME}, after the "
                "JSON header line)",
                key=key,
            )

    def update(
        self, rp: RemotePartition, change: Callable[[PartitionManifest], bool]
    ) -> PartitionManifest:
        """Apply ``change`` (returns whether it changed anything) and commit it conditionally;
        on a lost race, re-read and re-apply. Returns the manifest as committed."""
        key = manifest_key(rp)
        for _ in range(self.max_retries):
            with self.lock:
                manifest, etag = self.load(rp)
                if not change(manifest):
                    return manifest
                data = manifest.to_bytes()
                try:
                    new_etag = self.store.put_bytes(
                        key, data, if_none_match=etag is None, if_match=etag
                    )
                except PreconditionFailedError:
                    self._forget(key)  # another writer moved it on, or the cache was stale
                except BaseException:
                    self._forget(key)  # the put may or may not have landed
                    raise
                else:
                    if self.cache is not None:
                        self.cache.put(key, data, new_etag)
                    return manifest
            time.sleep(0.01)
        raise TieringError("manifest update kept losing to other writers", key=key)

    def _forget(self, key: str) -> None:
        if self.cache is not None:
            self.cache.forget(key)

    def find(
        self, topic: str, partition: int, topic_id: str
    ) -> tuple[RemotePartition, PartitionManifest]:
        """Where the partition with ``topic_id`` keeps its remote data, and its manifest there:
        its own folder, unless only a manifest of the layout before topic ids exists and records
        this very id (then that one, in place). A legacy manifest of another id is another
        incarnation: left alone. One GET, a second when the own manifest does not exist."""
        own = RemotePartition.of(topic, partition, topic_id)
        manifest, etag = self.load(own)
        if own.legacy or etag is not None:
            return own, manifest
        legacy = RemotePartition(topic, partition, topic_id, legacy=True)
        got = self.store.get_with_etag(manifest_key(legacy))
        if got is not None:
            old = PartitionManifest.from_bytes(got[0], manifest_key(legacy))
            if old.topic_id == topic_id:
                return legacy, old
        return own, manifest

    def locate(self, topic: str, partition: int, topic_id: str) -> RemotePartition:
        """Where :meth:`find` finds the partition's remote data."""
        return self.find(topic, partition, topic_id)[0]

    def partitions(
        self, topic: str | None = None, exclude: Collection[tuple[str, int, str]] = (),
        exclude_topics: Collection[str] = (),
    ) -> list[RemotePartition]:  # fmt: skip
        """Every remote partition with a manifest, of every incarnation (of ``topic`` only, if
        given; none whose ``identity`` is in ``exclude`` or whose topic is in
        ``exclude_topics``, which the caller knows already, and for which nothing is sent). One
        delimiter listing of the root's folders and one of each topic folder, then one request
        per partition folder (a HEAD; a GET for a legacy folder, whose topic id is inside, and
        for every folder when this store has a cache: the manifests are then in it, for the
        caller's :meth:`load` that follows), so the cost follows the number of partitions, never
        the number of segment objects."""
        own: list[RemotePartition] = []
        legacy: list[tuple[str, int]] = []
        for folder in self.store.list_prefixes(""):
            name = folder.rstrip("/")
            if (parsed := parse_topic_folder(name)) is not None:
                if (topic is None or parsed[0] == topic) and parsed[0] not in exclude_topics:
                    own += self._topic_folder(folder, *parsed)
            elif (old := parse_partition_dir_name(name)) is not None and (
                topic is None or old[0] == topic
            ) and old[0] not in exclude_topics:
                legacy.append(old)
        own = [rp for rp in own if rp.identity not in exclude]
        if not own and not legacy:
            return []
        with ThreadPoolExecutor(min(_HEAD_WORKERS, len(own) + len(legacy))) as pool:
            present = list(pool.map(self._exists, own))
            found = [rp for rp, ok in zip(own, present, strict=True) if ok]
            found += [rp for rp in pool.map(self._legacy, legacy) if rp is not None]
        return sorted(rp for rp in found if rp.identity not in exclude)

    def _topic_folder(self, folder: str, topic: str, topic_id: str) -> list[RemotePartition]:
        partitions = (parse_partition_folder(p[len(folder):].rstrip("/"))
                      for p in self.store.list_prefixes(folder))  # fmt: skip
        return [RemotePartition(topic, p, topic_id) for p in partitions if p is not None]

    def _exists(self, rp: RemotePartition) -> bool:
        key = manifest_key(rp)
        if self.cache is None:
            return self.store.head(key) is not None
        return self._fetch(key, fresh=False)[0] is not None

    def _legacy(self, part: tuple[str, int]) -> RemotePartition | None:
        key = manifest_key(RemotePartition(*part, legacy=True))
        data, _ = self._fetch(key, fresh=False)
        if data is None:
            return None
        topic_id = PartitionManifest.from_bytes(data, key).topic_id
        return RemotePartition(*part, topic_id=topic_id, legacy=True)


def checked_manifest(data: bytes, rp: RemotePartition, key: str) -> PartitionManifest:
    """The manifest in ``data`` (read from ``key``), refused (a :class:`TieringError`) when it
    does not parse or belongs to another partition or incarnation than ``rp``."""
    manifest = PartitionManifest.from_bytes(data, key)
    check_identity(manifest, rp, key)
    return manifest


def check_identity(manifest: PartitionManifest, rp: RemotePartition, key: str) -> None:
    """Refuse a manifest that belongs to another partition or topic incarnation than ``rp``."""
    if (manifest.topic, manifest.partition) != (rp.topic, rp.partition):
        raise TopicIdMismatchError(
            f"the manifest is of {manifest.topic}-{manifest.partition}, not "
            f"{rp.topic}-{rp.partition}", key=key,
        )  # fmt: skip
    if rp.topic_id and manifest.topic_id and manifest.topic_id != rp.topic_id:
        raise TopicIdMismatchError(
            f"the manifest is of topic id {manifest.topic_id}, not {rp.topic_id} "
            f"({rp.topic}-{rp.partition} was deleted and created again?)", key=key,
        )  # fmt: skip


def copied_manifest(
    directory: Path, topic: str, partition: int, topic_id: str
) -> tuple[RemotePartition, PartitionManifest] | None:
    """The manifest copy kept in ``directory`` (manifest_copy.py), if there is a usable one."""
    rp = RemotePartition.of(topic, partition, topic_id)
    if rp.legacy:
        return None
    key = manifest_key(rp)
    found = read_copy(directory, key)
    if found is None:
        return None
    try:
        return rp, checked_manifest(found[0], rp, key)
    except TieringError:
        return None  # not what the store would hold for this partition: ask the store
