"""Committed offsets, durable: Kafka's ``__consumer_offsets`` topic in the server's own log dir.

``offsets.log.dir`` (default ``<first log dir>/.kafkatier-serve``) is a Kafka log dir of its
own, written only by this server, so the shared log dirs' writer turns (held by the sink for a
micro-batch) never delay a commit, and the sink, the sidecar and the readers, which list only
``<topic>-<partition>`` children of a log dir, never see it. The server holds its ``.lock``
(``flock``) while it has the dir open: a second server on the same dir is refused (an error
naming ``offsets.log.dir``).

The topic has ``offsets.topic.num.partitions`` partitions (1 by default: Kafka's 50 spread
group coordinators over brokers, and here one server coordinates every group, so more would
only mean more files to open, replay and compact; the count is fixed once created, as in
Kafka) and
``cleanup.policy=compact`` and ``segment.bytes=offsets.topic.segment.bytes`` in
``kafkatier-topic.__consumer_offsets.properties``. The server compacts it as Kafka's log cleaner
does (:meth:`OffsetStore.clean`, every ``log.cleaner.backoff.ms``: closed segments past
``min.cleanable.dirty.ratio`` keep the latest commit per key); ``kafkatier clean <dir>`` does
the same while the server is stopped. Commits expire (:meth:`OffsetStore.expire`): a group
without members loses the commits older than ``offsets.retention.minutes``, checked every
``offsets.retention.check.interval.ms`` (Kafka counts an Empty group's retention from when it
became empty; the commit time is used here, which is the same for a group that committed until
it left). Records: ``records.py``.

The dir is opened at start when it exists, else created at the first commit (a server that
only serves records writes nothing). On open every partition is replayed into memory (the
latest value per key; a tombstone deletes it). A commit appends one batch to the group's
partition and fsyncs it (``Log.flush_data``) before the memory and the client see it. Commits
block (disk): the handlers run them in the thread pool, one at a time (a lock); reads of the
memory only wait for another read or update.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from kafkatier.serve.group.records import (
    BadOffsetRecord,
    OffsetKey,
    OffsetValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    partition_for,
)
from kafkatier.serve.group.topic_ids import TopicIds
from kafkatier.storage.errors import ConfigError, KafkaTierError, StorageError
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.log import wall_clock_ms
from kafkatier.storage.log.reader import iter_records
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record

TOPIC = "__consumer_offsets"
LOCK_FILE = ".lock"
SEGMENT_BYTES = 104_857_600  # Kafka's offsets.topic.segment.bytes
Committed = dict[tuple[str, int], OffsetValue]


class OffsetStore:
    """The offsets of every group: in memory, backed by ``__consumer_offsets`` (module doc)."""

    def __init__(self, directory: Path, partitions: int,
                 clock: Callable[[], int] = wall_clock_ms,
                 segment_bytes: int = SEGMENT_BYTES) -> None:  # fmt: skip
        self.directory = Path(directory)
        self.partitions = partitions
        self.segment_bytes = segment_bytes
        self.clock = clock
        self._lock = threading.Lock()  # the in-memory offsets (held briefly: the loop reads)
        self._write_lock = threading.Lock()  # opening, appends and fsyncs, one at a time
        self._offsets: dict[str, Committed] = {}
        self._fd: int | None = None
        self._logs: LogDirectory | None = None
        self._topic_ids = TopicIds(self.directory)  # read (if there) before the dir is opened
        if self.directory.is_dir():
            self._open()

    def _open(self) -> LogDirectory:
        """Lock, open (creating the topic) and replay; called at start when the dir exists,
        else at the first commit: serving a log dir creates nothing in it until then."""
        fd = _hold_lock(self.directory)
        try:
            logs = LogDirectory(self.directory, clock=self.clock)
        except BaseException:
            os.close(fd)
            raise
        self._fd, self._logs = fd, logs
        try:
            self._create_topic(logs)
            self._replay(logs)
        except BaseException:
            self.close()
            raise
        return logs

    def _create_topic(self, logs: LogDirectory) -> None:
        existing = logs.partition_count(TOPIC)
        if existing is not None and existing != self.partitions:
            raise ConfigError(f"{TOPIC} in {self.directory} has {existing} partitions; the count "
                              "cannot change once created", setting="offsets.topic.num.partitions",
                              value=str(self.partitions))  # fmt: skip
        config = {"cleanup.policy": "compact", "segment.bytes": str(self.segment_bytes)}
        logs.topic_configs.update(TOPIC, config, source="kafkatier serve")
        logs.create_partitions(TOPIC, self.partitions)

    def _replay(self, logs: LogDirectory) -> None:
        for partition in range(self.partitions):
            log = logs.get(TOPIC, partition)
            assert log is not None
            for record in iter_records(log):
                try:
                    self._apply(record.key, record.value)
                except BadOffsetRecord as exc:
                    raise KafkaTierError(f"unreadable {TOPIC} record: {exc.message}",
                                         partition_dir=str(log.directory),
                                         offset=record.offset) from None  # fmt: skip

    def _apply(self, raw_key: bytes | None, raw_value: bytes | None) -> None:
        key = decode_key(raw_key or b"")
        if key is None:
            return  # group metadata (record type 2): not kept by this server
        found = self._offsets.setdefault(key.group, {})
        if raw_value is None:
            found.pop((key.topic, key.partition), None)
        else:
            found[(key.topic, key.partition)] = decode_value(raw_value)

    def commit(
        self, group: str, offsets: Iterable[tuple[str, int, OffsetValue]],
        topic_ids: dict[str, str] | None = None,
    ) -> None:  # fmt: skip
        """Append and fsync one batch of ``group``'s commits, then make them visible.
        ``topic_ids``: the committed topics' ids now; a topic whose commits belong to an
        incarnation deleted since has those commits deleted first, in every group
        (``topic_ids.py``)."""
        items: list[tuple[str, int, OffsetValue | None]] = list(offsets)
        if topic_ids:
            with self._write_lock:
                if self._logs is None:  # the ids are kept in the dir its first commit makes
                    self._open()
            for topic, topic_id in topic_ids.items():
                if self._topic_ids.stale(topic, topic_id):
                    self._forget_topic(topic)
            self._topic_ids.record(topic_ids)
        self._write(group, items)

    def _forget_topic(self, topic: str) -> None:
        """Tombstone every group's commits of ``topic`` (an incarnation deleted since)."""
        with self._lock:
            doomed = {group: [tp for tp in found if tp[0] == topic]
                      for group, found in self._offsets.items()}  # fmt: skip
        for group, keys in doomed.items():
            self._write(group, [(t, p, None) for t, p in keys])

    def stale(self, topic: str, topic_id: str | None) -> bool:
        """Whether the commits of ``topic`` are of another incarnation than ``topic_id``."""
        return self._topic_ids.stale(topic, topic_id)

    def expire(self, older_than_ms: int, active: Callable[[str], bool]) -> int:
        """Delete (tombstones, fsynced) the commits made before ``older_than_ms`` of every group
        ``active`` says has no members (``offsets.retention.minutes``); returns how many."""
        with self._lock:
            doomed = {group: [tp for tp, value in found.items()
                              if value.commit_timestamp < older_than_ms]
                      for group, found in self._offsets.items() if not active(group)}  # fmt: skip
        for group, keys in doomed.items():
            self._write(group, [(topic, partition, None) for topic, partition in keys])
        return sum(len(keys) for keys in doomed.values())

    def _write(self, group: str, items: list[tuple[str, int, OffsetValue | None]]) -> None:
        """One batch of ``group``'s records (None: a tombstone), fsynced, then in memory."""
        if not items:
            return
        now = self.clock()
        records = [
            Record(i, now, encode_key(OffsetKey(group, topic, partition)),
                   None if value is None else encode_value(value))
            for i, (topic, partition, value) in enumerate(items)
        ]  # fmt: skip
        with self._write_lock:
            logs = self._logs or self._open()
            log = logs.get(TOPIC, partition_for(group, self.partitions))
            assert log is not None
            log.append(build_batch(records))
            log.flush_data()
        with self._lock:
            found = self._offsets.setdefault(group, {})
            for topic, partition, value in items:
                if value is None:
                    found.pop((topic, partition), None)
                else:
                    found[(topic, partition)] = value

    def clean(self) -> int:
        """One pass of Kafka's log cleaner over the topic (between commits); returns the
        records it removed."""
        from kafkatier.storage.cleaner.clean_pass import clean_log_dir
        from kafkatier.storage.cleaner.compact import compact_log

        with self._write_lock:
            if self._logs is None:
                return 0
            done = clean_log_dir(self._logs, now_ms=self.clock(), compactor=compact_log,
                                 topics=[TOPIC])  # fmt: skip
        failed = [f"{s.topic}-{s.partition}: {s.error}" for s in done if s.error]
        if failed:  # the pass went on with the other partitions; the caller logs this
            raise StorageError("; ".join(failed))
        return sum(summary.records_removed for summary in done)

    def committed(self, group: str) -> Committed:
        with self._lock:
            return dict(self._offsets.get(group, {}))

    def has_offsets(self, group: str) -> bool:
        with self._lock:
            return bool(self._offsets.get(group))

    def groups(self) -> list[str]:
        """Groups with committed offsets."""
        with self._lock:
            return [group for group, found in self._offsets.items() if found]

    def close(self) -> None:
        logs, fd, self._logs, self._fd = self._logs, self._fd, None, None
        try:
            if logs is not None:
                logs.close()
        finally:
            if fd is not None:
                os.close(fd)


def _hold_lock(directory: Path) -> int:
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise ConfigError(f"another process (pid {holder}) serves groups from this dir",
                          setting="offsets.log.dir", value=str(directory)) from None  # fmt: skip
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} kafkatier serve\n".encode(), 0)
    except BaseException:  # a full disk: the lock goes with the descriptor, or the next
        os.close(fd)  # commit, once there is room, finds this process holding it
        raise
    return fd
