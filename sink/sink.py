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
2. Recovery, at an instance's first batch and after a failed one: every decided batch whose
   staging files still exist (its partitions may not be durable) is completed, oldest first,
   where each partition's producer state shows it incomplete; any other open transaction of
   the producer (left by a version before the write-ahead log) is ended as that version's
   bookkeeping says (:mod:`kafkatier.sink.recovery`).
3. ``batch_id <= last_committed_batch``: a Spark replay of a batch already committed; skip it.
4. Encode on executors in one parallel job (:mod:`kafkatier.sink.encode`; at most ``max_tasks``
   tasks, by default as many as Spark runs at once and as the batch's size is worth:
   :class:`kafkatier.sink.plan.TaskLimit`) into
   staging files, which are the write-ahead log (:mod:`kafkatier.sink.wal`); the driver reads
   and checks every batch (:func:`kafkatier.sink.append.check_all`) and fsyncs the files. A
   micro-batch without rows ends here: nothing to decide, write or flush.
5. The commit point: the bookkeeping file records the batch (``wal``: its files, and each
   partition's spans, first sequence and records) as ``last_committed_batch``. Nothing of the
   batch has reached a partition before it.
6. Each partition's batches get their sequences and offsets and are written with the COMMIT
   marker in one append (``Log.append_committed``); then the call returns, the batch readable.
   The partitions are made durable later, once every few batches (:mod:`kafkatier.sink.flushes`:
   a flush after every batch cost the kernel a writeback of every file a batch touched), by one
   syncfs begun in a thread (``LogDirectory.flush_data_later``) and finished while the next
   batch's encode job runs, before it decides anything; only then are the staging files of the
   batches it covered removed, and until then the bookkeeping file keeps their write-ahead
   records (``deferred``), so the write-ahead log can complete them. The index entries and
   producer entries of the appends the C library made (``committed_all.Later``) are set beside
   the next batch's job, first: nothing reads them before.

A crash before (5) leaves nothing in the partitions and Spark replays the batch (its commit log
is written after ``foreachBatch`` returns). A crash or power loss after it leaves a decided batch
that the next start completes, and the replay is skipped by (3). Either way each row is written
once, and no consumer, ``read_uncommitted`` ones included, ever sees an aborted copy. A batch
failing with an error is recovered the same way at once. The Spark query id is recorded: a
different query (a new checkpoint) replaying old batch ids through the same sink id is an
error, not a silent skip. Indexes are never flushed per batch (Kafka flushes them at roll; the
loader rebuilds them above the recovery point).

Several writers may share a log dir (sinks with other sink ids, on the same topics or others;
``kafkatier produce``; ``kafkatier clean``): each micro-batch is also one turn on the log dir
(:mod:`kafkatier.storage.log.writer_lock`), and a sink whose log dir another writer changed since
its last turn reopens it before writing, so appends never interleave and never use stale offsets.
It writes nothing from its older view (``LogDirectory.abandon``: no index entry, trim or
checkpoint), and recovery completes the batches that waited for a flush.

Driver memory: the Python driver keeps the parsed batches of at most ``append.KEPT_BYTES``
between the check and the append and reads the rest again, one encoded piece (at most
``encode.CHUNK_BYTES``, or one record batch) at a time. Executors that see the driver's
filesystem (by default: local mode, the staging files in the log dir; ``staging=`` names a
shared directory) write their pieces to staging files and return only where they are
(:mod:`kafkatier.sink.stage`); otherwise (``staging=False``) the pieces are persisted to
executor disk and fetched one task at a time (``toLocalIterator``: the driver JVM buffers one
task's output) into a staging file in the log dir. The executors' encoder runs in
Spark's JVM when it can (:mod:`kafkatier.sink.jvm`), else in Python workers. Crash tests stop
the driver at chosen steps through :mod:`kafkatier.sink.hooks`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from kafkatier.sink import hooks
from kafkatier.sink.append import check_all, check_space, to_wal, write_all
from kafkatier.sink.bookkeeping import (
    ProducerFencedError,
    SinkState,
    StateFile,
    bump_epoch,
    exclusive_lock,
)
from kafkatier.sink.encode import EncodePlan
from kafkatier.sink.held_logs import HeldLogs
from kafkatier.sink.hooks import crash_points, no_crash
from kafkatier.sink.jvm import EncoderChoice
from kafkatier.sink.names import check_topic, sink_id_of
from kafkatier.sink.pieces import Encoded, encoded_spans
from kafkatier.sink.plan import SinkSettings, TaskLimit, build_plan, producer_sequences
from kafkatier.sink.recovery import epoch_in_logs, recover
from kafkatier.sink.schema import InputColumns, SinkSchemaError, check_schema, normalize
from kafkatier.sink.stage import (
    LoadBuffers,
    StagingFiles,
    StagingPlace,
    batch_place,
    remove_leftovers,
    spark_master,
    staging_base,
    staging_wanted,
)
from kafkatier.sink.stop import close_at_exit, close_when_stopped
from kafkatier.sink.txn import topic_partitions
from kafkatier.sink.wal import sync_files
from kafkatier.storage import collector
from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.config.topic_files import TopicConfigStore
from kafkatier.storage.log.committed_all import Later
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.log import Log, wall_clock_ms
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
        max_tasks: int | None = None,
    ) -> None:
        self.log_dir = Path(log_dir).absolute()  # a relative one is the driver's, as Spark's
        self.topic = topic
        self.partitions = partitions
        codec = Codec.parse(compression)
        _check_level(codec, compression_level)
        self.settings = SinkSettings(topic, partitions, codec, compression_level)
        self.config = dict(config or {})
        if topic is not None:
            check_topic(topic, column=False)
        chosen = sink_id_of(topic, sink_id)
        if self.config and topic is None:
            raise SinkSchemaError("config= applies to one topic; fix: also pass topic=")
        self.sink_id = chosen
        self.staging = staging
        shared = staging_base(staging)  # None: staging files in the log dir
        self.shared_staging = None if shared is None else Path(shared).absolute()  # as log_dir
        self.encoder = EncoderChoice(encoder)
        self.tasks = TaskLimit(max_tasks)  # refuses a negative one
        self._epoch: int | None = None  # this instance's producer epoch and id, once started
        self._producer_id: int | None = None
        self._held = HeldLogs(self.log_dir)  # the open logs, and what waits on them
        self._watched: set[str] = set()  # queries whose end closes the logs (sink/stop.py)
        self._turns = threading.Lock()  # a batch and a close from the listener's thread
        self._recovered = False  # whether this instance's logs need no recovery
        self._state = StateFile(self.log_dir, chosen)  # the bookkeeping file, as last saved
        self._meanwhile: ThreadPoolExecutor | None = None  # see _encode
        self._load_buffers = LoadBuffers()  # the staging files' loads, reused by every batch

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        try:
            self.log_dir.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):  # a file where the log dir would be
            raise SinkSchemaError(f"log dir {self.log_dir} is not a directory (a file is at "
                                  "that path or above it)", log_dir=str(self.log_dir)) from None
        with (
            collector.paused(),  # every partition's check and append allocate a few objects
            self._turns,
            exclusive_lock(self.log_dir, self.sink_id),
            writer_turn(self.log_dir, who=f"sink {self.sink_id}") as turn,
        ):
            if self._held.is_open and turn.changed_since(self._held.generation):
                log.info("sink %s: %s changed by another writer", self.sink_id, self.log_dir)
                self._abandon_logs()
            elif self._held.is_open:
                self.logs.release_removed_segments()  # local retention of the sidecar
            self._held.generation = turn.token
            self._batch(df, batch_id)

    def _batch(self, df: DataFrame, batch_id: int) -> None:
        """One call of ``foreachBatch`` in this sink's turn on the log dir. Another query's
        batch is refused before anything is done: its instance's start would fence the
        query the sink belongs to (a new epoch) and save its settings."""
        query_id = hooks.query_id(df)
        self._check_query(self._state.load(), query_id, batch_id)
        state = self._begin()
        if query_id is not None and query_id not in self._watched:
            if not self._watched:
                close_at_exit(self._close_when_idle)
            self._watched.add(query_id)
            close_when_stopped(df.sparkSession, query_id, self.close)
        if batch_id <= state.last_committed_batch:
            log.info("sink %s: batch %d already committed, skipped", self.sink_id, batch_id)
            return
        cols = check_schema(df.schema, fixed_topic=self.topic is not None)
        try:
            self._write_batch(df, batch_id, state, cols, query_id)
        except BaseException:
            self._recover_after_failure()
            raise

    # ------------------------------------------------------------------ instance start, recovery

    @property
    def logs(self) -> LogDirectory:
        return self._held.logs

    def _begin(self) -> SinkState:
        """Fence or be fenced, then finish whatever a previous run (or a failed batch) left.

        Fencing compares the producer id as well as the epoch: when the epochs are exhausted a
        new instance moves to a new producer id, whose epoch starts again at 0."""
        state = self._state.load()
        if self._epoch is None:
            if state.producer_epoch < 0:  # no bookkeeping file: the partitions may know more
                state.producer_epoch = epoch_in_logs(self.logs, state.producer_id)
            bump_epoch(state)  # or a new producer id (bookkeeping.rotate_producer_id)
            self._state.save(state)
            self._epoch = state.producer_epoch
            self._producer_id = state.producer_id
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
        if not self._recovered:
            self._held.flushes.forget()  # what waited is in the bookkeeping file: recovered
            recover(self.logs, state, epoch=self._epoch_now(), sink_id=self.sink_id,
                    log_for=self._log_for, save=self._state.save)  # fmt: skip
            remove_leftovers(self.log_dir, self.sink_id, self.shared_staging)
            self._recovered = True
        return state

    def _close_when_idle(self, wait_s: float) -> None:
        """:meth:`close` unless a batch is still under way after ``wait_s`` (the driver is
        exiting: ``stop.close_at_exit``)."""
        if not self._held.is_open:
            return
        if not self._turns.acquire(timeout=wait_s):
            log.warning("sink %s: a batch still under way at exit; its logs are left for the "
                        "next start to recover", self.sink_id)  # fmt: skip
            return
        self._turns.release()
        self.close()

    def close(self) -> None:
        """Close the logs cleanly (checkpoints, clean-shutdown marker), in a turn on the log dir
        as every write to it; a later batch reopens them."""
        with self._turns:
            self._load_buffers.clear()
            if self._held.is_open:
                self._close_in_turn()
            if self._meanwhile is not None:
                self._meanwhile.shutdown()
                self._meanwhile = None

    def _close_in_turn(self) -> None:
        with writer_turn(self.log_dir, who=f"sink {self.sink_id}") as turn:
            if turn.changed_since(self._held.generation):
                self._abandon_logs()
                if any(wal.pending() for wal in self._state.load().decided):
                    with contextlib.suppress(ProducerFencedError):  # the newer one recovers
                        self._begin()  # what waited, completed in the logs as they are now
                self._held.forget()
            else:
                self._held.close()

    def _abandon_logs(self) -> None:
        """``HeldLogs.abandon``: the logs' stale view dropped, and recovery due at once."""
        self._recovered = False
        self._held.abandon()

    def _recover_after_failure(self) -> None:
        """Reload the logs from disk (in-memory state may be half-updated) and complete the
        decided batch, if any (a failure before the decision left nothing to end)."""
        self._recovered = False
        self._state.forget()  # read the file again
        try:
            self._held.drop()
            self._begin()
        except Exception:  # the next batch or restart recovers from disk
            log.exception("sink %s: recovery after a failed batch failed", self.sink_id)
            self._held.lost()

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
        """Steps 4 to 6 of the protocol (module docstring)."""
        crash = crash_points(batch_id)
        encode_plan = build_plan(self.logs, self.settings, state.producer_id, self._epoch_now())
        staged = staging_wanted(self.staging, spark_master(df))
        place = batch_place(self.log_dir, self.sink_id, self.shared_staging if staged else None,
                            batch_id)  # fmt: skip
        if staged:
            encode_plan = dataclasses.replace(
                encode_plan, staging_dir=place.directory, staging_prefix=place.prefix
            )
        decided = False
        try:
            encoded, sequences = self._encode(df, cols, encode_plan, place)
            if self.topic is not None and self.logs.get(self.topic, 0) is None:
                topic_partitions(self.logs, self.topic, self.partitions)  # new: rows accepted
            if not encoded.groups:  # no row: nothing to decide or flush (nor does a replay)
                place.remove()
                return
            with StagingFiles(buffers=self._load_buffers) as files:
                checked = check_all(encoded, sequences, files)
                check_space(self.log_dir, checked)
                wal = to_wal(batch_id, state.producer_id, self._epoch_now(), checked,
                             self._placed())  # fmt: skip
                sync_files(wal.files, place.durable_dirs())
                crash("after-stage-sync")
                self._state.save(dataclasses.replace(  # the commit point
                    state, wal=wal, deferred=self._held.flushes.deferred,
                    last_committed_batch=batch_id, query_id=query_id or state.query_id,
                ))  # fmt: skip
                decided = True
                crash("after-decide")
                marker = (state.producer_id, self._epoch_now(), wall_clock_ms())
                hook = None if crash is no_crash else functools.partial(crash, "after-append")
                books = Later()
                write_all(checked, self._log_for, files, marker, hook, books,
                          self._held.carried)  # fmt: skip
        except BaseException:
            if not decided:
                place.remove()
            raise
        crash("after-appends")
        self._held.books = books.apply
        self._held.flushes.add(wal, place)
        rolled = self.logs.rolled_since_flush  # the sidecar uploads a rolled segment once flushed
        if rolled or self._held.flushes.due(self._configs(encode_plan)):
            self._held.flushes.begin(self.logs)
        if rolled:
            self._held.settle()

    def _encode(
        self, df: DataFrame, cols: InputColumns, plan: EncodePlan, place: StagingPlace
    ) -> tuple[Encoded, dict[tuple[str, int], int]]:
        """The encode job's spans, and the producer's next sequences; meanwhile, in a thread
        (the driver's Python mostly waits for Spark then), the previous batch's partitions
        finish becoming durable (before this batch decides anything) and the sequences are
        read: at 1,024 partitions about 20 ms a batch, nearly all of it the wait for the
        syncfs, 2 ms the sequences (ad hoc timers, 2026-11-29). Holding the thread's Python
        until the driver's waits for the job made no difference to the job's start (11.1-11.7
        ms from the call either way at 1,024 partitions, Spark's REST times). Nothing else
        touches the logs until both are done."""
        rows = normalize(df, cols)
        partitions = sum([t.partitions for t in plan.topics.values()])
        tasks, open_bytes = self.tasks.for_frame(rows, partitions)
        plan = dataclasses.replace(plan, max_tasks=tasks, open_batch_bytes=open_bytes)
        encoder = self.encoder.for_frame(df)
        meanwhile = self._helper().submit(self._before_decision, plan)
        try:
            encoded = encoded_spans(rows, plan, place, encoder)
        except BaseException:
            with contextlib.suppress(BaseException):  # the job's failure is the one to report
                meanwhile.result()
            raise
        return encoded, meanwhile.result()

    def _before_decision(self, plan: EncodePlan) -> dict[tuple[str, int], int]:
        self._held.catch_up()  # the previous batch's books set, a flush under way finished
        return producer_sequences(self.logs, plan)

    def _configs(self, plan: EncodePlan) -> list[LogConfig]:
        """The configs of the topics the plan writes (each one's first partition's)."""
        found = (self.logs.get(topic, 0) for topic in plan.topics)
        return [log.config for log in found if log is not None]

    def _helper(self) -> ThreadPoolExecutor:
        if self._meanwhile is None:
            self._meanwhile = ThreadPoolExecutor(1, thread_name_prefix=f"sink-{self.sink_id}")
        return self._meanwhile

    def _placed(self) -> Callable[[str, int], tuple[int, str]]:
        """A partition's log end offset and its topic's id, for the write-ahead record (a
        routed topic's partition is created here, before the decision, as ``topic=``'s)."""
        ids: dict[str, str] = {}

        def placed(topic: str, partition: int) -> tuple[int, str]:
            end = self._log_for(topic, partition).log_end_offset
            if topic not in ids:
                ids[topic] = self.logs.topic_id(topic) or ""
            return end, ids[topic]

        return placed

    def _log_for(self, topic: str, partition: int) -> Log:
        if topic != self.topic:  # a 'topic' column's value (topic= is checked when made)
            check_topic(topic, column=True)
        found = self.logs.get(topic, partition)
        if found is None:  # a routed topic seen for the first time
            topic_partitions(self.logs, topic, self.partitions)
            found = self.logs.get(topic, partition)
        assert found is not None
        return found


def _check_level(codec: Codec, level: int | None) -> None:
    """``compression_level=`` in Kafka's range for the codec (its ``compression.<codec>.level``
    setting), checked when the sink is made: the JVM encoder wrote an out-of-range level
    silently or failed mid-job with a bare IllegalArgumentException."""
    if level is not None and codec in (Codec.GZIP, Codec.LZ4, Codec.ZSTD):
        key = f"compression.{codec.name.lower()}.level"
        LogConfig.from_properties({key: str(level)}, source="KafkaLogSink(compression_level=...)")
