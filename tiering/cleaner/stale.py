"""The remote data of a deleted topic: found, and deleted when asked.

A topic deleted and created again under its name leaves the old incarnation's remote data behind
under its old topic id (``tiering.metadata.identity``); nothing reads or changes it as the new
topic's. Kafka deletes a deleted topic's remote data. kafkatier has no cluster to say that a
topic was deleted, and a remote prefix may be shared by another log dir holding a topic of the
same name under that very id, so the sidecar never deletes it by itself: ``kafkatier status``
lists it as stale, and ``kafkatier clean --remote --delete-stale`` deletes every incarnation of
a topic that the configured log dirs hold under another id (with ``--topic``, of a topic they
do not hold at all: ``clean_pass.RemotePass.run``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from kafkatier.tiering.copy.upload import delete_attempt
from kafkatier.tiering.crash import crash_point
from kafkatier.tiering.metadata.identity import RemotePartition
from kafkatier.tiering.metadata.manifest import manifest_key
from kafkatier.tiering.metadata.manifest_store import ManifestStore
from kafkatier.tiering.store.object_store import ObjectStore


def stale(
    remote: Iterable[RemotePartition], local: Collection[tuple[str, int, str]]
) -> list[RemotePartition]:
    """The remote partitions of topics that the local log dirs hold under another topic id
    (``local``: the ``identity`` of every local partition)."""
    ids: dict[str, set[str]] = {}
    for topic, _, topic_id in local:
        ids.setdefault(topic, set()).add(topic_id)
    return [rp for rp in remote if rp.topic in ids and rp.topic_id not in ids[rp.topic]]


def delete_incarnation(store: ObjectStore, rp: RemotePartition) -> int:
    """Delete one stale partition's remote data; returns how many segments it had. Each
    segment goes through Kafka's deletion lifecycle (DELETE_SEGMENT_STARTED, objects, entry
    dropped), then what else lies in the folder, the manifest last: a run killed on the way
    leaves a manifest naming only what is still there, and the next run finishes the job."""
    manifests = ManifestStore(store)
    manifest, etag = manifests.load(rp)
    if etag is None:
        return 0
    for seg in manifest.segments:
        delete_attempt(store, manifests, rp, seg.attempt)
    crash_point("stale-segments-deleted")
    key = manifest_key(rp)
    for info in store.list(rp.prefix):
        if info.key != key:
            store.delete(info.key)
    store.delete(key)
    return len(manifest.segments)
