"""The driver's transaction steps on the log dir: topics, sequences, markers, recovery.

The sink plays Kafka's transaction coordinator for its one producer: it appends COMMIT or ABORT
markers (``Log.write_txn_marker``) to every partition where the producer has an open
transaction. Which partitions those are is read from each partition's producer state (rebuilt
from disk after a crash), not from the sink's bookkeeping, so a partition appended to just before
a crash cannot be missed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from kafkatier.sink.schema import SinkSchemaError
from kafkatier.storage.log.creation import check_room
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.log import Log
from kafkatier.storage.wire import NO_SEQUENCE, increment_sequence

CrashHook = Callable[[str], None]


def topic_partitions(
    logs: LogDirectory, topic: str, partitions: int | None, *, create: bool = True
) -> int:
    """The topic's partition count, creating its partitions if it is new (unless ``create``
    is False: the sink's plan, which creates them once the encode job has accepted every row).

    An existing topic's count comes from disk (``LogDirectory.partition_count``, which refuses
    one with a partition's directory missing); a different ``partitions`` is an error, never a
    silent re-partitioning (keys would move to other partitions)."""
    on_disk = logs.partition_count(topic)
    if on_disk is not None:
        if partitions is not None and partitions != on_disk:
            raise SinkSchemaError(
                f"topic {topic!r} has {on_disk} partitions in {logs.path}, not {partitions}; "
                f"fix: pass partitions={on_disk} (or None), or write to a new topic",
                topic=topic,
            )
        count = on_disk
    elif partitions is None:
        raise SinkSchemaError(
            f"topic {topic!r} does not exist in {logs.path}; fix: pass partitions=N to create it",
            topic=topic,
        )
    else:
        count = partitions
    if count < 1:
        raise SinkSchemaError(f"partitions must be >= 1, got {count}", topic=topic)
    if on_disk is None:  # before the encode job plans for them
        check_room(logs.path, topic, count)
    if create:
        logs.create_partitions(topic, count)
    return count


def next_sequences(
    logs: LogDirectory, topic: str, count: int, producer_id: int, epoch: int
) -> dict[int, int]:
    """Per partition, the sequence the producer's next record must carry (0 in a new epoch)."""
    result: dict[int, int] = {}
    for p in range(count):
        log = logs.get(topic, p)
        entry = None if log is None else log.producer_state.last_entry(producer_id)
        if entry is None or entry.producer_epoch != epoch or entry.last_seq == NO_SEQUENCE:
            result[p] = 0
        else:
            result[p] = increment_sequence(entry.last_seq, 1)
    return result


def open_txn_logs(logs: LogDirectory, topics: Iterable[str], producer_id: int) -> list[Log]:
    """The partitions of ``topics`` where ``producer_id`` has a transaction without a marker."""
    wanted = set(topics)
    found = []
    for (topic, _partition), log in sorted(logs.logs.items()):
        if topic not in wanted:
            continue
        entry = log.producer_state.last_entry(producer_id)
        if entry is not None and entry.current_txn_first_offset is not None:
            found.append(log)
    return found


def split_by_decision(
    logs: Iterable[Log],
    producer_id: int,
    committed_ends: Mapping[tuple[str, int], int],
    commit_others: bool,
) -> tuple[list[Log], list[Log]]:
    """The logs with an open transaction of ``producer_id``, split into (to commit, to abort).

    ``committed_ends``: per partition, the log end offset after the data of a committed batch
    whose COMMIT markers may have been lost (written, not yet flushed). An open transaction that
    starts below it is that batch's (a later batch's data can only follow its marker, so it was
    lost with it) and is committed; any other is the in-flight batch's: committed if
    ``commit_others`` (its commit was decided), else aborted."""
    commit: list[Log] = []
    abort: list[Log] = []
    for log in logs:
        entry = log.producer_state.last_entry(producer_id)
        first = None if entry is None else entry.current_txn_first_offset
        end = committed_ends.get((log.topic, log.partition))
        if first is not None and end is not None and first < end:
            commit.append(log)
        else:
            (commit if commit_others else abort).append(log)
    return commit, abort


def end_txn(
    logs: Iterable[Log], producer_id: int, epoch: int, *, commit: bool, crash: CrashHook
) -> int:
    """Write a COMMIT or ABORT marker to each log, all with one timestamp; returns how many
    were written."""
    written = 0
    now: int | None = None
    for log in logs:
        if written:
            crash("between-markers")
        now = log.clock() if now is None else now
        log.write_txn_marker(producer_id, epoch, commit=commit, timestamp=now)
        written += 1
    return written
