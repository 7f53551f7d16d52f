"""Remote storage turned off with ``remote.log.delete.on.disable=true`` (Kafka 3.9, KIP-950):
the sidecar deletes the partition's remote data, as Kafka's ``RemoteLogManager.stopPartitions``
does with ``deleteRemoteLog``; the topic is local-only from then on, its log start the local
one. Turning remote storage off without it is refused when the setting is saved
(``TopicConfigStore.update``), as Kafka refuses it."""

from __future__ import annotations

from kafkatier.tiering.cleaner.stale import delete_incarnation
from kafkatier.tiering.crash import crash_point
from kafkatier.tiering.metadata.identity import RemotePartition
from kafkatier.tiering.metadata.manifest_store import ManifestStore
from kafkatier.tiering.store.object_store import ObjectStore


def delete_on_disable(store: ObjectStore, manifests: ManifestStore, rp: RemotePartition) -> int:
    """Delete what the store holds of the partition's incarnation ``rp`` (each segment through
    Kafka's deletion lifecycle, the manifest last: ``delete_incarnation``, which a killed run
    leaves for the next pass to finish); returns how many segments it had."""
    _, etag = manifests.load(rp)  # this process's cache knows it gone after a deletion
    if etag is None:
        return 0
    manifests.forget(rp)  # first: a run killed after the manifest went must find nothing lost
    deleted = delete_incarnation(store, rp)
    crash_point("disabled-remote-deleted")
    manifests.load(rp, fresh=True)  # known gone from now on: later passes send nothing
    return deleted
