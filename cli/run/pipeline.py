"""The steps of ``kafkatier run`` (see kafkatier.cli.run.command): imported only when it runs, since
it brings in pyspark."""

from __future__ import annotations

import logging
import shutil
import signal
import threading
import time
from pathlib import Path
from typing import Any

from kafkatier.cli.config.loader import KafkatierConfig
from kafkatier.cli.run.checks import run_checks
from kafkatier.cli.run.job import BatchWriter, start_query, stop_query, wait_for_end
from kafkatier.cli.run.report import Outcome, pass_totals
from kafkatier.cli.run.serving import TailConsumer, served_by, start_tail, try_it_lines
from kafkatier.sink.sink import KafkaLogSink
from kafkatier.sink.txn import topic_partitions
from kafkatier.storage.cleaner.clean_pass import PartitionSummary, clean_log_dir
from kafkatier.storage.cleaner.compact import compact_log
from kafkatier.storage.errors import ConfigError
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.log import wall_clock_ms
from kafkatier.storage.log.writer_lock import writer_turn
from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.errors import RemoteStoreError
from kafkatier.tiering.sidecar.loop import Sidecar
from kafkatier.tiering.sidecar.metrics import serve_metrics
from kafkatier.tiering.sidecar.status import collect_status
from kafkatier.tiering.sidecar.tierer import PassResult
from kafkatier.tiering.store.object_store import ObjectStore

FINAL_PASSES = 3
log = logging.getLogger("kafkatier.run")


def say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def prepare(config: KafkatierConfig) -> None:
    """Reset (if asked), persist the topics' settings and create their partitions."""
    run = config.run
    if run.reset:
        if config.embedded_dir is None:
            raise ConfigError(f"{config.source}: run.reset=true wipes the job's state, but the "
                              "remote store is not the embedded one (kafkatier never deletes "
                              "a real bucket's data); set run.reset=false",
                              setting="run.reset")  # fmt: skip
        for folder in (*config.tiering.log_dirs, run.checkpoint_dir, run.work_dir,
                       config.embedded_dir):  # fmt: skip
            shutil.rmtree(folder, ignore_errors=True)
        say("reset: wiped " + ", ".join(str(p) for p in (*config.tiering.log_dirs,
            run.checkpoint_dir, run.work_dir, config.embedded_dir)))  # fmt: skip
    config.write_topic_configs()
    with writer_turn(config.log_dir, who="kafkatier run"), LogDirectory(config.log_dir) as logs:
        for name in (run.events_topic, run.state_topic):
            topic = config.topics.get(name)
            topic_partitions(logs, name, topic.partitions if topic and topic.partitions else 1)


def _codec(config: KafkatierConfig) -> str:
    """The sink's codec: the topics' compression.type when both name the same codec."""
    kinds = {t.config.compression_type for n, t in config.topics.items()
             if n in (config.run.events_topic, config.run.state_topic)}  # fmt: skip
    kind = kinds.pop() if len(kinds) == 1 else "producer"
    return "none" if kind in ("producer", "uncompressed") else kind


class SidecarThread:
    """The sidecar's passes in a thread of this process, every
    ``remote.log.manager.task.interval.ms`` (no file watcher: the job writes all the time, so
    the timer alone keeps passes regular), keeping every pass's result for the report."""

    def __init__(self, tiering: TieringConfig, store: ObjectStore) -> None:
        self.sidecar = Sidecar(tiering, store)
        self.passes: list[PassResult] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="sidecar", daemon=True)

    def _loop(self) -> None:
        server = serve_metrics(
            self.sidecar.metrics, self.sidecar.config.metrics_port, self.sidecar.config.metrics_host
        )
        try:
            while not self.stopping.is_set():
                try:
                    self._record(self.sidecar.run_pass())
                except RemoteStoreError as exc:  # the store went away: one line, the next pass
                    log.error("sidecar pass failed; retrying at the next one: %s", exc)
                except Exception:  # a file vanishing under the writer: the next pass
                    log.exception("sidecar pass failed; retrying at the next one")
                self.stopping.wait(self.sidecar.config.interval_ms / 1000)
        finally:
            if server is not None:
                server.shutdown()

    def _record(self, result: PassResult) -> None:
        self.passes.append(result)
        t = pass_totals([result])
        if t["uploaded_segments"] or t["local_segments_deleted"]:
            say(f"sidecar: {t['uploaded_segments']} segments uploaded, "
                f"{t['local_segments_deleted']} local segments deleted")  # fmt: skip

    def stop(self, timeout: float = 300) -> None:
        self.stopping.set()
        self.thread.join(timeout=min(2.0, timeout))
        if self.thread.is_alive():  # no wait of more than a moment goes unsaid
            until = time.strftime("%H:%M:%S", time.localtime(time.time() + timeout))
            say(f"waiting for the sidecar's pass in progress to end (at the latest {until})")
            self.thread.join(timeout=timeout)

    def final_passes(self) -> None:
        """Tier what the last batches closed, until a pass has nothing left to do."""
        for _ in range(FINAL_PASSES):
            result = self.sidecar.run_pass()
            self._record(result)
            if not any(pass_totals([result]).values()):
                break


def pipeline(
    config: KafkatierConfig, tiering: TieringConfig, spark: Any, bootstrap: str | None = None
) -> Outcome:
    """The job, the tiering after it, the checks; ``bootstrap``: where ``kafkatier serve``
    listens, if it runs (a consumer group then tails the events topic from the first batch on,
    and the checks read through it: kafkatier.cli.run.serving)."""
    run, store = config.run, tiering.open_store()
    topics = (run.events_topic, run.state_topic)
    tail = start_tail(bootstrap, run.events_topic) if run.verify else None
    try:
        outcome = stream_and_tier(config, tiering, store, spark, tail)
        if bootstrap is not None:
            outcome.serve_lines = try_it_lines(config, bootstrap, topics)
        if run.verify:
            served = served_by(bootstrap, tail, topics, say)
            outcome.checks = run_checks(config, tiering, store, spark, say, served)
        return outcome
    finally:
        if tail is not None:
            tail.halt()


def stream_and_tier(config: KafkatierConfig, tiering: TieringConfig, store: ObjectStore,
                    spark: Any, tail: TailConsumer | None = None) -> Outcome:  # fmt: skip
    """The streaming job with the sidecar beside it (and ``tail`` consuming), then the final
    passes."""
    run = config.run
    topics = (run.events_topic, run.state_topic)
    sink = KafkaLogSink(config.log_dir, compression=_codec(config), sink_id="kafkatier-run")
    writer = BatchWriter(sink, topics, run.batches, say)
    sidecar = SidecarThread(tiering, store) if run.sidecar else None
    if sidecar is not None:
        sidecar.thread.start()
    query = start_query(spark, run, writer)
    say(f"streaming {run.input} -> {', '.join(topics)} in {config.log_dir}")
    try:
        stopped_by = wait_for_end(query, run, writer)
    except BaseException:  # Ctrl-C, SIGTERM, a failed query: stop everything, then re-raise
        shutdown(query, writer, sink, sidecar, graceful=False)
        raise
    shutdown(query, writer, sink, sidecar, graceful=True)
    say(f"stream stopped ({stopped_by})")
    if tail is not None:
        tail.stream_stopped()
    outcome = Outcome(writer.stats)
    writer.stats.stopped_by = stopped_by
    deleted = pass_totals(sidecar.passes)["local_bytes_deleted"] if sidecar else 0
    outcome.bytes_written = _log_bytes(config.log_dir, topics) + deleted
    outcome.cleaner = clean_untiered(config)
    if sidecar is not None:
        say("final sidecar passes")
        sidecar.final_passes()
        outcome.passes = sidecar.passes
    outcome.statuses = collect_status(tiering, store)
    return outcome


def shutdown(query: Any, writer: BatchWriter, sink: KafkaLogSink, sidecar: SidecarThread | None,
             *, graceful: bool) -> None:
    """Stop the query (after Spark committed the last written batch, if ``graceful``), close
    the sink's logs and stop the sidecar, each step even if an earlier one failed; a second
    Ctrl-C or SIGTERM meanwhile is ignored so the processes are not left half-stopped."""
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        steps = [lambda: stop_query(query, writer, timeout=60 if graceful else 0), sink.close]
        if sidecar is not None:
            steps.append(lambda: sidecar.stop(timeout=300 if graceful else 10))
        for step in steps:
            try:
                step()
            except Exception:
                if graceful:
                    raise
                log.exception("while stopping")
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _log_bytes(log_dir: Path, topics: tuple[str, ...]) -> int:
    return sum(p.stat().st_size for t in topics for p in log_dir.glob(f"{t}-*/*.log"))


def clean_untiered(config: KafkatierConfig) -> list[PartitionSummary]:
    """Kafka's log cleaner over the compacted topics the sidecar does not tier (a tiered one is
    compacted remotely by the sidecar, and its local segments stay the writer's). Runs once the
    writer has stopped: the cleaner rewrites segments in place."""
    names = {t.name for t in config.topics.values()
             if t.config.is_compacted and not t.config.remote_storage_enable}  # fmt: skip
    names &= {config.run.events_topic, config.run.state_topic}
    if not names:
        return []
    say(f"log cleaner: compacting {', '.join(sorted(names))}")
    with writer_turn(config.log_dir, who="kafkatier run"), LogDirectory(config.log_dir) as logs:
        return clean_log_dir(logs, now_ms=wall_clock_ms(), compactor=compact_log, topics=names)
