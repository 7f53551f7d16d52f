"""The ``run.*`` keys of the configuration file: what ``kafkatier run`` reads and how long it runs.

Each key's parser (type and range) is declared once in :data:`RUN_KEYS`. The dataclass defaults
are a long-running production job's (no batch limit, no reset); ``make run``'s bounded job is
what ``conf/kafkatier.properties`` and the built-in configuration
(kafkatier.cli.config.loader.BUILTIN) set.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafkatier.storage.config.spec import did_you_mean
from kafkatier.storage.errors import ConfigError

WORK = Path("kafkatier-run")
"""The working folder of the built-in defaults (relative to the current directory)."""


@dataclass(frozen=True)
class RunSettings:
    """The job of ``kafkatier run`` (keys in :data:`RUN_KEYS`)."""

    input: str = "clickstream"
    input_path: Path | None = None
    seed: int = 42
    users: int = 2000
    max_rows_per_batch: int = 4000
    max_files_per_batch: int = 1
    rate: int = -1
    batches: int = 0
    duration_ms: int = 0
    stop_when_idle: bool = False
    trigger_ms: int = 0
    checkpoint_dir: Path = WORK / "checkpoint"
    work_dir: Path = WORK / "work"
    events_topic: str = "events"
    state_topic: str = "user-state"
    sidecar: bool = True
    serve: bool = True
    verify: bool = True
    reset: bool = False
    spark_master: str = "local[2]"


def _int(low: int, high: int | None = None, off: int | None = None) -> Callable[[str], Any]:
    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise ValueError("not an integer") from None
        if value == off:
            return value
        if value < low or (high is not None and value > high):
            span = f"{low}..{high}" if high is not None else f">= {low}"
            raise ValueError(f"out of range ({span}{f' or {off}' if off is not None else ''})")
        return value

    return parse


def _bool(text: str) -> bool:
    if text.strip().lower() not in ("true", "false"):
        raise ValueError("expected true or false")
    return text.strip().lower() == "true"


def _choice(*choices: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text.strip() not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}")
        return text.strip()

    return parse


def _path(text: str) -> Path | None:
    return Path(text.strip()) if text.strip() else None


def _name(text: str) -> str:
    if not text.strip() or "/" in text or text.strip() in (".", ".."):
        raise ValueError("not a valid topic name")
    return text.strip()


def _text(text: str) -> str:
    if not text.strip():
        raise ValueError("must not be empty")
    return text.strip()


RUN_KEYS: dict[str, tuple[str, Callable[[str], Any], str]] = {
    "run.input": ("input", _choice("clickstream", "files"),
                  "clickstream (generated) or files (JSON lines dropped in run.input.path)"),
    "run.input.path": ("input_path", _path, "landing folder of JSON-lines files (input=files)"),
    "run.input.max.files.per.trigger": ("max_files_per_batch", _int(1),
                                        "files per micro-batch (input=files)"),
    "run.clickstream.seed": ("seed", _int(0), "generator seed: same seed, same events"),
    "run.clickstream.users": ("users", _int(1), "distinct user ids (keys of the state topic)"),
    "run.clickstream.max.rows.per.trigger": ("max_rows_per_batch", _int(1),
                                             "generated events per micro-batch"),
    "run.clickstream.rows.per.second": ("rate", _int(1, off=-1),
                                        "generator rate; -1 = as fast as the job takes them"),
    "run.batches": ("batches", _int(0), "stop after this many micro-batches; 0 = no limit"),
    "run.duration.ms": ("duration_ms", _int(0), "stop after this long; 0 = no limit"),
    "run.stop.when.idle": ("stop_when_idle", _bool, "stop once the input has nothing new"),
    "run.trigger.interval.ms": ("trigger_ms", _int(0),
                                "micro-batch trigger interval; 0 = back to back"),
    "run.checkpoint.dir": ("checkpoint_dir", _path, "Spark checkpoint of the stream"),
    "run.work.dir": ("work_dir", _path, "restore target and verification scratch space"),
    "run.events.topic": ("events_topic", _name, "append-only topic of every event"),
    "run.state.topic": ("state_topic", _name, "compacted topic: latest state per user"),
    "run.sidecar.enable": ("sidecar", _bool, "run the tiering sidecar in this process"),
    "run.serve.enable": ("serve", _bool, "serve the topics over the Kafka protocol (listeners) "
                         "while the job runs, and consume them with a Kafka client at the end"),
    "run.verify": ("verify", _bool, "restore, replay and check everything at the end"),
    "run.reset": ("reset", _bool, "wipe the log dirs, checkpoint, work dir and embedded S3 first"),
    "run.spark.master": ("spark_master", _text, "Spark master URL"),
}  # fmt: skip
"""key: (RunSettings field, parser raising ValueError, meaning)."""


def parse_run(props: Mapping[str, str], where: Callable[[str], str]) -> RunSettings:
    """The ``run.*`` keys of ``props`` (others ignored); errors name ``where(key)``."""
    changes: dict[str, Any] = {}
    for key, text in props.items():
        if not key.startswith("run."):
            continue
        if key not in RUN_KEYS:
            raise ConfigError(f"{where(key)}: unknown setting {key!r}"
                              f"{did_you_mean(key, RUN_KEYS)}", setting=key)  # fmt: skip
        attr, parse, _ = RUN_KEYS[key]
        try:
            changes[attr] = parse(text)
        except ValueError as exc:
            raise ConfigError(f"{where(key)}: invalid value for {key}: {exc}", setting=key,
                              value=text) from None  # fmt: skip
    for attr in ("checkpoint_dir", "work_dir"):
        if attr in changes and changes[attr] is None:
            key = next(k for k, v in RUN_KEYS.items() if v[0] == attr)
            raise ConfigError(f"{where(key)}: {key} must not be empty", setting=key)
    settings = dataclasses.replace(RunSettings(), **changes)
    if settings.input == "files" and settings.input_path is None:
        raise ConfigError(f"{where('run.input')}: run.input=files needs run.input.path",
                          setting="run.input.path")  # fmt: skip
    if settings.events_topic == settings.state_topic:
        raise ConfigError(f"{where('run.state.topic')}: the two topics must differ",
                          setting="run.state.topic")  # fmt: skip
    return settings
