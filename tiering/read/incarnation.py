"""Which incarnation of a topic to read or restore when the remote store holds several.

A topic deleted and created again under its name leaves the old topic's remote data behind
under another topic id (identity.py). Readers and restores take the incarnation the local log
dir already holds, else the one asked for (``--topic-id``, the reader's ``topicId``), else the
only one there is; anything else is refused before a byte is written, with every candidate named.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from pathlib import Path

from kafkatier.storage.checkpoint.metadata import parse_partition_dir_name, partition_dir_name
from kafkatier.tiering.errors import TopicIdMismatchError
from kafkatier.tiering.metadata.identity import RemotePartition, topic_id_of
from kafkatier.tiering.metadata.manifest import PartitionManifest
from kafkatier.tiering.metadata.manifest_store import ManifestStore
from kafkatier.tiering.store.object_store import ObjectStore


def local_topic_ids(log_dir: Path, topic: str) -> set[str]:
    """The topic ids the partition directories of ``topic`` under ``log_dir`` record."""
    ids: set[str] = set()
    if not Path(log_dir).is_dir():
        return ids
    for child in Path(log_dir).iterdir():
        parsed = parse_partition_dir_name(child.name) if child.is_dir() else None
        if parsed is not None and parsed[0] == topic:
            ids.add(topic_id_of(child))
    return ids


def choose(
    remote: Iterable[RemotePartition],
    topic: str,
    *,
    local_ids: Collection[str] = (),
    wanted: str | None = None,
    where: str = "",
    hint: str = "choose one with --topic-id",
) -> list[RemotePartition]:
    """The remote partitions of the one incarnation of ``topic`` to use (module docstring)."""
    by_id: dict[str, list[RemotePartition]] = {}
    for rp in remote:
        if rp.topic == topic:
            by_id.setdefault(rp.topic_id, []).append(rp)
    held = sorted(set(local_ids) - {""}) or sorted(local_ids)
    if len(held) > 1:
        raise TopicIdMismatchError(
            f"the partitions of {topic} record different topic ids {held}", file=where)
    if wanted is not None and held and held[0] != wanted:
        raise TopicIdMismatchError(
            f"{where} holds {topic} with topic id {held[0]!r}, not {wanted!r}: restoring "
            "would mix two topics", topic=topic)  # fmt: skip
    pick = wanted if wanted is not None else held[0] if held else None
    if pick is None:
        if len(by_id) > 1:
            raise TopicIdMismatchError(
                f"the remote store holds {len(by_id)} incarnations of {topic} (deleted and "
                f"created again): {_describe(by_id)}; {hint}", topic=topic)
        return sorted(next(iter(by_id.values()), []))
    if pick not in by_id:
        if not by_id:
            return []
        raise TopicIdMismatchError(
            f"no remote data of {topic} with topic id {pick!r} (the store has "
            f"{_describe(by_id)}){' for ' + where if where and held else ''}", topic=topic)
    return sorted(by_id[pick])


def _describe(by_id: dict[str, list[RemotePartition]]) -> str:
    return ", ".join(f"topic id {tid or '(none)'}: {len(rps)} partitions"
                     for tid, rps in sorted(by_id.items()))  # fmt: skip


def incarnation_of(
    store: ObjectStore, log_dir: Path, topic: str, partition: int, *, hint: str
) -> tuple[RemotePartition, PartitionManifest]:
    """The remote data a reader of ``topic``-``partition`` under ``log_dir`` may use, with its
    manifest: the incarnation whose topic id the partition directory records; for a partition
    only the store has, the one :func:`choose` picks (``hint``: how to pick when it cannot)."""
    manifests = ManifestStore(store)
    directory = Path(log_dir) / partition_dir_name(topic, partition)
    if directory.is_dir():
        return manifests.find(topic, partition, topic_id_of(directory))
    found = choose(manifests.partitions(topic=topic), topic, where=str(log_dir), hint=hint,
                   local_ids=local_topic_ids(log_dir, topic))  # fmt: skip
    none_yet = RemotePartition.of(topic, partition, "")
    rp = next((r for r in found if r.partition == partition), none_yet)
    return rp, manifests.load(rp)[0]
