"""What ``kafkatier run`` checks once the stream has stopped, and the model it checks against.

The model of the events topic comes from the stream's own committed progress, never from the
logs: for the generated clickstream, the source offset of the last batch Spark committed (the
events are a pure function of it, see run_source); for a landing folder, the files Spark's
file-source log says the committed batches read.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from kafkatier.cli.config.loader import KafkatierConfig
from kafkatier.cli.run.job import committed_offset
from kafkatier.cli.run.source import EVENT_SCHEMA, clickstream_table
from kafkatier.cli.run.verify import (
    Check,
    check_events,
    check_latest,
    check_written_once,
    event_json,
    expected_states,
    replay,
    restore_one,
)
from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.store.object_store import ObjectStore

MODEL_CHUNK = 100_000
"""Events the model generates per Arrow batch (one Spark row of start offsets each)."""


def run_checks(
    config: KafkatierConfig,
    tiering: TieringConfig,
    store: ObjectStore,
    spark: Any,
    say: Callable[[str], None],
    served: Callable[[Any, Any], list[Check]] | None = None,
) -> list[Check]:
    """Restore and verify, replay and compare with the model; ``served`` adds the checks of
    clients that read through ``kafkatier serve``, given the two replays."""
    run = config.run
    checks = []
    for topic in (run.events_topic, run.state_topic):
        settings = config.topics.get(topic)
        if settings is None or not settings.config.remote_storage_enable:
            say(f"{topic} is not tiered (remote.storage.enable=false): nothing to restore")
            continue
        say(f"restoring {topic}-0 from {tiering.remote_url} and verifying it")
        checks.append(restore_one(store, topic, run.work_dir / f"restore-{topic}"))
    from kafkatier.sink import register_data_source

    register_data_source(spark)
    say(f"replaying {run.events_topic}, {run.state_topic} with spark.read.format('kafkatier') "
        "(log dir + remote store) and comparing in Spark")  # fmt: skip
    events = replay(spark, config.log_dir, tiering, run.events_topic)
    state = replay(spark, config.log_dir, tiering, run.state_topic)
    checks.append(spark_check("events: every event exactly once",
                              lambda: check_events(events, expected_events(config, spark))))
    states = expected_states(events)  # a plan: each check below runs it (reads events again)
    checks.append(spark_check("state: latest value per key", lambda: check_latest(state, states)))
    checks.append(spark_check("state: every record a state the job wrote, once",
                              lambda: check_written_once(state, states)))
    if served is not None:
        checks.extend(served(events, state))
    return checks  # fmt: skip


def spark_check(name: str, check: Callable[[], Check]) -> Check:
    """``check()``, or a failed check whose detail is the error's one line (a Spark job that
    fails, say out of memory, fails its check; the report then says which and why)."""
    try:
        return check()
    except Exception as exc:  # py4j and pyspark errors have no common root below Exception
        return Check(name, False, f"could not run: {one_line(exc)}")


def one_line(exc: BaseException) -> str:
    """The gist of ``exc``: a JVM error's own class and message, else the first line."""
    java = getattr(exc, "java_exception", None)
    text = str(java.toString()) if java is not None else str(exc)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def expected_events(config: KafkatierConfig, spark: Any) -> Any:
    """The model of the events topic as a DataFrame of event JSON (column ``v``)."""
    run = config.run
    if run.input == "clickstream":
        offset = committed_offset(run.checkpoint_dir)
        end = 0 if offset is None else int(offset["id"])
        base = 0 if offset is None else int(offset["base"])
        return event_json(clickstream_frame(spark, run.seed, run.users, base, end))
    files = [str(p) for p in committed_files(run.checkpoint_dir)]
    if not files:
        return event_json(spark.createDataFrame([], EVENT_SCHEMA))
    return event_json(spark.read.schema(EVENT_SCHEMA).json(files))


def clickstream_frame(spark: Any, seed: int, users: int, base_ms: int, end: int) -> Any:
    """Events ``0 <= i < end`` of the generated stream, generated on the executors."""

    def generate(batches: Iterator[Any]) -> Iterator[Any]:
        for batch in batches:
            for start in batch.column("id").to_pylist():
                stop = min(start + MODEL_CHUNK, end)
                yield from clickstream_table(seed, users, base_ms, start, stop).to_batches()

    starts = spark.range(0, end, MODEL_CHUNK, numPartitions=max(1, min(8, end // MODEL_CHUNK)))
    return starts.mapInArrow(generate, EVENT_SCHEMA)


def committed_files(checkpoint: Path) -> list[Path]:
    """The files Spark's file source read in the batches it committed (its metadata log)."""
    commits = [int(p.name) for p in (checkpoint / "commits").glob("[0-9]*")]
    if not commits:
        return []
    last, found = max(commits), {}
    for log in sorted((checkpoint / "sources" / "0").glob("[0-9]*")):
        for line in log.read_text().splitlines()[1:]:
            entry = json.loads(line)
            if entry["batchId"] <= last:
                found[entry["path"]] = Path(unquote(urlparse(entry["path"]).path))
    return [found[k] for k in sorted(found)]
