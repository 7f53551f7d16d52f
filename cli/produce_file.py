"""``kafkatier produce``'s work: one input file appended to a topic's partitions, what each
partition got printed at the end (the parser is cli/produce.py, which imports none of this)."""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from kafkatier.cli.appends import Appends
from kafkatier.cli.formats import detect_format
from kafkatier.cli.inputs import prefetched, read_chunks
from kafkatier.cli.progress import progress_bar
from kafkatier.sink.others import complete_other_sinks
from kafkatier.storage.arrow.record_rules import RecordRules
from kafkatier.storage.checkpoint.checkpoint_file import TOPIC_NAME_RULE, is_valid_topic_name
from kafkatier.storage.config.internal_topics import not_producible
from kafkatier.storage.config.log_config import parse_overrides
from kafkatier.storage.errors import ConfigError
from kafkatier.storage.log.append import LogAppendInfo
from kafkatier.storage.log.creation import check_room
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.log.log import Log, wall_clock_ms
from kafkatier.storage.log.writer_lock import writer_turn


@dataclass
class Summary:
    """Records and offsets written per partition."""

    records: dict[int, int] = field(default_factory=dict)
    ranges: dict[int, tuple[int, int]] = field(default_factory=dict)

    def add(self, partition: int, first: int, last: int, count: int) -> None:
        self.records[partition] = self.records.get(partition, 0) + count
        low = self.ranges.get(partition, (first, last))[0]
        self.ranges[partition] = (low, last)

    def appended(self, log: Log, info: LogAppendInfo) -> None:
        self.add(log.partition, info.first_offset, info.last_offset, info.num_records)


def produce(args: argparse.Namespace) -> int:
    """``kafkatier produce`` with its parsed arguments (cli/produce.py)."""
    if not args.input.is_file():
        print(f"kafkatier produce: error: no such input file: {args.input}", file=sys.stderr)
        return 2
    if not is_valid_topic_name(args.topic):
        print(
            f"kafkatier produce: error: illegal Kafka topic name {args.topic!r}: "
            f"{TOPIC_NAME_RULE}",
            file=sys.stderr,
        )
        return 2
    if (why := not_producible(args.topic)) is not None:
        print(f"kafkatier produce: error: {why}", file=sys.stderr)
        return 2
    fmt = detect_format(args.input, args.format)
    overrides = parse_overrides(args.config, source="--config")
    chunks = prefetched(read_chunks(args.input, fmt))  # reading starts now
    summary = Summary()
    placed: tuple[list[Log], list[int]] | None = None  # the partitions and their ends before
    whole = False
    try:
        with (
            writer_turn(args.log_dir, who="kafkatier produce"),
            LogDirectory(args.log_dir, max_open_files=args.max_open_files) as log_dir,
        ):
            complete_other_sinks(log_dir, None, wall_clock_ms())  # a sink's half-appended batch
            count = _partition_count(log_dir, args.topic, args.partitions)
            config = log_dir.topic_configs.check(args.topic, overrides, source="--config")
            rules = RecordRules.of(config, wall_clock_ms())
            chunks = _first_checked(chunks, count, rules, args.topic)  # nothing saved or created
            # for a refused file
            logs = _partitions(log_dir, args.topic, count, overrides)
            placed = (logs, [log.log_end_offset for log in logs])
            _append_file(logs, chunks, args.compression, summary)
            whole = True
    except Exception as exc:  # a full disk: say what is in the log, what is not
        if placed is not None:  # also when closing the log dir failed after every append
            exc.add_note(_partial(*placed, whole=whole))
        raise
    # closing the log dir flushed every partition once, in parallel: the records are durable
    _print_summary(args.topic, summary)
    return 0


def _first_checked(
    chunks: Iterator[pa.RecordBatch], count: int, rules: RecordRules, topic: str
) -> Iterator[pa.RecordBatch]:
    """``chunks``, its first read, its partitions placed and its records checked against the
    topic's ``rules`` now: a file refused for its columns, a row's partition, a missing key or
    a timestamp out of range in its first chunk (or empty) leaves no topic, partitions or
    saved settings."""
    from kafkatier.storage.partitioner import assign_partitions

    first = next(chunks, None)
    if first is None:
        return iter(())
    names = first.schema.names
    assign_partitions(first.column("key") if "key" in names else None, count,
                      explicit=first.column("partition") if "partition" in names else None,
                      rows=len(first))  # fmt: skip
    rules.check(first, topic)
    return itertools.chain([first], chunks)


def _partition_count(log_dir: LogDirectory, topic: str, wanted: int | None) -> int:
    """An existing topic's partition count (another is an error), else ``wanted`` (or 1)."""
    existing = log_dir.partition_count(topic)
    if existing is not None and wanted is not None and wanted != existing:
        raise ConfigError(
            f"topic {topic!r} already has {existing} partitions on disk; kafkatier never "
            "re-partitions a topic (omit --partitions or pass the same count)",
            setting="--partitions",
            value=wanted,
        )
    count = existing or (1 if wanted is None else wanted)
    if count < 1:
        raise ConfigError("--partitions must be at least 1", setting="--partitions", value=count)
    if existing is None:  # before its settings are saved
        check_room(log_dir.path, topic, count)
    return count


def _partitions(
    log_dir: LogDirectory, topic: str, count: int, overrides: dict[str, str]
) -> list[Log]:
    """The topic's ``count`` logs, created if new, with ``overrides`` saved."""
    config = log_dir.topic_configs.update(topic, overrides, source="--config")
    log_dir.create_partitions(topic, count)
    logs = [log_dir.logs[(topic, p)] for p in range(count)]
    for log in logs:
        log.config = config
    return logs


def _append_file(
    logs: list[Log], chunks: Iterator[pa.RecordBatch], compression: str | None, summary: Summary
) -> None:
    """Append the file's records to ``logs``, recording in ``summary`` what each got."""
    # Imported here, not at the top: numba's import (about 0.4 s, the partitioner's and the
    # encoder's kernels) overlaps the reading of the file's first chunks (``prefetched``).
    from kafkatier.storage.partitioner import assign_partitions, keyless_rows

    keyless = 0
    with (
        progress_bar(sys.stderr.isatty(), desc="records", unit="rec") as progress,
        Appends(summary.appended) as appends,
    ):
        for chunk in chunks:
            names = chunk.schema.names
            keys = chunk.column("key") if "key" in names else None
            explicit = chunk.column("partition") if "partition" in names else None
            parts = assign_partitions(keys, len(logs), explicit=explicit, round_robin_start=keyless,
                                      rows=len(chunk))  # fmt: skip
            keyless += keyless_rows(keys, explicit, len(chunk))
            _append_chunk(logs, chunk, parts, compression, appends)
            if progress is not None:
                progress(len(chunk))


def _append_chunk(
    logs: list[Log], chunk: pa.RecordBatch, parts: np.ndarray, compression: str | None,
    appends: Appends,
) -> None:  # fmt: skip
    from kafkatier.storage.arrow.log import encode_for  # see _append_file

    ordered = pa.Table.from_batches([chunk])
    if len(parts) > 1 and bool((parts[1:] < parts[:-1]).any()):
        ordered = ordered.take(_indices(np.argsort(parts, kind="stable")))
    counts = np.bincount(parts, minlength=len(logs))
    encoded = []
    start = 0
    for partition, count in enumerate(counts.tolist()):
        if count:
            log = logs[partition]
            encoded.append((log, encode_for(log, ordered.slice(start, count), codec=compression)))
        start += count
    appends.submit(encoded)


def _indices(order: np.ndarray) -> pa.Array:
    """``order`` as an Arrow int64 array over its own buffer: ``pa.array`` of a NumPy array
    would import pandas (0.3 s of start-up, to check whether it was given a DataFrame)."""
    order = np.ascontiguousarray(order, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(order), [None, pa.py_buffer(order)])


def _partial(logs: list[Log], ends: list[int], *, whole: bool = False) -> str:
    """What an append that failed midway left in the log (``ends``: the log end offsets
    before it): whole batches of the first records, as a producer's acknowledged sends, and
    none of the rest. ``whole``: every append was done and closing the log dir failed (an
    index entry or a producer snapshot not written), which the next open recovers."""
    added = [(log, end) for log, end in zip(logs, ends, strict=True) if log.log_end_offset > end]
    if not added:
        return "no record of the input was appended"
    total = sum(log.log_end_offset - end for log, end in added)
    ranges = ", ".join(
        f"{log.topic}-{log.partition} offsets {end}..{log.log_end_offset - 1}"
        for log, end in added
    )
    if whole:
        return (f"every record of the input ({total}) was appended ({ranges}) before closing the "
                "log dir failed; the next open recovers it: do not produce the input again")
    return f"{total} records of the input were appended before it ({ranges}), the rest were not"


SHOWN_PARTITIONS = 10
"""Partitions the summary lists one by one; past them, one line for the rest (a topic of
thousands of partitions printed a line each)."""


def _print_summary(topic: str, summary: Summary) -> None:
    total = sum(summary.records.values())
    print(f"produced {total} records to {topic}")
    partitions = sorted(summary.records)
    for partition in partitions[:SHOWN_PARTITIONS]:
        first, last = summary.ranges[partition]
        count = summary.records[partition]
        print(f"  {topic}-{partition}: {count} records, offsets {first}..{last}")
    rest = [summary.records[p] for p in partitions[SHOWN_PARTITIONS:]]
    if rest:
        print(f"  ... and {len(rest)} more partitions, {min(rest)} to {max(rest)} records each")
