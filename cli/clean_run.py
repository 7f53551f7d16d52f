"""``kafkatier clean``'s work: one pass of retention and compaction over a log dir, or with
``--remote`` over the tiered copies (the parser is cli/clean.py, which imports none of this)."""

from __future__ import annotations

import argparse
import json
import mmap
import sys
from collections.abc import Sequence
from pathlib import Path

from kafkatier.sink.others import complete_other_sinks
from kafkatier.storage.cleaner.clean_pass import (
    COMPACTION_UNAVAILABLE,
    Compactor,
    PartitionSummary,
    clean_log_dir,
    total,
)
from kafkatier.storage.config.internal_topics import partitions_on_disk
from kafkatier.storage.config.log_config import LogConfig, parse_overrides
from kafkatier.storage.config.topic_files import TopicConfigStore
from kafkatier.storage.errors import ConfigError, KafkaTierError
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.log import wall_clock_ms
from kafkatier.storage.log.writer_lock import writer_turn
from kafkatier.storage.record.records import iter_batches
from kafkatier.storage.verify.files import is_log_dir


def clean(args: argparse.Namespace) -> int:
    """The command, with its parsed arguments."""
    if args.remote:
        return run_remote(args)
    if args.delete_stale:
        print("kafkatier clean: error: --delete-stale goes with --remote", file=sys.stderr)
        return 2
    path: Path | None = args.log_dir
    if path is None:
        print("kafkatier clean: error: LOG_DIR is required (or --remote)", file=sys.stderr)
        return 2
    if not path.is_dir() or not is_log_dir(path):
        print(f"kafkatier clean: error: not a Kafka log dir: {path}", file=sys.stderr)
        return 2
    configs = resolve_configs(path, args.topic, parse_overrides(args.config, source="--config"))
    selected = set(configs) if args.topic is None else {args.topic}
    compacted = sorted(t for t in selected if configs[t].is_compacted)
    check_keyed(path, compacted)
    compactor = load_compactor() if compacted else None
    with (
        writer_turn(path, who="kafkatier clean"),
        LogDirectory(path, config_for=configs.__getitem__) as log_dir,
    ):
        complete_other_sinks(log_dir, None, wall_clock_ms())  # a sink's half-appended batch
        summaries = clean_log_dir(
            log_dir, now_ms=wall_clock_ms(), compactor=compactor, topics=selected
        )
        waiting = [p for log in log_dir.logs.values() for p in log.pending_deletions.paths]
    print_summaries(summaries, as_json=args.json, waiting=waiting)
    failed = [s for s in summaries if s.error]
    for s in failed:
        print(f"kafkatier clean: error: {s.topic}-{s.partition} in {path} was not cleaned: "
              f"{s.error}", file=sys.stderr)  # fmt: skip
    missing = [
        f"{s.topic}-{s.partition}" for s in summaries if s.compaction == COMPACTION_UNAVAILABLE
    ]
    if missing:
        print("kafkatier clean: error: compaction is not available in this installation "
              "(kafkatier.storage.cleaner.compact is missing); not compacted: "
              f"{', '.join(missing)}", file=sys.stderr)  # fmt: skip
    return 1 if failed or missing else 0


def print_waiting(paths: Sequence[Path]) -> None:
    """Say that the deleted segments' space comes back later (a user cleaning a full disk
    expects it at once), and how to have it now."""
    sizes = [p.stat().st_size for p in paths if p.exists()]
    if sizes:
        print(f"{len(sizes)} files of deleted segments ({sum(sizes)} bytes) are kept as "
              ".deleted for readers (file.delete.delay.ms) and removed at the next open of the "
              "log dir; --config file.delete.delay.ms=0 frees their space at once")


def run_remote(args: argparse.Namespace) -> int:
    """``--remote``: one remote-compaction pass for the sidecar configuration named by the
    ``--config`` value that is a file; the ``KEY=VALUE`` ones override topic settings."""
    from kafkatier.cli.config.loader import load_config
    from kafkatier.cli.config.remote import remote_storage
    from kafkatier.tiering.cleaner.clean_pass import RemotePass

    files = [v for v in args.config if Path(v).is_file() or "=" not in v]  # not KEY=VALUE: a
    # file, there or not (its loader names what is wrong with it)
    settings = [v for v in args.config if v not in files]
    if args.log_dir is not None or len(files) != 1:
        print("kafkatier clean: error: --remote takes no LOG_DIR and exactly one --config FILE "
              "(kafkatier.properties or the sidecar properties)", file=sys.stderr)  # fmt: skip
        return 2
    overrides = parse_overrides(settings, source="--config")
    LogConfig().with_overrides(overrides, source="--config")
    with remote_storage(load_config(Path(files[0]))) as config:  # embedded S3 started if asked
        outcomes = RemotePass(config, config.open_store(), overrides).run(
            args.topic, delete_stale=args.delete_stale)
    for o in outcomes:
        r = o.result
        if args.json:
            print(json.dumps(o.to_json()))
        elif o.stale_topic_id is not None:
            state = f"error: {o.error}" if o.error else "deleted"
            print(f"{o.topic}-{o.partition} [remote, stale topic id {o.stale_topic_id}]: "
                  f"{o.stale_segments_deleted} segments, {state}")
        else:
            state = f"error: {o.error}" if o.error else ("compacted" if r.cleaned else
                                                         "not due (dirty ratio / lag)")  # fmt: skip
            print(f"{o.topic}-{o.partition} [remote]: {r.bytes_before} -> {r.bytes_after} bytes, "
                  f"{r.segments_before} -> {r.segments_after} segments, {r.records_removed} "
                  f"records removed, {o.orphans_removed} orphans swept, {state}")  # fmt: skip
    return 1 if any(o.error for o in outcomes) else 0


def resolve_configs(
    path: Path, topic: str | None, overrides: dict[str, str]
) -> dict[str, LogConfig]:
    """Every topic's settings (the selected ones with ``overrides``), all validated up front:
    opening the log dir needs them all."""
    store = TopicConfigStore(path)
    on_disk = partitions_on_disk(path)
    if topic is not None and topic not in on_disk:
        raise ConfigError(f"no partitions of topic {topic!r} in {path}", setting="--topic")
    LogConfig().with_overrides(overrides, source="--config")  # checked even with no topics
    configs = {}
    for name in on_disk:
        config = store.get(name)
        if topic is None or name == topic:
            config = config.with_overrides(overrides, source="--config")
        configs[name] = config
    return configs


def check_keyed(path: Path, topics: list[str]) -> None:
    """Compaction keeps the latest record per key and drops keyless ones: a compacted partition
    holding records but no key at all would lose everything, which is a configuration error."""
    on_disk = partitions_on_disk(path)
    for topic in topics:
        for directory in on_disk[topic].values():
            if keyed_state(directory) is False:
                raise ConfigError(
                    f"cleanup.policy=compact, but {directory.name} has records and none has a "
                    "key: compaction would remove them all (use cleanup.policy=delete)",
                    setting="cleanup.policy", partition=directory.name,
                )  # fmt: skip


def keyed_state(directory: Path) -> bool | None:
    """True once a data record with a key is found, False if there are records but no key,
    None for a partition without data records. Reads ``.log`` files only, never writes."""
    records = False
    for log_file in sorted(directory.glob("*.log")):
        size = log_file.stat().st_size
        if size == 0:
            continue
        with log_file.open("rb") as f:  # the map outlives the file; batches are views into it
            view = memoryview(mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ))
        try:
            for batch in iter_batches(view, 0, size, file=str(log_file)):
                if batch.is_control:
                    continue
                for record in batch.records():
                    if record.key is not None:
                        return True
                    records = True
        except KafkaTierError:
            pass  # damage: opening the log recovers it; judge the records before it
    return False if records else None


def load_compactor() -> Compactor | None:
    """The log cleaner, imported only when a compacted topic needs it."""
    try:
        from kafkatier.storage.cleaner.compact import compact_log
    except ModuleNotFoundError as exc:
        if exc.name != "kafkatier.storage.cleaner.compact":
            raise
        return None
    return compact_log


def print_summaries(
    summaries: list[PartitionSummary], *, as_json: bool, waiting: Sequence[Path] = ()
) -> None:
    for s in summaries:
        if as_json:
            print(json.dumps(s.to_json()))
            continue
        print(f"{s.topic}-{s.partition} [{s.cleanup_policy}]: {s.bytes_before} -> "
              f"{s.bytes_after} bytes, {s.segments_deleted} segments deleted, "
              f"{s.records_removed} records removed, tombstones {s.tombstones_kept} kept / "
              f"{s.tombstones_dropped} dropped, log start {s.log_start_before} -> "
              f"{s.log_start_after}, compaction {s.compaction}")  # fmt: skip
    sums = total(summaries)
    if as_json:
        print(json.dumps({"total": sums}))
        return
    print_waiting(waiting)
    count = sums["partitions"]
    print(f"total: {count} partition{'' if count == 1 else 's'}, {sums['bytes_before']} -> "
          f"{sums['bytes_after']} bytes, {sums['segments_deleted']} segments deleted, "
          f"{sums['records_removed']} records removed, tombstones {sums['tombstones_kept']} kept / "
          f"{sums['tombstones_dropped']} dropped")  # fmt: skip
