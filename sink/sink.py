"""KafkaLogSink: exactly-once Spark micro-batches into Kafka-format partition logs.

Usage::

    sink = KafkaLogSink("/data/kafka-logs", topic="events", partitions=8, compression="lz4")
    df.writeStream.foreachBatch(sink).option("checkpointLocation", "/chk/events").start()

Exactly once, and why it holds. Each sink (``sink_id``, default the topic) is one Kafka producer
with a stable producer id (``bookkeeping.derive_producer_id``); its durable state is
``<log dir>/kafkatier-sink.<sink id>.json`` (see :mod:`kafkatier.sink.bookkeeping`). A micro-batch
runs entirely under the sink's exclusive lock file and is one Kafka transaction:

1. The first batch of a sink instance bumps the producer epoch (persisted): an older instance
   still running finds a newer epoch at its next batch and raises ProducerFencedError before
   touching the log; the logs' producer state would reject its older epoch anyway.
2. Recovery: any open transaction of the producer (read from each partition's producer state)
   is completed with COMMIT markers if the bookkeeping says its commit was decided, else aborted
   with ABORT markers (which also index it in ``.txnindex``).
3. ``batch_id <= last_committed_batch``: a Spark replay of a batch already committed; skip it.
4. Record ``inflight = {batch_id, commit_decided: false}``; encode on executors
   (:mod:`kafkatier.sink.encode`: a counting pass gives every task its first sequence number per
   partition, so tasks encode in parallel without a shuffle); stream the chunks
   (``toLocalIterator``) into ``Log.append`` task by task (client origin: sequence and epoch
   checks), and check that each task sent exactly the rows it counted.
5. fsync every partition (``LogDirectory.flush``), then durably set ``commit_decided``: this
   write is the commit point. Data is on disk before it, so an OS crash cannot leave a decided
   transaction with lost data.
6. COMMIT markers on every partition written, fsync again, then record ``last_committed_batch``
   and clear ``inflight``. Only then does the call return.

A crash before (5) leaves a transaction the next start aborts, and Spark replays the batch
(its commit log is written after ``foreachBatch`` returns): the aborted copy is invisible to
``read_committed``. A crash after (5) leaves one the next start commits; the replay is skipped by
(3). Either way each row is committed exactly once. A batch failing with an error is recovered
the same way at once. The Spark query id is recorded: a different query (a new checkpoint)
replaying old batch ids through the same sink id is an error, not a silent skip.

Driver memory: the Python driver holds one encoded chunk (at most ``encode.CHUNK_BYTES``) plus
Spark's prefetch; the driver JVM buffers one task's encoded output at a time (``toLocalIterator``
over the encoded batch, which one parallel job first persists to executor disk): a share of one
micro-batch, never the whole of it. The input must be deterministic on recompute (as Spark's
replay requires anyway; the count check catches a violation and aborts the batch). Testing hook:
``KAFKATIER_SINK_CRASH=<point>[:<batch>]`` makes the driver SIGKILL itself at ``after-append``,
``after-decide``, ``between-markers`` or ``after-markers`` (the first time it gets there, or only
in that batch).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

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
from kafkatier.sink.plan import SinkSettings, build_plan, encoded_chunks
from kafkatier.sink.schema import InputColumns, SinkSchemaError, check_schema, normalize
from kafkatier.sink.txn import end_txn, open_txn_logs, topic_partitions
from kafkatier.storage.log import Log
from kafkatier.storage.log_dir import LogDirectory
from kafkatier.storage.topic_config import TopicConfigStore
from kafkatier.storage.wire import Codec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["KafkaLogSink", "ProducerFencedError", "SinkSchemaError"]

log = logging.getLogger(__name__)
CRASH_ENV: Final = "KAFKATIER_SINK_CRASH"
QUERY_ID_PROPERTY: Final = "sql.streaming.queryId"


def _crash_point(point: str, batch_id: int) -> None:
    """SIGKILL this process at ``point`` when KAFKATIER_SINK_CRASH asks for it (crash tests)."""
    spec = os.environ.get(CRASH_ENV)
    if not spec:
        return
    name, _, batch = spec.partition(":")
    if name == point and (not batch or int(batch) == batch_id):
        os.kill(os.getpid(), signal.SIGKILL)


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
    ) -> None:
        self.log_dir = Path(log_dir)
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
        self._epoch: int | None = None
        self._logs: LogDirectory | None = None

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with exclusive_lock(self.log_dir, self.sink_id):
            state = self._begin()
            query_id = _query_id(df)
            self._check_query(state, query_id, batch_id)
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
        """Fence or be fenced, then finish whatever transaction a previous run left open."""
        state = load_state(self.log_dir, self.sink_id)
        if self._epoch is None:
            bump_epoch(state)
            save_state(self.log_dir, state)
            self._epoch = state.producer_epoch
            if self.config and self.topic is not None:
                TopicConfigStore(self.log_dir).update(self.topic, self.config, "KafkaLogSink")
        elif state.producer_epoch != self._epoch:
            raise ProducerFencedError(
                f"sink {self.sink_id!r} was fenced: a newer instance started with epoch "
                f"{state.producer_epoch} (this one has {self._epoch}); stop this query, only the "
                "newest instance may write",
                producer_id=state.producer_id,
                producer_epoch=self._epoch,
            )
        self._recover(state)
        return state

    def _recover(self, state: SinkState) -> None:
        inflight = state.inflight
        commit = inflight is not None and inflight.commit_decided
        topics = {t for t, _ in self.logs.logs}
        pending = open_txn_logs(self.logs, topics, state.producer_id)
        if pending:
            action = "committing" if commit else "aborting"
            log.warning("sink %s: %s an open transaction in %d partitions",
                        self.sink_id, action, len(pending))  # fmt: skip
            end_txn(pending, state.producer_id, self._epoch_now(), commit=commit, crash=_noop)
            self.logs.flush()
        if inflight is not None:
            if commit:
                state.last_committed_batch = max(state.last_committed_batch, inflight.batch_id)
            state.inflight = None
            save_state(self.log_dir, state)

    def _recover_after_failure(self, state: SinkState) -> None:
        """Reload the logs from disk (in-memory state may be half-updated) and end the txn."""
        if self._logs is not None:
            self._logs.__exit__(RuntimeError, None, None)  # close files, no clean marker
            self._logs = None
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
        plan = build_plan(self.logs, self.settings, state.producer_id, self._epoch_now())
        state.inflight = InFlight(batch_id)
        state.query_id = query_id or state.query_id
        save_state(self.log_dir, state)
        touched = self._append_all(df, cols, plan, batch_id)
        self.logs.flush()  # data durable before the commit decision
        state.inflight = InFlight(batch_id, True, sorted(touched))
        save_state(self.log_dir, state)  # the commit point
        _crash_point("after-decide", batch_id)
        pending = open_txn_logs(self.logs, {t for t, _ in touched}, state.producer_id)
        end_txn(
            pending,
            state.producer_id,
            self._epoch_now(),
            commit=True,
            crash=lambda point: _crash_point(point, batch_id),
        )
        _crash_point("after-markers", batch_id)
        self.logs.flush()
        state.last_committed_batch = batch_id
        state.inflight = None
        save_state(self.log_dir, state)

    def _append_all(
        self,
        df: DataFrame,
        cols: InputColumns,
        plan: tuple[EncodePlan, dict[tuple[str, int], int]],
        batch_id: int,
    ) -> set[tuple[str, int]]:
        """Stream the encoded chunks into the logs, task by task (each task's chunks follow
        the previous task's in every Kafka partition, as their sequence numbers do)."""
        encoded, expected = encoded_chunks(normalize(df, cols), *plan)
        touched: set[tuple[str, int]] = set()
        if encoded is None:
            return touched
        appended = dict.fromkeys(expected, 0)
        try:
            for row in encoded.toLocalIterator(prefetchPartitions=True):
                target = self._log_for(row["topic"], row["partition"])
                target.append(row["data"])
                touched.add((target.topic, target.partition))
                appended[(row["task"], row["topic"], row["partition"])] += row["records"]
                _crash_point("after-append", batch_id)
        finally:
            encoded.unpersist()
        if appended != expected:  # the input changed between the two passes
            raise SinkSchemaError(
                "the micro-batch gave different rows on recompute; fix: make it deterministic "
                "(e.g. df.persist() before the sink)",
                batch_id=batch_id,
            )
        return touched

    def _log_for(self, topic: str, partition: int) -> Log:
        found = self.logs.get(topic, partition)
        if found is None:  # a routed topic seen for the first time
            topic_partitions(self.logs, topic, self.partitions)
            found = self.logs.get(topic, partition)
        assert found is not None
        return found


def _noop(point: str) -> None:
    del point


def _query_id(df: DataFrame) -> str | None:
    """The streaming query's id (kept in its checkpoint), None outside a streaming query."""
    with contextlib.suppress(Exception):
        value: Any = df.sparkSession.sparkContext.getLocalProperty(QUERY_ID_PROPERTY)
        return str(value) if value else None
    return None
