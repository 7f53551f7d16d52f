"""A Kafka log directory (``log.dirs`` entry): partition directories plus the root files.

Root files (kafka-format.md §8): ``meta.properties`` (cluster and node identity),
``recovery-point-offset-checkpoint`` and ``log-start-offset-checkpoint`` (``topic partition offset``
lines), ``cleaner-offset-checkpoint`` (the cleaner's, issue 3) and ``.kafka_cleanshutdown``,
whose mere existence marks a clean shutdown. As a broker does, opening a log dir removes the
marker first, so a crash while it is open makes the next open recover every partition from its
recovery point; closing it flushes everything, writes the checkpoints and the marker last.

Durability between opens has two levels (see ``durability.py``): :meth:`LogDirectory.flush`,
Kafka's flush of every file, which moves the recovery points, and :meth:`LogDirectory.flush_data`,
what a writer needs before it acknowledges: the appended ``.log`` bytes and new file names. Both
touch only the partitions written since their last flush: in parallel threads, or for many
partitions with one syncfs of the filesystem where that is as strong (``flusher.py``).

Every partition stays open (its offsets, producer state and leader epochs in memory), but the
descriptors of its segments are counted by one :class:`~kafkatier.storage.file_budget.
FileBudget` (``log.max.open.files``; by default the process's, half its ``RLIMIT_NOFILE``): a
log dir of thousands of partitions keeps at most that many files open and mapped, closing the
least recently used idle ones and reopening them at their next use.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from kafkatier.storage.checkpoint.checkpoint_file import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    OffsetCheckpointFile,
    read_offsets_cached,
)
from kafkatier.storage.checkpoint.metadata import (
    CleanShutdownFile,
    MetaProperties,
    PartitionMetadataFile,
    new_topic_id,
    partition_dir_name,
)
from kafkatier.storage.config.internal_topics import managed_partition
from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.config.topic_files import TopicConfigStore
from kafkatier.storage.errors import CheckpointError, ConfigError
from kafkatier.storage.file_budget import FileBudget, process_budget, resolve_max_open_files
from kafkatier.storage.fsutil import fsync_tree, make_log_dir
from kafkatier.storage.log.creation import (
    check_room,
    commit_staged,
    complete_interrupted_creations,
    stage_partition,
    sync_staged,
)
from kafkatier.storage.log.flusher import SYNCFS_MIN_LOGS, FileSystemSync, Flusher
from kafkatier.storage.log.loader import new_log, open_log
from kafkatier.storage.log.log import Clock, Log, wall_clock_ms
from kafkatier.storage.log.partition_count import checked_count, recorded_count
from kafkatier.storage.log.segment import LogSegment

META_PROPERTIES = "meta.properties"
PARTITION_METADATA = "partition.metadata"
TopicPartition = tuple[str, int]
ConfigResolver = Callable[[str], LogConfig]
Checkpoints = tuple[dict[TopicPartition, int], dict[TopicPartition, int], dict[TopicPartition, int]]

logger = logging.getLogger(__name__)


class LogDirectory:
    """Every partition of one log dir, opened (and recovered) together, as Kafka's LogManager."""

    def __init__(
        self,
        path: Path,
        *,
        config_for: ConfigResolver | None = None,
        clock: Clock = wall_clock_ms,
        max_open_files: int | None = None,
    ) -> None:
        """``max_open_files``: ``log.max.open.files`` for this log dir alone (None or -1: the
        process's budget, derived from ``RLIMIT_NOFILE``)."""
        self.path = Path(path)
        self.file_budget = (
            process_budget()
            if max_open_files is None or max_open_files == -1
            else FileBudget(resolve_max_open_files(max_open_files))
        )
        self.topic_configs = TopicConfigStore(self.path)
        self.config_for: ConfigResolver = config_for or self.topic_configs.get
        self.clock = clock
        self.logs: dict[TopicPartition, Log] = {}
        self._flusher = Flusher()
        self._checkpointed: Checkpoints | None = None  # what this object last wrote
        make_log_dir(self.path)
        self._filesystem = FileSystemSync(self.path)  # before any file is opened: see its doc
        self._ensure_meta_properties()
        marker = CleanShutdownFile(self.path)
        self.had_clean_shutdown = marker.exists()
        marker.remove()
        complete_interrupted_creations(self.path)
        self._recovery_points = _read_or_reset(
            self.path / RECOVERY_POINT_CHECKPOINT, "resetting the recovery points to 0")
        self._log_starts = _read_or_reset(
            self.path / LOG_START_OFFSET_CHECKPOINT,
            "resetting each log start to its first segment's base offset")  # fmt: skip
        self.cleaner_offsets: dict[TopicPartition, int] = OffsetCheckpointFile(
            self.path / CLEANER_OFFSET_CHECKPOINT
        ).read()
        """First dirty offset per compacted partition (where the last cleaning ended)."""
        self._open_all()
        for topic, partition in self.logs:  # a crash in get_or_create can leave a dir without it
            self._ensure_partition_metadata(topic, partition)

    def _ensure_meta_properties(self) -> None:
        path = self.path / META_PROPERTIES
        if not path.exists():
            MetaProperties.new_kraft(node_id=0).write(path)
        else:  # one a broker would refuse to start on is said, before anything is written
            MetaProperties.read(path)

    def _open_all(self) -> None:
        """Open (and recover) every partition directory, one after the other in this thread.
        Opening syncs nothing (a recovery's producer snapshots and epoch checkpoints are synced
        by the log's next flush), so the flush threads it ran in before only queued for the
        GIL: a clean open of 1,024 partitions took 1.04-1.24 s from them against 0.46-0.61 s
        in one, of 4,096 4.07-4.30 s against 1.91-1.97 s; 1,024 partitions recovering their
        active segments 2.9-3.6 s against 1.6-2.3 s, and with the page cache dropped first
        3.7-4.3 s against 2.1-2.5 s (alternating, ad hoc; the threads' hand-offs made 611,051
        futex calls in a clean open of 1,024)."""
        for child in sorted(self.path.iterdir()):
            parsed = managed_partition(child.name) if child.is_dir() else None
            if parsed is not None:  # KRaft's metadata log is skipped, as Kafka's LogManager does
                self.logs[parsed] = self._open(parsed)

    def _open(self, tp: TopicPartition) -> Log:
        return open_log(
            self.path / partition_dir_name(*tp),
            self.config_for(tp[0]),
            recovery_point=self._recovery_points.get(tp, 0),
            log_start_offset=self._log_starts.get(tp, 0),
            clean_shutdown=self.had_clean_shutdown,
            clock=self.clock,
            budget=self.file_budget,
        )

    def __iter__(self) -> Iterator[Log]:
        return iter(self.logs.values())

    def topics(self) -> dict[str, int]:
        """Topic name -> partition count found on disk."""
        counts: dict[str, int] = {}
        for topic, partition in self.logs:
            counts[topic] = max(counts.get(topic, 0), partition + 1)
        return counts

    def get(self, topic: str, partition: int) -> Log | None:
        return self.logs.get((topic, partition))

    def get_or_create(self, topic: str, partition: int) -> Log:
        """The partition's log; a new one is created as by :meth:`create_partitions`."""
        tp = (topic, partition)
        if tp not in self.logs:
            self._create(topic, [partition])
            topic_id = self.topic_id(topic)
            if topic_id is not None:  # the count is not known: an unstamped file is stamped
                self.topic_configs.stamp(topic, topic_id, None)
        return self.logs[tp]

    def partition_count(self, topic: str) -> int | None:
        """An existing topic's partition count for a writer (None: no such topic), refused
        while a partition's directory is missing (``partition_count.checked_count``)."""
        found = [p for t, p in self.logs if t == topic]
        if not found:
            return None
        recorded = recorded_count(self.path, topic, found)
        return checked_count(topic, found, recorded, self.topic_configs.path(topic), self.path)

    def create_partitions(self, topic: str, count: int) -> None:
        """:meth:`get_or_create` for partitions ``0..count-1`` of ``topic``: the missing ones
        appear together or not at all (``creation.py``), with the topic's id; the count is
        recorded in the topic's file (``topic_files``), which an older topic gets now."""
        check_room(self.path, topic, count - sum(t == topic for t, _ in self.logs))
        self._create(topic, [p for p in range(count) if (topic, p) not in self.logs])
        topic_id = self.topic_id(topic)
        if topic_id is not None:  # never below a partition there is
            self.topic_configs.stamp(topic, topic_id, max(count, self.topics()[topic]))

    def _create(self, topic: str, partitions: list[int]) -> None:
        """Stage and commit new partitions of ``topic`` in parallel threads (a file's creation is
        the kernel's work outside the GIL: 0.66 ms of CPU an inode on this machine's ext4, two
        threads halve the wall time), then open them in this thread (``new_log`` creates and
        syncs nothing: from the threads 1,024 took 0.41-0.53 s against 0.17-0.23 s, ad hoc).
        One another writer created since this object opened is opened as it is."""
        tps = [(topic, p) for p in partitions]
        for tp in [tp for tp in tps if (self.path / partition_dir_name(*tp)).is_dir()]:
            self.logs[tp] = self._open(tp)
            tps.remove(tp)
        if not tps:
            return
        topic_id = self.topic_id(topic)
        if topic_id is None:  # a new topic: settings a deleted one of its name left go
            self._refuse_collision(topic)
            self.topic_configs.drop_stale(topic)
            topic_id = new_topic_id()
        self._forget_deleted(tps)
        staged: dict[TopicPartition, Path] = {}
        one_sync = len(tps) >= SYNCFS_MIN_LOGS and self._filesystem.available

        def stage(tp: TopicPartition) -> None:
            staged[tp] = stage_partition(self.path, tp, topic_id, sync=not one_sync)

        self._flusher.run(stage, tps)
        if one_sync and not self._filesystem.sync():
            self._flusher.run(sync_staged, list(staged.values()))
        commit_staged(self.path, {tp: staged[tp] for tp in tps})
        for tp in tps:  # the ones opened before a failure stay open
            self.logs[tp] = new_log(
                self.path / partition_dir_name(*tp),
                self.config_for(topic),
                clock=self.clock,
                budget=self.file_budget,
            )

    def _forget_deleted(self, tps: list[TopicPartition]) -> None:
        """Drop what the checkpoints still say of a deleted partition of the same name as one
        about to be created (its directory removed by hand, as a topic is deleted here), and
        write them without it before the new directory appears: a tiering sidecar reads the
        log start of every partition directory it sees from the checkpoint file, and took the
        old partition's for the new one, deleting the new one's first segments unuploaded.
        Kafka removes a deleted topic's entries when it deletes the topic."""
        files = (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, CLEANER_OFFSET_CHECKPOINT)
        on_disk = [_entries(self.path / name) for name in files]
        kept = [self._recovery_points, self._log_starts, self.cleaner_offsets]
        stale = any(tp in entries for tp in tps for entries in on_disk + kept)
        for entries in kept:
            for tp in tps:
                entries.pop(tp, None)
        if stale:
            self.checkpoint()

    def _refuse_collision(self, topic: str) -> None:
        """Kafka's ``Topic.hasCollision``: a new topic whose name equals an existing one's once
        '.' is read as '_' (``my.topic`` and ``my_topic``) is refused, as Kafka refuses it
        (their metric names would be the same)."""
        mangled = topic.replace(".", "_")
        for other in self.topics():
            if other != topic and other.replace(".", "_") == mangled:
                raise ConfigError(
                    f"topic {topic!r} collides with existing topic {other!r} in {self.path}: "
                    "Kafka refuses names that differ only in '.' and '_'", setting="topic",
                    value=topic,
                )  # fmt: skip

    def _ensure_partition_metadata(self, topic: str, partition: int) -> None:
        metadata = PartitionMetadataFile(
            self.path / partition_dir_name(topic, partition) / PARTITION_METADATA
        )
        if not metadata.exists():
            metadata.write(self.topic_id(topic) or new_topic_id())

    def topic_id(self, topic: str) -> str | None:
        """The id already given to ``topic`` by any of its partitions."""
        for (name, partition), _log in self.logs.items():
            if name == topic:
                path = self.path / partition_dir_name(name, partition) / PARTITION_METADATA
                if path.exists():
                    return PartitionMetadataFile(path).read()
        return None

    def release_removed_segments(self) -> int:
        """:meth:`Log.release_removed_segments` of every open log; returns how many in all."""
        return sum(log.release_removed_segments() for log in self.logs.values())

    def checkpoint(self) -> None:
        """Write recovery points, log start offsets (only those above the first segment, as
        Kafka's ``checkpointLogStartOffsetsInDir``) and, once there are any, cleaner offsets."""
        points, starts, cleaned = wanted = self._checkpoints()
        OffsetCheckpointFile(self.path / RECOVERY_POINT_CHECKPOINT).write(points)
        OffsetCheckpointFile(self.path / LOG_START_OFFSET_CHECKPOINT).write(starts)
        cleaner = self.path / CLEANER_OFFSET_CHECKPOINT
        if self.cleaner_offsets or cleaner.exists():
            OffsetCheckpointFile(cleaner).write(cleaned)
        self._checkpointed = wanted

    def checkpoint_if_changed(self) -> None:
        """:meth:`checkpoint`, unless it would write what this object last wrote."""
        if self._checkpoints() != self._checkpointed:
            self.checkpoint()

    def _checkpoints(self) -> Checkpoints:
        points = {tp: log.recovery_point for tp, log in self.logs.items()}
        starts = {tp: start for tp, log in self.logs.items()
                  if (start := _checkpointed_start(log)) is not None}  # fmt: skip
        cleaned = {
            tp: self.first_dirty_offset(tp) for tp in self.cleaner_offsets if tp in self.logs
        }
        return points, starts, cleaned

    def first_dirty_offset(self, tp: TopicPartition) -> int:
        """Where cleaning of ``tp`` resumes: the checkpoint, but the log start offset when the
        checkpoint lies below it or beyond the log end (Kafka's ``cleanableOffsets``)."""
        log = self.logs[tp]
        offset = self.cleaner_offsets.get(tp, log.log_start_offset)
        if offset < log.log_start_offset or offset > log.log_end_offset:
            return log.log_start_offset
        return offset

    def flush(self) -> None:
        """Durably persist every partition changed since its last flush (``Log.flush``: indexes
        too, recovery points move), then the checkpoints that describe them."""
        logs = [log for log in self.logs.values() if log.needs_flush]
        for log in logs:  # their files then hold every entry the syncfs is to cover
            log.write_index_entries()
        self._sync(Log.flush, logs)
        self.checkpoint()

    def flush_data(self) -> None:
        """Make every append durable (``Log.flush_data``, for the partitions with unsynced data),
        then the checkpoints if a recovery point moved (a segment rolled since the last write)."""
        self._sync(Log.flush_data, [log for log in self.logs.values() if log.has_unflushed_data])
        self.checkpoint_if_changed()

    def flush_data_later(self, then: Callable[[], None] | None = None) -> FlushUnderWay:
        """:meth:`flush_data`, begun now and finished by the returned flush's ``finish``, which
        the caller runs before it next writes to any of these logs (nothing may write to them in
        between); ``then`` runs once the appends are durable. Where syncfs is available, one runs
        in a thread from now on, then ``then`` in the thread, and finishing waits for both and
        moves the logs' marks as a flush would; elsewhere, or if it failed, finishing runs
        :meth:`flush_data`, then ``then``. For a writer whose appends are durable elsewhere
        meanwhile (the sink's write-ahead log, which ``then`` removes). Its ``abandon`` instead
        waits for the thread and changes nothing, before :meth:`abandon`."""
        wait = self._filesystem.begin(then) if self._filesystem.available else None

        def finish() -> None:
            if wait is None or not wait():
                self.flush_data()
                if then is not None:
                    then()
                return
            for log in self.logs.values():
                log.durability.covered(log)
            self.checkpoint_if_changed()

        def abandon() -> None:
            if wait is not None:
                wait()

        return FlushUnderWay(finish, abandon)

    @property
    def rolled_since_flush(self) -> bool:
        """Whether a segment rolled since the last flush: its flush moves a recovery point, which
        readers of the checkpoint wait for (the tiering sidecar uploads segments below it)."""
        return any(log.durability.rolled_to is not None for log in self.logs.values())

    def _sync(self, flush: Callable[..., None], logs: list[Log]) -> None:
        """``flush`` of each log: after one syncfs when there are many (it covers every write so
        far: this object's caller writes in this thread only), else fsyncs in the threads."""
        if len(logs) >= SYNCFS_MIN_LOGS and self._filesystem.sync():
            for log in logs:
                flush(log, covered=True)
        else:
            self._flusher.run(flush, logs)

    def close(self) -> None:
        """Clean shutdown: logs closed, checkpoints written, then the clean-shutdown marker.

        Many logs on a filesystem whose syncfs is trusted are closed without an fsync each and
        then made durable together by one syncfs (``Log.close(sync=False)``); else each log
        fsyncs its own files, from the flush threads."""
        logs = list(self.logs.values())
        try:
            if len(logs) >= SYNCFS_MIN_LOGS and self._filesystem.available:
                self._close_with_one_sync(logs)
            else:
                self._flusher.run(Log.close, logs)
        finally:
            self._flusher.stop()
            self._filesystem.close()
        self.checkpoint()
        CleanShutdownFile(self.path).mark()
        self.logs.clear()

    def _close_with_one_sync(self, logs: list[Log]) -> None:
        for log in logs:  # no fsync: Python alone, which threads would only queue for the GIL
            log.close(sync=False)
        if not self._filesystem.sync():  # it failed: each partition's files, as a flush would
            self._flusher.run(fsync_tree, [log.directory for log in logs])
        for log in logs:  # every log's new snapshot is written: the strays' files may go
            log.flush(covered=True)
            log.producer_state.delete_stray_files()  # (ProducerStateManager.delete_stray_files)

    def __enter__(self) -> LogDirectory:
        return self

    def abandon(self) -> None:
        """Close every file and write none: no index trimmed, no entry kept in memory written,
        no checkpoint, no clean-shutdown marker. For a writer whose view is stale: another
        writer changed the log dir since this object opened it, and what this one would write
        from its memory would undo the other's (a trim to its own count of index entries cut
        the other's appends' entries; its checkpoints dropped the other's topics). The next
        open recovers from the files."""
        self._close_unclean(LogSegment.abandon)

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:
            self.close()
            return
        self._close_unclean(LogSegment.close_handlers)

    def _close_unclean(self, close: Callable[[LogSegment], None]) -> None:
        """Every segment closed by ``close``, no checkpoint, no marker: the next open recovers
        from the checkpoints."""
        self._flusher.stop()
        self._filesystem.close()
        for log in self.logs.values():
            for segment in log.segments:
                close(segment)
        self.logs.clear()


@dataclass(frozen=True)
class FlushUnderWay:
    """A flush :meth:`LogDirectory.flush_data_later` began: ``finish`` completes it (the logs'
    marks moved, checkpoints written); ``abandon`` only waits for its thread, for a writer
    whose view went stale meanwhile (what it covered is durable only if its ``then`` ran)."""

    finish: Callable[[], None]
    abandon: Callable[[], None]


def _entries(path: Path) -> dict[TopicPartition, int]:
    """A checkpoint file's entries (none without the file), parsed once per version."""
    try:
        return read_offsets_cached(path)
    except FileNotFoundError:
        return {}


def _checkpointed_start(log: Log) -> int | None:
    """The log start offset a checkpoint keeps for ``log``: one above its first segment (as
    Kafka's ``checkpointLogStartOffsetsInDir``), else a tiered log's below its local segments
    (``Log.remote_start``); None for neither."""
    if log.log_start_offset > log.segments[0].base_offset:
        return log.log_start_offset
    return log.remote_start or None


def _read_or_reset(path: Path, reset: str) -> dict[TopicPartition, int]:
    """A root checkpoint whose loss costs work, not data, as Kafka's ``LogManager.loadLogs``
    reads the recovery-point and log-start checkpoints: one that does not parse is warned
    about and read as empty (every partition recovered from its first segment, every log start
    its first segment's base), and the next checkpoint replaces it. The cleaner's offsets are
    read strictly (Kafka takes such a log dir offline)."""
    try:
        return OffsetCheckpointFile(path).read()
    except CheckpointError as exc:
        logger.warning("%s; %s, as a Kafka broker does", exc, reset)
        return {}
