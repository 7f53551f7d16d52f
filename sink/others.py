"""Other sinks' decided batches that their partitions lack, completed by the next writer of
the log dir.

A sink appends a decided micro-batch in its turn on the log dir (``writer_lock``): each
partition's batches, then its COMMIT marker. A driver killed part-way leaves a partition with
the batch's first batches and no marker: an open transaction. It holds the partition's last
stable offset, so ``read_committed`` consumers see nothing after it, the records of every
other writer included, until that sink starts again and completes the batch from its
write-ahead record. Kafka's transaction coordinator ends such a transaction itself
(``transaction.timeout.ms``); here the write-ahead record lies in the log dir (the sink's
bookkeeping file and its staging files), so whichever writer takes the next turn completes the
batch as its sink would: its producer id and epoch, the same records, the COMMIT its sink
decided. Nothing is fenced: the sink's own recovery then finds its partitions complete.

A sink whose lock is held (an instance waiting for its turn) completes its batch itself; one
whose bookkeeping does not parse is left to its own start, which names the fault.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator
from pathlib import Path

from kafkatier.sink.bookkeeping import FILE_PREFIX, SinkState, exclusive_lock
from kafkatier.storage.errors import KafkaTierError
from kafkatier.storage.log.directory import LogDirectory

log = logging.getLogger("kafkatier.sink")


def complete_other_sinks(logs: LogDirectory, own: str | None, timestamp: int) -> int:
    """Complete the decided batches of every sink but ``own`` whose partitions lack them, in
    the caller's turn on the log dir; returns how many partitions were completed."""
    done = 0
    for state in _other_states(logs.path, own):
        decided = [wal for wal in state.decided if wal.pending()]
        if not decided:
            continue
        from kafkatier.sink.append import replay_all  # the CLI's writers: only when needed

        with exclusive_lock(logs.path, state.sink_id, wait=False) as free:
            if not free:
                continue
            try:
                count = replay_all(decided, logs.get_or_create,
                                   lambda wal: wal.producer_epoch, timestamp,
                                   functools.cache(logs.topic_id))  # fmt: skip
            except (KafkaTierError, OSError) as exc:  # its own start names it again
                log.warning("could not complete sink %s's decided batches %s: %s",
                            state.sink_id, [w.batch_id for w in decided], exc)  # fmt: skip
                continue
        if count:
            log.warning("completed sink %s's decided batches %s in %d partitions that lacked "
                        "them (its driver stopped while appending)", state.sink_id,
                        [w.batch_id for w in decided], count)  # fmt: skip
            done += count
    if done:
        logs.flush_data()
    return done


def _other_states(path: Path, own: str | None) -> Iterator[SinkState]:
    for file in sorted(Path(path).glob(f"{FILE_PREFIX}*.json")):
        try:
            state = SinkState.from_json(file.read_bytes(), file)
        except (OSError, KafkaTierError):
            continue
        if state.sink_id != own:
            yield state
