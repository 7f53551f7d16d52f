"""What a sink instance finishes before its first batch, and after a failed one: step 2 of the
protocol in :mod:`kafkatier.sink.sink`.

The decided batches whose staging files still exist (their partitions may lack them) are
completed from their write-ahead records, oldest first, and made durable; then any other open
transaction of the producer (left by a version before the write-ahead log, or by a rotated-out
producer id) is ended as its bookkeeping says; then other sinks' decided batches that their
drivers left half-appended are completed (:mod:`kafkatier.sink.others`).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

from kafkatier.sink.append import replay_all
from kafkatier.sink.bookkeeping import SinkState
from kafkatier.sink.hooks import no_crash
from kafkatier.sink.others import complete_other_sinks
from kafkatier.sink.txn import end_txn, open_txn_logs, split_by_decision
from kafkatier.sink.wal import remove_files
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.log import Log, wall_clock_ms

log = logging.getLogger(__name__)


def epoch_in_logs(logs: LogDirectory, producer_id: int) -> int:
    """The newest epoch of ``producer_id`` in the partitions (-1: none). A bookkeeping file
    deleted by hand (to start another query over the topic) restarted the epoch at 0 below the
    partitions' one: the next batch was decided, refused by the partitions (an older epoch) and
    then skipped as committed, its rows lost."""
    entries = (log.producer_state.last_entry(producer_id) for log in logs)
    return max((e.producer_epoch for e in entries if e is not None), default=-1)


def recover(
    logs: LogDirectory,
    state: SinkState,
    *,
    epoch: int,
    sink_id: str,
    log_for: Callable[[str, int], Log],
    save: Callable[[SinkState], None],
) -> None:
    """Complete the decided batches where their partitions may lack them, make that durable
    and remove their staging files; then end the producer's other open transactions (a
    rotated-out producer id's first: its markers use the fencing epoch), before anything is
    written with the new id, and forget the old id (``save``); then other sinks' batches.
    ``epoch``: this instance's producer epoch."""
    epochs = dict(state.producers_to_recover(epoch))
    decided = [wal for wal in state.decided if wal.pending()]
    if decided:
        topic_id = functools.cache(logs.topic_id)  # once a topic, not a partition
        done = replay_all(decided, log_for, lambda wal: epochs.get(wal.producer_id, epoch),
                          wall_clock_ms(), topic_id)  # fmt: skip
        if done:
            log.warning("sink %s: completed decided batches %s in %d partitions that lacked "
                        "them", sink_id, [wal.batch_id for wal in decided], done)  # fmt: skip
        logs.flush_data()
        for wal in decided:
            remove_files(wal.files)
    _end_open_txns(logs, state, epochs, sink_id, save)
    complete_other_sinks(logs, sink_id, wall_clock_ms())


def _end_open_txns(
    logs: LogDirectory,
    state: SinkState,
    epochs: dict[int, int],
    sink_id: str,
    save: Callable[[SinkState], None],
) -> None:
    """Transactions the write-ahead log does not explain: a version-3 bookkeeping file's
    ``inflight`` (committed if its commit was decided, else aborted) and ``unflushed_commit``
    (a committed batch whose markers may be lost); any other is aborted."""
    inflight = state.inflight
    decided = inflight is not None and inflight.commit_decided
    committed = state.unflushed_commit
    committed_ends = committed.end_offsets() if committed is not None else {}
    topics = {t for t, _ in logs.logs}
    ended = 0
    for producer_id, epoch in epochs.items():
        pending = open_txn_logs(logs, topics, producer_id)
        commit, abort = split_by_decision(pending, producer_id, committed_ends, decided)
        ended += _end_txns(commit, producer_id, epoch, sink_id, commit=True)
        ended += _end_txns(abort, producer_id, epoch, sink_id, commit=False)
    if ended or decided or committed is not None:
        logs.flush_data()  # the markers (a version 3 file's too), and a decided batch's
    changed = inflight is not None or committed is not None
    if ended or changed or state.previous_producer_id is not None:
        if inflight is not None and decided:
            state.last_committed_batch = max(state.last_committed_batch, inflight.batch_id)
        state.inflight = state.unflushed_commit = None
        state.previous_producer_id = None
        save(state)


def _end_txns(logs: list[Log], producer_id: int, epoch: int, sink_id: str, *,
              commit: bool) -> int:  # fmt: skip
    if logs:
        log.warning("sink %s: %s an open transaction of producer %d in %d partitions", sink_id,
                    "committing" if commit else "aborting", producer_id, len(logs))  # fmt: skip
    return end_txn(logs, producer_id, epoch, commit=commit, crash=no_crash)
