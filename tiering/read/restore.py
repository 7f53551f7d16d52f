"""Rebuilding partition directories from the remote store, with the original offsets.

For each partition the FINISHED segments of its manifest (from the one holding ``--from-offset``
or the first whose max timestamp reaches ``--from-timestamp``) are downloaded in parallel as
``<base>.log``, ``.index``, ``.timeindex``, ``.txnindex`` and ``<end+1>.snapshot``; then the
partition's ``leader-epoch-checkpoint`` (the segments' epochs, truncated at the restored log
start), ``partition.metadata`` (the topic id), the topic's configuration file and the log dir's
``meta.properties``, ``recovery-point-offset-checkpoint`` and, when the log start is above 0,
``log-start-offset-checkpoint`` are written, merged with what the target log dir already holds.
Once every partition of the topic's recorded count (the manifests' ``topic_partitions``) is in
the log dir, the count is recorded there again, so that writers catch a partition directory
that later goes missing; a restore of some partitions only records none (they are read as
they are).

Every object lands in a staging directory first, its size and SHA-256 checked against the
manifest, and is then renamed into place (``downloads.py``): a file in the partition directory
is always complete and verified, so an interrupted restore resumes by skipping the files that
already match; an index or snapshot object missing or damaged in the store is left out, and
the partition's first open rebuilds it from the segment, as Kafka rebuilds lost indexes.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from kafkatier.storage.checkpoint.checkpoint_file import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    OffsetCheckpointFile,
)
from kafkatier.storage.checkpoint.leader_epoch import LeaderEpochFileCache
from kafkatier.storage.checkpoint.metadata import (
    META_PROPERTIES_FILE,
    MetaProperties,
    PartitionMetadataFile,
    new_topic_id,
    partition_dir_name,
)
from kafkatier.storage.config.topic_files import TopicConfigStore
from kafkatier.storage.fsutil import fitted_name, fsync_dir
from kafkatier.tiering.errors import TieringError
from kafkatier.tiering.metadata.identity import RemotePartition, topic_id_of
from kafkatier.tiering.metadata.local import (
    LEADER_EPOCH_CHECKPOINT,
    PARTITION_METADATA,
)
from kafkatier.tiering.metadata.manifest import (
    PartitionManifest,
    RemoteSegment,
)
from kafkatier.tiering.metadata.manifest_copy import ManifestCopies
from kafkatier.tiering.metadata.manifest_store import ManifestCache, ManifestStore
from kafkatier.tiering.read.downloads import (
    LEFT_OUT,
    drop_indexes,
    fetch_or_leave_out,
    plan_downloads,
)
from kafkatier.tiering.read.incarnation import choose, local_topic_ids
from kafkatier.tiering.store.object_store import ObjectStore, Progress

STAGING = ".kafkatier-restore"
STAGING_OBJECTS = "objects"  # under STAGING: downloads before their checks pass
PARTIAL_SUFFIX = ".partial"  # a new partition being restored, under STAGING


@dataclass
class RestoreResult:
    topic: str
    partition: int
    segments: int = 0
    files_downloaded: int = 0
    files_skipped: int = 0
    bytes_downloaded: int = 0
    log_start_offset: int = 0
    log_end_offset: int = 0
    restored: bool = False
    """The partition's folder was written (False: nothing of it was selected)."""
    in_place: bool = False
    """The partition's folder existed and was completed where it is."""


def select_segments(
    manifest: PartitionManifest, from_offset: int | None, from_timestamp: int | None
) -> list[RemoteSegment]:
    """The FINISHED segments to restore (module docstring), up to any gap in offsets."""
    chain = manifest.contiguous()
    if from_offset is not None:
        return [s for s in chain if s.end_offset >= from_offset]
    if from_timestamp is not None:
        first = next((i for i, s in enumerate(chain) if s.max_timestamp >= from_timestamp), None)
        return [] if first is None else chain[first:]
    return chain


def restore_partition(
    store: ObjectStore,
    topic: str,
    partition: int,
    log_dir: Path,
    *,
    from_offset: int | None = None,
    from_timestamp: int | None = None,
    threads: int = 4,
    progress: Progress | None = None,
    topic_id: str | None = None,
) -> RestoreResult:
    """Restore one partition of the incarnation :func:`incarnation.choose` picks."""
    manifests = _copying_store(store, log_dir)
    found = choose(manifests.partitions(topic=topic), topic, wanted=topic_id, where=str(log_dir),
                   local_ids=local_topic_ids(log_dir, topic))  # fmt: skip
    rp = next((r for r in found if r.partition == partition), None)
    if rp is None:
        raise TieringError("no remote data for partition", topic=topic, partition=partition)
    manifest, _ = manifests.load(rp)
    result = _restore(store, rp, manifest, Path(log_dir), from_offset, from_timestamp, threads,
                      progress)  # fmt: skip
    manifests.copy_again(rp)  # its directory is in place now
    return result


def _copying_store(store: ObjectStore, log_dir: Path) -> ManifestStore:
    """The manifests, each one read once; the copy of each restored partition's is kept in its
    directory (manifest_copy.py), so ``status`` right after a restore sends no request for it."""
    return ManifestStore(store, cache=ManifestCache(ManifestCopies([Path(log_dir)])))


def _restore(
    store: ObjectStore,
    rp: RemotePartition,
    manifest: PartitionManifest,
    log_dir: Path,
    from_offset: int | None,
    from_timestamp: int | None,
    threads: int,
    progress: Progress | None,
) -> RestoreResult:
    topic, partition = manifest.topic, manifest.partition
    segments = select_segments(manifest, from_offset, from_timestamp)
    result = RestoreResult(topic, partition, segments=len(segments))
    live = log_dir / partition_dir_name(topic, partition)
    # A new partition is built beside the log dir's partitions and renamed in whole at the end
    # (a failure such as a full disk leaves nothing half-restored where a broker or reader
    # looks; the next restore resumes in it); an existing one is completed in place.
    result.in_place = live.exists()
    partial = log_dir / STAGING / fitted_name(live.name, PARTIAL_SUFFIX)
    directory = live if result.in_place else partial
    objects = log_dir / STAGING / STAGING_OBJECTS / live.name
    _restore_into(store, rp, manifest, segments, (directory, objects), result, from_offset,
                  threads, progress)  # fmt: skip
    if result.restored and directory != live:
        os.rename(directory, live)
        fsync_dir(log_dir)
    return result


def _restore_into(
    store: ObjectStore,
    rp: RemotePartition,
    manifest: PartitionManifest,
    segments: list[RemoteSegment],
    paths: tuple[Path, Path],
    result: RestoreResult,
    from_offset: int | None,
    threads: int,
    progress: Progress | None,
) -> None:
    """Download ``segments`` into ``paths[0]`` (each object through ``paths[1]``, where it is
    checked) and write its partition files."""
    directory, staging = paths
    if not segments:
        if manifest.finished():  # the filters left nothing of what there is
            return
        # Every remote segment expired: the partition is empty at its log start, as a broker's
        # is once retention took all; starting it at 0 would hand out its offsets again.
        directory.mkdir(parents=True, exist_ok=True)
        result.log_start_offset = result.log_end_offset = manifest.log_start_offset
        result.restored = True
        _write_partition_files(rp, manifest, [], directory, manifest.log_start_offset)
        return
    directory.mkdir(parents=True, exist_ok=True)
    # largest first, so the small index and snapshot objects fill in beside the last .log
    plan = sorted(plan_downloads(rp, segments, directory), key=lambda d: -d.meta.size)
    try:
        with ThreadPoolExecutor(max_workers=max(threads, 1)) as pool:
            sizes = list(pool.map(lambda d: fetch_or_leave_out(store, d, staging, progress),
                                  plan))  # fmt: skip
    finally:  # a failed download's part is not kept: a full disk gets its space back
        shutil.rmtree(staging, ignore_errors=True)
    drop_indexes([d.target for d, n in zip(plan, sizes, strict=True) if n == LEFT_OUT])
    fsync_dir(directory)  # the renames, before any checkpoint names the data
    got = [n for n in sizes if n is not None and n >= 0]  # an empty .txnindex is 0 bytes
    result.files_downloaded = len(got)
    result.files_skipped = len(sizes) - len(got)
    result.bytes_downloaded = sum(got)
    start = max(manifest.log_start_offset, segments[0].base_offset, from_offset or 0)
    result.log_start_offset = start
    result.log_end_offset = segments[-1].end_offset + 1
    result.restored = True
    _write_partition_files(rp, manifest, segments, directory, start)


def _all(*jobs: Callable[[], object]) -> None:
    """Run independent metadata writes together: each is an atomic, fsynced replace of its
    own file, so their order does not matter, only that all follow the data; together their
    fsyncs overlap instead of adding up."""
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        for future in [pool.submit(job) for job in jobs]:
            future.result()


def _write_partition_files(
    rp: RemotePartition,
    manifest: PartitionManifest,
    segments: list[RemoteSegment],
    directory: Path,
    start: int,
) -> None:
    def epochs() -> None:
        cache = LeaderEpochFileCache(directory / LEADER_EPOCH_CHECKPOINT)
        cache.clear()
        for seg in segments:
            cache.assign_all(seg.leader_epochs)
        cache.truncate_from_start(start)
        cache.flush()

    topic_id = manifest.topic_id or rp.topic_id or new_topic_id()
    _all(epochs, lambda: PartitionMetadataFile(directory / PARTITION_METADATA).write(topic_id))


def write_log_dir_files(log_dir: Path, results: list[RestoreResult], config: dict[str, str],
                        topic: str, *, keep_staging: bool = False) -> None:
    """Root files of the target log dir, merged with any it already has (module docstring);
    ``keep_staging``: a partition failed, and its part-built folder is where it resumes."""
    log_dir = Path(log_dir)
    jobs: list[Callable[[], object]] = []
    if not (log_dir / META_PROPERTIES_FILE).exists():
        jobs.append(lambda: MetaProperties.new_kraft(node_id=0).write(
            log_dir / META_PROPERTIES_FILE))  # fmt: skip
    if config:
        jobs.append(lambda: TopicConfigStore(log_dir).update(topic, config, "remote manifest"))
    done = [r for r in results if r.restored]
    ends = {(r.topic, r.partition): r.log_end_offset for r in done}
    # a partition completed in place may hold flushed local records past the remote copy
    higher = {(r.topic, r.partition) for r in done if r.in_place}
    jobs.append(lambda: _merge_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT, ends, higher))
    # every restored partition's start, 0 included: an earlier restore --from-offset left a
    # higher one there, which would hide the records this restore brought back
    starts = {(r.topic, r.partition): r.log_start_offset for r in done}
    if any(starts.values()) or (log_dir / LOG_START_OFFSET_CHECKPOINT).exists():
        jobs.append(lambda: _merge_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT, starts))
    _all(*jobs)
    if not keep_staging:
        shutil.rmtree(log_dir / STAGING, ignore_errors=True)


def _merge_checkpoint(
    path: Path,
    updates: dict[tuple[str, int], int],
    keep_higher: frozenset[tuple[str, int]] | set[tuple[str, int]] = frozenset(),
) -> None:
    """``updates`` over the file's entries, except that an entry of ``keep_higher`` never goes
    down."""
    file = OffsetCheckpointFile(path)
    current = file.read() if path.exists() else {}
    merged = {**current, **updates}
    for tp in keep_higher & current.keys():
        merged[tp] = max(current[tp], updates[tp])
    file.write(merged)


def restore_topic(
    store: ObjectStore,
    topic: str,
    log_dir: Path,
    *,
    partitions: list[int] | None = None,
    from_offset: int | None = None,
    from_timestamp: int | None = None,
    threads: int = 4,
    progress: Progress | None = None,
    on_partition: Callable[[RestoreResult], None] | None = None,
    topic_id: str | None = None,
) -> list[RestoreResult]:
    """Restore ``partitions`` (default: every partition with a manifest) of one incarnation
    of ``topic`` (:func:`incarnation.choose`: the one ``log_dir`` holds, else ``topic_id``, else
    the only one); refused before anything is written when that is not clear."""
    manifests = _copying_store(store, log_dir)
    found = choose(manifests.partitions(topic=topic), topic, wanted=topic_id, where=str(log_dir),
                   local_ids=local_topic_ids(log_dir, topic))  # fmt: skip
    numbers = [rp.partition for rp in found]
    wanted = found if partitions is None else [rp for rp in found if rp.partition in partitions]
    if partitions is not None and len(wanted) != len(partitions):
        missing = sorted(set(partitions) - set(numbers))
        raise TieringError("no remote data for partitions", topic=topic, partitions=missing)
    results: list[RestoreResult] = []
    configs: list[dict[str, str]] = []
    counts: list[int] = []

    def one(rp: RemotePartition) -> RestoreResult:
        manifest, _ = manifests.load(rp)
        configs.append(manifest.topic_config)
        if manifest.topic_partitions is not None:
            counts.append(manifest.topic_partitions)
        result = _restore(store, rp, manifest, Path(log_dir), from_offset, from_timestamp,
                          threads, progress)  # fmt: skip
        manifests.copy_again(rp)  # its directory is in place now
        return result

    # ``threads`` partitions at a time, each with ``threads`` downloads: a topic of many small
    # partitions costs round trips, which overlap instead of adding up.
    failure: BaseException | None = None
    with ThreadPoolExecutor(max_workers=max(threads, 1)) as pool:
        for future in [pool.submit(one, rp) for rp in wanted]:
            try:
                result = future.result()
            except Exception as exc:  # raised below, once the others have finished
                failure = failure or exc
                continue
            results.append(result)
            if on_partition is not None:
                on_partition(result)
    # The partitions renamed into place get the log dir's files even when another failed: a
    # partition folder in a log dir without meta.properties or checkpoints is one no broker
    # opens, and the failed one resumes on the next restore.
    if any(r.restored for r in results):  # nothing restored leaves DIR as it was
        Path(log_dir).mkdir(parents=True, exist_ok=True)  # as a broker creates a missing log dir
        write_log_dir_files(log_dir, results, next((c for c in configs if c), {}), topic,
                            keep_staging=failure is not None)  # fmt: skip
    if failure is not None:
        raise failure
    if counts:
        record_count(Path(log_dir), topic, max(counts))
    return results


def record_count(log_dir: Path, topic: str, count: int) -> None:
    """``count`` recorded as the topic's partition count in ``log_dir`` where all of its
    partitions are there, of one topic id (a partition with no remote manifest is not there:
    recording the count would make every writer refuse the topic until it came back)."""
    first = topic_id_of(log_dir / partition_dir_name(topic, 0))  # "": partition 0 not there
    if count < 1 or not first:  # below 1: a hand-edited manifest
        return
    # the first partition not there (its id "") ends the walk: a huge count costs nothing
    for p in range(1, count):
        if topic_id_of(log_dir / partition_dir_name(topic, p)) != first:
            return
    TopicConfigStore(log_dir).stamp(topic, first, count)
