"""KafkaLogSink: exactly-once Spark micro-batches into Kafka-format partition logs.

Usage::

    sink = KafkaLogSink("/data/kafka-logs", topic="events", partitions=8, compression="lz4")
    df.writeStream.foreachBatch(sink).option("checkpointLocation", "/chk/events").start()

Exactly once, and why it holds. Each sink (``sink_id``, default the topic) is one Kafka producer
with a stable producer id (``bookkeeping.derive_producer_id``; a new one at epoch 0 only when
32,767 restarts have used up the epochs, as Kafka's KIP-360); its durable state is
``<log dir>/kafkatier-sink.<sink id>.json`` (see :mod:`kafkatier.sink.bookkeeping`). A micro-batch
runs entirely under the sink's exclusive lock file and is one Kafka transaction:

1. The first batch of a sink instance bumps the producer epoch (persisted): an older instance
   still running finds a newer epoch at its next batch and raises ProducerFencedError before
   touching the log; the logs' producer state would reject its older epoch anyway.
2. Recovery: any open transaction of the producer (read from each partition's producer state)
   is completed with COMMIT markers if the bookkeeping says its commit was decided, else aborted
   with ABORT markers (which also index it in ``.txnindex``).
3. ``batch_id <= last_committed_batch``: a Spark replay of a batch already committed; skip it.
4. Record ``inflight = {batch_id, commit_decided: false}``; encode on executors in one
   parallel job (:mod:`kafkatier.sink.encode`), then append the pieces in task order, the
   driver giving each batch its sequence and offsets (:mod:`kafkatier.sink.append`).
5. One shared flush: fsync the ``.log`` of every partition written since its last fsync (this
   batch's data and the previous batch's COMMIT markers; ``LogDirectory.flush_data``), then
   durably set ``commit_decided`` with each partition's log end offset, and clear
   ``unflushed_commit``: this write is the commit point. Data is on disk before it, so an OS
   crash cannot leave a decided transaction with lost data.
6. COMMIT markers on every partition written, then record ``last_committed_batch`` and move the
   decided transaction to ``unflushed_commit`` (its markers are durable once the next batch's
   flush, or a clean close, has run). Only then does the call return.

Why the markers need no flush of their own: a machine crash may lose a marker only together with
everything after it in its partition (the loader cuts a partition at its first torn batch), and
``unflushed_commit`` keeps, per partition, the offset where the committed batch's data ended. So
recovery commits an open transaction that starts below that offset (the committed batch's, its
marker lost), and treats any other as the in-flight batch's. Indexes are never flushed per batch
(Kafka flushes them at roll; the loader rebuilds them above the recovery point).

Several writers may share a log dir (sinks with other sink ids, on the same topics or others;
``kafkatier produce``; ``kafkatier clean``): each micro-batch is also one turn on the log dir
(:mod:`kafkatier.storage.log.writer_lock`), and a sink whose log dir another writer changed since
its last turn reopens it before writing, so appends never interleave and never use stale offsets.

A crash before (5) leaves a transaction the next start aborts, and Spark replays the batch
(its commit log is written after ``foreachBatch`` returns): the aborted copy is invisible to
``read_committed``. A crash after (5) leaves one the next start commits; the replay is skipped by
(3). Either way each row is committed exactly once. A batch failing with an error is recovered
the same way at once. The Spark query id is recorded: a different query (a new checkpoint)
replaying old batch ids through the same sink id is an error, not a silent skip.

Driver memory: the Python driver holds one encoded piece (at most ``encode.CHUNK_BYTES``, or
one record batch) at a time, never the whole micro-batch. Executors that see the driver's
filesystem (by default: local mode; ``staging=`` names a shared directory) write their pieces to
staging files and return only where they are (:mod:`kafkatier.sink.stage`); otherwise
(``staging=False``) the pieces are persisted to executor disk and fetched one task at a time
(``toLocalIterator``: the driver JVM buffers one task's output). The executors' encoder runs in
Spark's JVM when it can (:mod:`kafkatier.sink.jvm`), else in Python workers. Crash tests stop
the driver at chosen steps through :mod:`kafkatier.sink.hooks`.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from kafkatier.sink import hooks
from kafkatier.sink.append import append_pieces
from kafkatier.sink.bookkeeping import (
    InFlight,
    ProducerFencedError,
    SinkState,
    bump_epoch,
    exclusive_lock,
    load_state,
    save_state,
)
from kafkatier.sink.encode import EncodePlan
from kafkatier.sink.hooks import crash_points, no_crash
from kafkatier.sink.jvm import EncoderChoice
from kafkatier.sink.plan import SinkSettings, build_plan, encoded_pieces
from kafkatier.sink.schema import InputColumns, SinkSchemaError, check_schema, normalize
from kafkatier.sink.stage import (
    new_batch_dir,
    remove_tree,
    sink_staging_root,
    spark_master,
    staging_base,
    staging_wanted,
)
from kafkatier.sink.stop import close_when_stopped
from kafkatier.sink.txn import end_txn, open_txn_logs, split_by_decision, topic_partitions
from kafkatier.storage.config.topic_files import TopicConfigStore
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.log import Log
from kafkatier.storage.log.writer_lock import writer_turn
from kafkatier.storage.wire import Codec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["KafkaLogSink"]

log = logging.getLogger(__name__)


class KafkaLogSink:
    """A ``foreachBatch`` function writing each micro-batch as one Kafka transaction.

    On disk it adds ``kafkatier-sink.<sink id>.json`` and ``.lock`` at the log-dir root (see
    :mod:`kafkatier.sink.bookkeeping`); partitions are ordinary Kafka partition directories.
    """

    def __init__(
        self,
        log_dir: str | Path,
        topic: str | None = None,
        partitions: int | None = None,
        compression: str = "none",
        *,
        sink_id: str | None = None,
        config: Mapping[str, str] | None = None,
        compression_level: int | None = None,
        staging: str | Path | bool | None = None,
        encoder: str = "auto",
    ) -> None:
        self.log_dir = Path(log_dir).absolute()  # a relative one is the driver's, as Spark's
        self.topic = topic
        self.partitions = partitions
        self.settings = SinkSettings(topic, partitions, Codec.parse(compression), compression_level)
        self.config = dict(config or {})
        chosen = sink_id or topic
        if not chosen or "/" in chosen or chosen.startswith("."):
            raise SinkSchemaError(
                f"bad sink id {chosen!r}: a sink routing by the 'topic' column needs "
                "sink_id='name' (no '/'); it names the producer and its bookkeeping file",
                sink_id=chosen,
            )
        if self.config and topic is None:
            raise SinkSchemaError("config= applies to one topic; fix: also pass topic=")
        self.sink_id = chosen
        self.staging = staging
        self.staging_root = sink_staging_root(staging_base(staging), self.log_dir, chosen)
        self.encoder = EncoderChoice(encoder)
        self._epoch: int | None = None  # this instance's producer epoch and id, once started
        self._producer_id: int | None = None
        self._logs: LogDirectory | None = None
        self._generation: str | None = None  # the token of this sink's last turn on the log dir
        self._watched: set[str] = set()  # queries whose end closes the logs (sink/stop.py)
        self._turns = threading.Lock()  # a batch and a close from the listener's thread

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with (
            self._turns,
            exclusive_lock(self.log_dir, self.sink_id),
            writer_turn(self.log_dir, who=f"sink {self.sink_id}") as turn,
        ):
            if self._logs is not None and turn.changed_since(self._generation):
                log.info("sink %s: %s changed by another writer", self.sink_id, self.log_dir)
                self._drop_logs()
            elif self._logs is not None:
                self._logs.release_removed_segments()  # local retention of the sidecar
            self._generation = turn.token
            self._batch(df, batch_id)

    def _batch(self, df: DataFrame, batch_id: int) -> None:
        """One call of ``foreachBatch`` in this sink's turn on the log dir."""
        state = self._begin()
        query_id = hooks.query_id(df)
        self._check_query(state, query_id, batch_id)
        if query_id is not None and query_id not in self._watched:
            self._watched.add(query_id)
            close_when_stopped(df.sparkSession, query_id, self.close)
        if batch_id <= state.last_committed_batch:
            log.info("sink %s: batch %d already committed, skipped", self.sink_id, batch_id)
            return
        cols = check_schema(df.schema, fixed_topic=self.topic is not None)
        try:
            self._write_batch(df, batch_id, state, cols, query_id)
        except BaseException:
            self._recover_after_failure(state)
            raise

    # ------------------------------------------------------------------ instance start, recovery

    @property
    def logs(self) -> LogDirectory:
        if self._logs is None:
            self._logs = LogDirectory(self.log_dir)
        return self._logs

    def _begin(self) -> SinkState:
        """Fence or be fenced, then finish whatever transaction a previous run left open.

        Fencing compares the producer id as well as the epoch: when the epochs are exhausted a
        new instance moves to a new producer id, whose epoch starts again at 0."""
        state = load_state(self.log_dir, self.sink_id)
        if self._epoch is None:
            bump_epoch(state)  # or a new producer id (bookkeeping.rotate_producer_id)
            save_state(self.log_dir, state)
            self._epoch = state.producer_epoch
            self._producer_id = state.producer_id
            remove_tree(self.staging_root)  # scratch files a dead instance may have left
            if self.config and self.topic is not None:
                TopicConfigStore(self.log_dir).update(self.topic, self.config, "KafkaLogSink")
        elif (state.producer_id, state.producer_epoch) != (self._producer_id, self._epoch):
            raise ProducerFencedError(
                f"sink {self.sink_id!r} was fenced: a newer instance started with producer id "
                f"{state.producer_id} epoch {state.producer_epoch} (this one has "
                f"{self._producer_id} epoch {self._epoch}); stop this query, only the newest "
                "instance may write",
                producer_id=self._producer_id,
                producer_epoch=self._epoch,
            )
        self._recover(state)
        return state

    def _recover(self, state: SinkState) -> None:
        """End the open transactions: a rotated-out producer id's first (its markers use the
        fencing epoch), before anything is written with the new id; then forget the old id.

        A transaction is committed if its batch's commit was decided: the in-flight batch's
        when ``commit_decided``, and the last committed batch's where its marker is missing
        (``unflushed_commit``, see the module docstring); else aborted."""
        inflight = state.inflight
        decided = inflight is not None and inflight.commit_decided
        committed = state.unflushed_commit
        committed_ends = committed.end_offsets() if committed is not None else {}
        topics = {t for t, _ in self.logs.logs}
        ended = 0
        for producer_id, epoch in state.producers_to_recover(self._epoch_now()):
            pending = open_txn_logs(self.logs, topics, producer_id)
            commit, abort = split_by_decision(pending, producer_id, committed_ends, decided)
            ended += self._end_txns(commit, producer_id, epoch, commit=True)
            ended += self._end_txns(abort, producer_id, epoch, commit=False)
        if ended or decided:
            self.logs.flush_data()  # the markers, and a decided batch's, durable
            state.unflushed_commit = None
        if ended or inflight is not None or state.previous_producer_id is not None:
            if inflight is not None and decided:
                state.last_committed_batch = max(state.last_committed_batch, inflight.batch_id)
            state.inflight = None
            state.previous_producer_id = None
            save_state(self.log_dir, state)

    def _end_txns(self, logs: list[Log], producer_id: int, epoch: int, *, commit: bool) -> int:
        if logs:
            log.warning("sink %s: %s an open transaction of producer %d in %d partitions",
                        self.sink_id, "committing" if commit else "aborting", producer_id,
                        len(logs))  # fmt: skip
        return end_txn(logs, producer_id, epoch, commit=commit, crash=no_crash)

    def close(self) -> None:
        """Close the logs cleanly (checkpoints, clean-shutdown marker), in a turn on the log dir
        as every write to it; a later batch reopens them."""
        with self._turns:
            if self._logs is not None:
                self._close_in_turn(self._logs)

    def _close_in_turn(self, logs: LogDirectory) -> None:
        with writer_turn(self.log_dir, who=f"sink {self.sink_id}") as turn:
            if turn.changed_since(self._generation):
                self._drop_logs()  # stale: another writer's checkpoints must not be overwritten
            else:
                logs.close()
                self._logs = None

    def _drop_logs(self) -> None:
        """Close the logs without the clean-shutdown marker: the next use reopens (recovers)."""
        if self._logs is not None:
            self._logs.__exit__(RuntimeError, None, None)
            self._logs = None

    def _recover_after_failure(self, state: SinkState) -> None:
        """Reload the logs from disk (in-memory state may be half-updated) and end the txn."""
        self._drop_logs()
        try:
            self._recover(load_state(self.log_dir, self.sink_id))
        except Exception:  # the next batch or restart recovers from disk
            log.exception("sink %s: recovery after a failed batch failed", self.sink_id)
            self._logs = None

    def _epoch_now(self) -> int:
        assert self._epoch is not None
        return self._epoch

    def _check_query(self, state: SinkState, query_id: str | None, batch_id: int) -> None:
        if query_id and state.query_id and query_id != state.query_id:
            raise SinkSchemaError(
                f"sink {self.sink_id!r} belongs to streaming query {state.query_id} (last "
                f"committed batch {state.last_committed_batch}), not {query_id}: a new "
                "checkpoint would replay batch ids the sink already committed; fix: reuse the "
                "original checkpointLocation or give this query a new sink_id",
                batch_id=batch_id,
            )

    # ------------------------------------------------------------------------------ one batch

    def _write_batch(
        self,
        df: DataFrame,
        batch_id: int,
        state: SinkState,
        cols: InputColumns,
        query_id: str | None,
    ) -> None:
        crash = crash_points(batch_id)
        plan = build_plan(self.logs, self.settings, state.producer_id, self._epoch_now())
        state.inflight = InFlight(batch_id)
        state.query_id = query_id or state.query_id
        save_state(self.log_dir, state)
        touched = sorted(self._append_all(df, cols, plan, batch_id, crash))
        self.logs.flush_data()  # this batch's data and the previous batch's markers
        crash("after-flush")
        ends = [self._log_for(*tp).log_end_offset for tp in touched]
        state.inflight = InFlight(batch_id, True, touched, ends)
        state.unflushed_commit = None
        save_state(self.log_dir, state)  # the commit point
        crash("after-decide")
        pending = open_txn_logs(self.logs, {t for t, _ in touched}, state.producer_id)
        end_txn(
            pending,
            state.producer_id,
            self._epoch_now(),
            commit=True,
            crash=crash,
        )
        crash("after-markers")
        state.last_committed_batch = batch_id
        state.unflushed_commit, state.inflight = state.inflight, None
        save_state(self.log_dir, state)

    def _append_all(
        self,
        df: DataFrame,
        cols: InputColumns,
        plan: tuple[EncodePlan, dict[tuple[str, int], int]],
        batch_id: int,
        crash: Callable[[str], None],
    ) -> set[tuple[str, int]]:
        """Encode (staged or fetched, see the module docstring), then append in task order."""
        encode_plan, sequences = plan
        staged = staging_wanted(self.staging, spark_master(df))
        batch_dir = new_batch_dir(self.staging_root, batch_id) if staged else None
        if batch_dir is not None:
            encode_plan = dataclasses.replace(encode_plan, staging_dir=str(batch_dir))
        try:
            return append_pieces(
                encoded_pieces(normalize(df, cols), encode_plan, self.encoder.for_frame(df)),
                sequences,
                self._log_for,
                functools.partial(crash, "after-append"),
            )
        finally:
            if batch_dir is not None:
                remove_tree(batch_dir)

    def _log_for(self, topic: str, partition: int) -> Log:
        found = self.logs.get(topic, partition)
        if found is None:  # a routed topic seen for the first time
            topic_partitions(self.logs, topic, self.partitions)
            found = self.logs.get(topic, partition)
        assert found is not None
        return found
