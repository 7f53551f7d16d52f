"""ManifestStore.partitions on every backend, in both layouts (``<topic>-<topicId>/<partition>/``
and the one before topic ids, ``<topic>-<partition>/``): delimiter listings of the root's and
the topic folders' folders and one request per partition folder, never a listing of every object
under the store."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest

from kafkatier.storage.checkpoint.metadata import new_topic_id
from kafkatier.tiering.metadata.identity import RemotePartition
from kafkatier.tiering.metadata.manifest import MANIFEST_NAME, PartitionManifest, attempt_prefix
from kafkatier.tiering.metadata.manifest_store import ManifestCache, ManifestStore
from kafkatier.tiering.store import s3bucket
from kafkatier.tiering.store.object_store import ObjectStore
from kafkatier.tiering.store.requests import since
from kafkatier.tiering.store.s3store import S3Store

ORDERS, OTHER, OLD = new_topic_id(), new_topic_id(), new_topic_id()
REAL = sorted([
    RemotePartition("my-topic", 12, OTHER),
    RemotePartition("orders", 0, ORDERS),
    RemotePartition("orders", 1, ORDERS),
    RemotePartition("legacy", 3, OLD, legacy=True),  # a store written before topic ids
])  # fmt: skip
REQUESTS = {"list_prefixes": 3, "head": 4, "get_with_etag": 2}
"""The root and the two topic folders listed; a HEAD for each partition folder of a topic folder
(the three of REAL and orders 2); a GET of each legacy partition folder's manifest (its topic id
is inside): legacy-3 and orders-3, which has none."""


def _segment_objects(store: ObjectStore, rp: RemotePartition, count: int) -> None:
    for base in range(count):
        prefix = attempt_prefix(rp, base * 100, f"att{base}")
        for kind in ("log", "index"):
            store.put_bytes(prefix + kind, b"seg")


def _populate(store: ObjectStore) -> None:
    manifests = ManifestStore(store)
    for rp in REAL:
        if rp.legacy:  # written as the release before topic ids wrote it
            body = PartitionManifest(rp.topic, rp.partition, topic_id=rp.topic_id).to_bytes()
            store.put_bytes(rp.prefix + MANIFEST_NAME, body)
        else:
            manifests.update(rp, lambda m: True)  # creates the manifest
        _segment_objects(store, rp, 3)
    _segment_objects(store, RemotePartition("orders", 2, ORDERS), 2)  # no manifest yet
    store.put_bytes(f"notes/{MANIFEST_NAME}", b"{}")  # not a partition dir name
    store.put_bytes(f"orders-{ORDERS}/sub/{MANIFEST_NAME}", b"{}")  # not a partition number
    store.put_bytes(f"orders-3/sub/{MANIFEST_NAME}", b"{}")  # a manifest at the wrong depth
    store.put_bytes(f"orders-4-delete/{MANIFEST_NAME}", b"{}")  # Kafka's deleted-dir variant
    store.put_bytes(MANIFEST_NAME, b"{}")  # at the root, in no folder


class _Recording:
    """The store, with every call of the contract recorded by name; ``list`` is refused."""

    def __init__(self, store: ObjectStore) -> None:
        self._store = store
        self.calls: Counter[str] = Counter()
        self._lock = threading.Lock()  # partitions() HEADs from a few threads

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._store, name)
        if not callable(real):
            return real

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                self.calls[name] += 1
            if name == "list":
                raise AssertionError(f"full listing list{args}: partitions must not page keys")
            return real(*args, **kwargs)

        return call


def test_partitions_are_the_partition_folders_holding_a_manifest(store: ObjectStore) -> None:
    _populate(store)
    assert ManifestStore(store).partitions() == REAL
    late = RemotePartition("orders", 2, ORDERS)
    ManifestStore(store).update(late, lambda m: True)  # its manifest lands
    assert ManifestStore(store).partitions() == sorted([*REAL, late])
    assert ManifestStore(store).partitions(topic="orders", exclude={late.identity}) == REAL[2:]


def test_partitions_lists_folders_once_and_asks_once_per_candidate(store: ObjectStore) -> None:
    _populate(store)
    recording = _Recording(store)
    assert ManifestStore(recording).partitions() == REAL  # type: ignore[arg-type]
    assert recording.calls == REQUESTS


def test_with_a_cache_partitions_reads_each_manifest_once_for_the_loads_after_it(
    store: ObjectStore,
) -> None:
    """A caller that loads what it found (status, clean --remote, serve's remote-only topics)
    gives a cache: each candidate's manifest is read instead of HEADed, and the loads that
    follow send nothing."""
    _populate(store)
    recording = _Recording(store)
    manifests = ManifestStore(recording, cache=ManifestCache())  # type: ignore[arg-type]
    assert manifests.partitions() == REAL
    assert recording.calls == {"list_prefixes": REQUESTS["list_prefixes"],
                               "get_with_etag": REQUESTS["head"] + REQUESTS["get_with_etag"]}
    loaded = [manifests.load(rp)[0] for rp in REAL]
    assert [(m.topic, m.partition) for m in loaded] == [(rp.topic, rp.partition) for rp in REAL]
    assert sum(recording.calls.values()) == REQUESTS["list_prefixes"] + REQUESTS["head"] + 2


def test_partitions_of_an_empty_store(store: ObjectStore) -> None:
    recording = _Recording(store)
    assert ManifestStore(recording).partitions() == []  # type: ignore[arg-type]
    assert recording.calls == {"list_prefixes": 1}


def test_s3_requests_of_partitions_do_not_grow_with_segment_objects(
    s3_store: S3Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the real server: every ListObjectsV2 carries ``Delimiter=/``, and adding segment
    objects does not add a single request (a full listing would page through them all)."""
    monkeypatch.setattr(s3bucket, "LIST_PAGE_SIZE", 2)  # pages small enough to show growth
    _populate(s3_store)
    listings: list[dict[str, Any]] = []
    s3_store.client.meta.events.register(
        "before-parameter-build.s3.ListObjectsV2", lambda params, **_: listings.append(dict(params))
    )
    counted = s3_store.requests.snapshot()  # every request sent, boto3's and s3small's
    assert ManifestStore(s3_store).partitions() == REAL
    before = since(counted, s3_store.requests.snapshot())
    assert before["HeadObject"] == REQUESTS["head"]
    assert before["GetObject"] == REQUESTS["get_with_etag"]
    assert before["ListObjectsV2"] >= REQUESTS["list_prefixes"]  # pages of two folders
    for rp in REAL:
        _segment_objects(s3_store, rp, 10)
    counted = s3_store.requests.snapshot()
    assert ManifestStore(s3_store).partitions() == REAL
    assert since(counted, s3_store.requests.snapshot()) == before
    assert listings and all(p.get("Delimiter") == "/" for p in listings)
