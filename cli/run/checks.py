"""What ``kafkatier run`` checks once the stream has stopped, and the model it checks against.

The model of the events topic comes from the stream's own committed progress, never from the
logs: for the generated clickstream, the source offset of the last batch Spark committed (the
events are a pure function of it, see run_source); for a landing folder, the files Spark's
file-source log says the committed batches read.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from kafkatier.cli.config.loader import KafkatierConfig
from kafkatier.cli.run.job import committed_offset
from kafkatier.cli.run.source import clickstream_events
from kafkatier.cli.run.verify import (
    Check,
    check_events,
    check_state,
    reader_takes_remote_options,
    replay,
    restore_one,
)
from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.sidecar.status import PartitionStatus
from kafkatier.tiering.store.object_store import ObjectStore

_FIELDS = ("event_id", "user_id", "page", "event_type", "ts")


def run_checks(
    config: KafkatierConfig,
    tiering: TieringConfig,
    store: ObjectStore,
    spark: Any,
    statuses: list[PartitionStatus],
    say: Callable[[str], None],
) -> list[Check]:
    run = config.run
    topics = (run.events_topic, run.state_topic)
    checks = []
    for topic in topics:
        settings = config.topics.get(topic)
        if settings is None or not settings.config.remote_storage_enable:
            say(f"{topic} is not tiered (remote.storage.enable=false): nothing to restore")
            continue
        say(f"restoring {topic}-0 from {tiering.remote_url} and verifying it")
        checks.append(restore_one(store, topic, run.work_dir / f"restore-{topic}"))
    from kafkatier.sink import register_data_source
    register_data_source(spark)
    how = "log dir + remote store" if reader_takes_remote_options() else "restored + local"
    say(f"replaying {', '.join(topics)} with spark.read.format('kafkatier') ({how})")
    replayed = [
        replay(spark, config.log_dir, tiering, store, topic, statuses,
               run.work_dir / f"replay-{topic}")
        for topic in topics
    ]  # fmt: skip
    checks.append(check_events(replayed[0], expected_events(config)))
    checks.extend(check_state(replayed[1], replayed[0]))
    return checks


def expected_events(config: KafkatierConfig) -> list[dict[str, Any]]:
    run = config.run
    if run.input == "clickstream":
        offset = committed_offset(run.checkpoint_dir)
        if offset is None:
            return []
        return clickstream_events(run.seed, run.users, int(offset["base"]), int(offset["id"]))
    events = []
    for path in committed_files(run.checkpoint_dir):
        for line in path.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                events.append({k: row[k] for k in _FIELDS if row.get(k) is not None})
    return events


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
