"""Options of the ``kafkatier`` data source: the subset of Spark's Kafka source options that mean
something for files, with Spark's names, defaults and rules, and errors naming the option.

Offsets use Spark's forms: ``earliest``, ``latest`` or JSON ``{"topic":{"0":23,"1":-2}}`` where
-2 means earliest and -1 latest. Batch queries default to earliest..latest and refuse a
``latest`` start or an ``earliest`` end; streaming queries start at ``latest`` by default and take
no ending options, as in Spark.

The remote options name where the tiering sidecar copied the segments, with the sidecar's own
property names (``remote.storage.url``, ``remote.storage.s3.endpoint.url``,
``remote.storage.s3.region``, ``remote.storage.s3.profile``) or its properties file
(``kafkatier.config``, which also supplies ``path`` when it names one log dir): see
``remote``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkatier.sink.source.kafka_options import take_consumer_options
from kafkatier.sink.source.remote import REMOTE_OPTIONS, RemoteSettings, parse_remote
from kafkatier.sink.source.split import MAX_PARTITION_BYTES, OPEN_COST_BYTES, SplitSettings
from kafkatier.sink.source.task import DEFAULT_CHUNK_BYTES
from kafkatier.storage.errors import ConfigError
from kafkatier.storage.log.reader import IsolationLevel

EARLIEST = -2
LATEST = -1
OffsetSpec = int | dict[tuple[str, int], int]
"""EARLIEST, LATEST, or a specific offset (or -2/-1) per topic-partition."""

KNOWN_OPTIONS = (
    "path", "subscribe", "subscribePattern", "assign", "startingOffsets", "endingOffsets",
    "startingTimestamp", "endingTimestamp", "startingOffsetsByTimestamp",
    "endingOffsetsByTimestamp", "startingOffsetsByTimestampStrategy",
    "includeHeaders", "isolationLevel", "failOnDataLoss", "maxOffsetsPerTrigger",
    "minOffsetsPerTrigger", "maxTriggerDelay",
    "readChunkBytes", "minPartitions", "maxRecordsPerPartition", "maxPartitionBytes",
    "openCostInBytes", *REMOTE_OPTIONS,
)  # fmt: skip
_CANONICAL = {name.lower(): name for name in KNOWN_OPTIONS}
PATH_OPTIONS = ("path", "kafkatier.config")
"""Options naming local files, resolved against the driver's working directory."""
_JSON_EXAMPLE = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'


@dataclass(frozen=True)
class SourceOptions:
    """Parsed, validated options (see :func:`parse_options`)."""

    path: str
    topics: tuple[str, ...] | None = None
    pattern: str | None = None
    assign: tuple[tuple[str, int], ...] | None = None
    starting: OffsetSpec = EARLIEST
    ending: OffsetSpec = LATEST
    starting_timestamp: int | None = None
    ending_timestamp: int | None = None
    starting_by_timestamp: dict[tuple[str, int], int] | None = None  # a timestamp a partition
    ending_by_timestamp: dict[tuple[str, int], int] | None = None
    timestamp_strategy: str = "error"
    include_headers: bool = False
    committed: bool = True
    fail_on_data_loss: bool = True
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000  # Spark's default, "15m"
    chunk_bytes: int = DEFAULT_CHUNK_BYTES
    remote: RemoteSettings | None = None  # where the tiering sidecar copied the segments
    splits: SplitSettings = field(default_factory=SplitSettings)


def _error(option: str, problem: str) -> ConfigError:
    return ConfigError(f"kafkatier option {option!r}: {problem}", setting=option)


def parse_options(
    options: Mapping[str, Any], *, streaming: bool | None, base_dir: str | None = None
) -> SourceOptions:
    """Validate ``options`` for a batch (``streaming=False``), streaming (``True``) or not yet
    known (``None``: schema inference) query. Relative paths resolve against ``base_dir`` (the
    driver's working directory, as Spark's file sources resolve theirs), not the Python
    worker's."""
    given = {str(k).lower(): str(v) for k, v in options.items()}
    _alias(given, "kafka.isolation.level", "isolationlevel")
    take_consumer_options(given)
    for key in given:
        if key not in _CANONICAL:
            raise _error(key, f"unknown option; known options: {', '.join(KNOWN_OPTIONS)}")
    opts = {_CANONICAL[k]: v for k, v in given.items()}
    for name in PATH_OPTIONS:
        if base_dir and opts.get(name, "").strip() and not os.path.isabs(opts[name].strip()):
            opts[name] = os.path.join(base_dir, opts[name].strip())
    remote = parse_remote(opts)
    path = opts.get("path", "").strip()
    if not path and remote is not None and len(remote.log_dirs) == 1:
        path = remote.log_dirs[0]  # the sidecar's one log dir
    if not path:
        raise _error("path", "required: the Kafka log dir (a log.dirs entry) to read")
    topics, pattern, assign = _subscription(opts)
    default_start = "latest" if streaming else "earliest"
    least, most = _trigger_limits(opts)
    return SourceOptions(
        path=path,
        topics=topics,
        pattern=pattern,
        assign=assign,
        starting=_offsets(opts, "startingOffsets", default_start, streaming, start=True),
        ending=_offsets(opts, "endingOffsets", "latest", streaming, start=False),
        starting_timestamp=_int(opts, "startingTimestamp", minimum=0),
        ending_timestamp=_ending_timestamp(opts, streaming),
        starting_by_timestamp=_timestamps(opts, "startingOffsetsByTimestamp", streaming),
        ending_by_timestamp=_timestamps(opts, "endingOffsetsByTimestamp", streaming),
        timestamp_strategy=_choice(opts, "startingOffsetsByTimestampStrategy", ("error", "latest")),
        include_headers=_bool(opts, "includeHeaders", False),
        committed=_isolation(opts) is IsolationLevel.READ_COMMITTED,
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        max_offsets_per_trigger=most,
        min_offsets_per_trigger=least,
        max_trigger_delay_ms=_duration_ms(opts, "maxTriggerDelay", "15m"),
        chunk_bytes=_int(opts, "readChunkBytes", minimum=1) or DEFAULT_CHUNK_BYTES,
        remote=remote,
        splits=SplitSettings(
            min_partitions=_int(opts, "minPartitions", minimum=1),
            max_records=_int(opts, "maxRecordsPerPartition", minimum=1),
            max_partition_bytes=_int(opts, "maxPartitionBytes", minimum=1) or MAX_PARTITION_BYTES,
            open_cost_bytes=_default(_int(opts, "openCostInBytes", minimum=0), OPEN_COST_BYTES),
        ),
    )


def _trigger_limits(opts: dict[str, str]) -> tuple[int | None, int | None]:
    """``minOffsetsPerTrigger`` and ``maxOffsetsPerTrigger``; the least above the most is an
    error, as in Spark."""
    least = _int(opts, "minOffsetsPerTrigger", minimum=1)
    most = _int(opts, "maxOffsetsPerTrigger", minimum=1)
    if least is not None and most is not None and least > most:
        raise _error("minOffsetsPerTrigger", f"{least} is higher than maxOffsetsPerTrigger={most}")
    return least, most


def _alias(given: dict[str, str], spark_name: str, own: str) -> None:
    """Spark's Kafka source's consumer setting ``spark_name`` (``kafka.isolation.level``: how a
    Spark job asks for read_committed) as this source's ``own`` option; both, differing, is an
    error."""
    if spark_name not in given:
        return
    value = given.pop(spark_name)
    if given.setdefault(own, value).strip().lower() != value.strip().lower():
        raise _error(spark_name, f"{value!r} contradicts {_CANONICAL[own]}={given[own]!r}")


def _subscription(
    opts: dict[str, str],
) -> tuple[tuple[str, ...] | None, str | None, tuple[tuple[str, int], ...] | None]:
    chosen = [name for name in ("subscribe", "subscribePattern", "assign") if name in opts]
    if len(chosen) != 1:
        raise _error(
            "subscribe",
            "exactly one of 'subscribe', 'subscribePattern' or 'assign' must be set"
            + (f" (got {', '.join(chosen)})" if chosen else ""),
        )
    if "subscribe" in opts:
        topics = tuple(t.strip() for t in opts["subscribe"].split(",") if t.strip())
        if not topics:
            raise _error("subscribe", "give a comma-separated list of topics")
        return topics, None, None
    if "subscribePattern" in opts:
        try:
            re.compile(opts["subscribePattern"])
        except re.error as exc:
            raise _error("subscribePattern", f"not a valid regular expression: {exc}") from None
        return None, opts["subscribePattern"], None
    return None, None, _assign(opts["assign"])


def _assign(text: str) -> tuple[tuple[str, int], ...]:
    problem = 'expected JSON like {"topicA":[0,1],"topicB":[2,4]}'
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        raise _error("assign", f"{problem}, got {text!r}") from None
    if not isinstance(parsed, dict) or not all(
        isinstance(ps, list) and all(isinstance(p, int) and p >= 0 for p in ps)
        for ps in parsed.values()
    ):
        raise _error("assign", f"{problem}, got {text!r}")
    return tuple(sorted((t, p) for t, ps in parsed.items() for p in ps))


def _offsets(
    opts: dict[str, str], name: str, default: str, streaming: bool | None, *, start: bool
) -> OffsetSpec:
    if streaming and not start and name in opts:
        raise _error(name, "not valid in streaming queries (they have no end)")
    text = opts.get(name, default).strip()
    lowered = text.lower()
    forbidden = "latest" if start and streaming is False else None if start else "earliest"
    if lowered == forbidden:
        which = "starting" if start else "ending"
        raise _error(name, f"'{lowered}' is not a valid {which} offset for batch queries")
    if lowered in ("earliest", "latest"):
        return EARLIEST if lowered == "earliest" else LATEST
    spec = _offset_json(name, text)
    bad = LATEST if start and streaming is False else None if start else EARLIEST
    for (topic, partition), offset in spec.items():
        if offset == bad or offset < EARLIEST:
            raise _error(name, f"offset {offset} for {topic}-{partition} is not allowed here")
    return spec


def _offset_json(name: str, text: str) -> dict[tuple[str, int], int]:
    problem = f"expected 'earliest', 'latest' or JSON like {_JSON_EXAMPLE}, got {text!r}"
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        raise _error(name, problem) from None
    if not isinstance(parsed, dict):
        raise _error(name, problem)
    spec: dict[tuple[str, int], int] = {}
    for topic, partitions in parsed.items():
        if not isinstance(partitions, dict):
            raise _error(name, problem)
        for partition, offset in partitions.items():
            if not str(partition).isdigit() or not isinstance(offset, int):
                raise _error(name, problem)
            spec[(topic, int(partition))] = offset
    return spec


def _timestamps(
    opts: dict[str, str], name: str, streaming: bool | None
) -> dict[tuple[str, int], int] | None:
    """Spark's ``startingOffsetsByTimestamp`` / ``endingOffsetsByTimestamp``: a timestamp (ms)
    a partition, as JSON like ``startingOffsets``'."""
    if name not in opts:
        return None
    if streaming and name.startswith("ending"):
        raise _error(name, "not valid in streaming queries (they have no end)")
    spec = _offset_json(name, opts[name])
    for (topic, partition), ts in spec.items():
        if ts < 0:
            raise _error(name, f"timestamp {ts} for {topic}-{partition} is negative")
    return spec


def _ending_timestamp(opts: dict[str, str], streaming: bool | None) -> int | None:
    if streaming and "endingTimestamp" in opts:
        raise _error("endingTimestamp", "not valid in streaming queries (they have no end)")
    return _int(opts, "endingTimestamp", minimum=0)


_TIME_UNITS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000,
               "d": 86_400_000}  # fmt: skip


def _duration_ms(opts: dict[str, str], name: str, default: str) -> int:
    """Spark's time strings (``JavaUtils.timeStringAsMs``: ``500ms``, ``30s``, ``15m``, ``1h``;
    a bare number is milliseconds)."""
    text = opts.get(name, default).strip().lower()
    found = re.fullmatch(r"(\d+)\s*([a-z]*)", text)
    if found is None or found.group(2) not in ("", *_TIME_UNITS):
        raise _error(name, f"expected a duration like 500ms, 30s, 15m or 1h, got {opts[name]!r}")
    return int(int(found.group(1)) * _TIME_UNITS.get(found.group(2), 1))


def _default(value: int | None, default: int) -> int:
    return default if value is None else value


def _int(opts: dict[str, str], name: str, *, minimum: int) -> int | None:
    if name not in opts:
        return None
    try:
        value = int(opts[name].strip())
    except ValueError:
        raise _error(name, f"expected an integer, got {opts[name]!r}") from None
    if value < minimum:
        raise _error(name, f"must be >= {minimum}, got {value}")
    return value


def _bool(opts: dict[str, str], name: str, default: bool) -> bool:
    value = opts.get(name, str(default)).strip().lower()
    if value not in ("true", "false"):
        raise _error(name, f"expected true or false, got {opts[name]!r}")
    return value == "true"


def _choice(opts: dict[str, str], name: str, choices: tuple[str, ...]) -> str:
    value = opts.get(name, choices[0]).strip().lower()
    if value not in choices:
        raise _error(name, f"expected one of {', '.join(choices)}, got {opts[name]!r}")
    return value


def _isolation(opts: dict[str, str]) -> IsolationLevel:
    try:
        return IsolationLevel.parse(opts.get("isolationLevel", "read_committed"))
    except ValueError:
        raise _error(
            "isolationLevel",
            f"expected read_committed or read_uncommitted, got {opts['isolationLevel']!r}",
        ) from None
