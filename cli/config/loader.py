"""One configuration file for every kafkatier command: Java ``.properties`` with Kafka's names.

Why one file: the job, the sidecar, restore and status must agree on the log dirs, the remote
store and the topics' settings; one file read by one loader makes that true by construction.
Sections, by key::

    log.dirs, remote.storage.*, remote.log.*      the sidecar's keys (kafkatier.tiering.config)
    remote.storage.embedded=true                  no S3 endpoint: start SeaweedFS locally, data in
    remote.storage.embedded.dir=DIR               DIR (kafkatier.cli.config.remote)
    topic.<name>.partitions=N                     a topic's partition count
    topic.<name>.<Kafka topic key>=V              its settings, validated by LogConfig
    listeners, advertised.listeners, group.*, ... kafkatier serve (kafkatier.serve.config)
    run.*                                         the kafkatier run job (kafkatier.cli.config.run)

A topic name may contain dots: the setting is the longest known key the line ends with. Every
error names the file and line. Relative paths are relative to the current directory, as in
Kafka's own files. ``kafkatier run`` without ``--config`` uses :data:`BUILTIN`, which is what
``conf/kafkatier.properties`` spells out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from kafkatier.cli.config.run import WORK, RunSettings, parse_run
from kafkatier.serve.config import ServeConfig
from kafkatier.storage.config.internal_topics import partitions_on_disk
from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.config.spec import did_you_mean
from kafkatier.storage.config.topic_files import TopicConfigStore
from kafkatier.storage.errors import ConfigError
from kafkatier.storage.java_properties import Located, read_properties_located
from kafkatier.tiering.config import TieringConfig

BUILTIN_SOURCE = "<built-in defaults>"
BUILTIN: dict[str, str] = {
    "log.dirs": str(WORK / "logs"),
    "remote.storage.url": "s3://kafkatier/run",
    "remote.storage.embedded": "true",
    "remote.storage.embedded.dir": str(WORK / "s3"),
    "remote.storage.s3.region": "us-east-1",
    "remote.log.manager.copier.thread.pool.size": "4",
    "remote.log.manager.task.interval.ms": "2000",
    "listeners": "PLAINTEXT://127.0.0.1:9092",
    "topic.events.partitions": "2",
    "topic.events.cleanup.policy": "delete",
    "topic.events.compression.type": "lz4",
    "topic.events.segment.bytes": "262144",
    "topic.events.remote.storage.enable": "true",
    "topic.events.local.retention.bytes": "262144",
    "topic.user-state.partitions": "2",
    "topic.user-state.cleanup.policy": "compact",
    "topic.user-state.compression.type": "lz4",
    "topic.user-state.segment.bytes": "131072",
    "topic.user-state.min.cleanable.dirty.ratio": "0.1",
    "topic.user-state.delete.retention.ms": "86400000",
    "topic.user-state.remote.storage.enable": "true",
    "topic.user-state.local.retention.bytes": "262144",
    "run.input": "clickstream",
    "run.clickstream.seed": "42",
    "run.clickstream.users": "2000",
    "run.clickstream.max.rows.per.trigger": "5000",
    "run.batches": "10",
    "run.checkpoint.dir": str(WORK / "checkpoint"),
    "run.work.dir": str(WORK / "work"),
    "run.events.topic": "events",
    "run.state.topic": "user-state",
    "run.sidecar.enable": "true",
    "run.serve.enable": "true",
    "run.verify": "true",
    "run.reset": "true",
}
"""The built-in configuration (``kafkatier run`` without ``--config``)."""

Where = Callable[[str], str]
_EMBEDDED = "remote.storage.embedded"
_EMBEDDED_DIR = "remote.storage.embedded.dir"
_TOPIC_KEYS = {f.metadata["spec"].name for f in dataclasses.fields(LogConfig)} | {"partitions"}


@dataclass(frozen=True)
class TopicSettings:
    """One ``topic.<name>.*`` group: partitions and the validated Kafka settings."""

    name: str
    partitions: int | None
    overrides: dict[str, str]
    config: LogConfig


@dataclass(frozen=True)
class KafkatierConfig:
    """The whole file, parsed and validated (module docstring)."""

    source: str
    tiering: TieringConfig
    embedded_dir: Path | None
    topics: dict[str, TopicSettings]
    run: RunSettings
    serve: ServeConfig

    @property
    def log_dir(self) -> Path:
        """The log dir the job writes (the first of ``log.dirs``)."""
        return self.tiering.log_dirs[0]

    def write_topic_configs(self) -> None:
        """Persist every topic's settings where the writers and the sidecar read them; a
        ``topic.<name>.partitions`` that differs from the topic's partitions on disk is an
        error here, for every command that reads the file (kafkatier never re-partitions)."""
        for log_dir in self.tiering.log_dirs:
            log_dir.mkdir(parents=True, exist_ok=True)
            store = TopicConfigStore(log_dir)
            on_disk = partitions_on_disk(log_dir)
            for topic in self.topics.values():
                found = max(on_disk[topic.name]) + 1 if topic.name in on_disk else None
                if topic.partitions is not None and found not in (None, topic.partitions):
                    raise ConfigError(
                        f"{self.source}: topic {topic.name!r} has {found} partitions in "
                        f"{log_dir}, not {topic.partitions}; kafkatier never re-partitions a "
                        "topic (set the count on disk, or a new topic name)",
                        setting=f"topic.{topic.name}.partitions",
                    )  # fmt: skip
                store.update(topic.name, topic.overrides, source=self.source)


def load_config(path: Path | None) -> KafkatierConfig:
    """The configuration in ``path``, or the built-in one when None."""
    if path is None:
        located = {k: Located(v, 0) for k, v in BUILTIN.items()}
        return parse_config(located, source=BUILTIN_SOURCE)
    try:
        located = read_properties_located(Path(path))
    except OSError as exc:
        raise ConfigError(f"cannot read configuration file: {exc.strerror}",
                          source=str(path)) from None  # fmt: skip
    return parse_config(located, source=str(path))


def parse_config(located: Mapping[str, Located], *, source: str) -> KafkatierConfig:
    """Validate every key (module docstring); the first problem raises ConfigError."""

    def where(key: str) -> str:
        line = located[key].line if key in located else 0
        return f"{source}:{line}" if line else source

    props = {k: v.value for k, v in located.items()}
    try:
        tiering = TieringConfig.from_properties(props, source=source,
                                                lines={k: v.line for k, v in located.items()})
    except ConfigError as exc:  # reword as file:line: problem
        setting = str(exc.context.get("setting", ""))
        raise ConfigError(f"{where(setting)}: {exc.message} ({setting})", setting=setting,
                          value=exc.context.get("value")) from None  # fmt: skip
    embedded_dir = _embedded(props, tiering, where)
    topics = _topics(props, where, source)
    serve = ServeConfig.from_properties(props, source=source,
                                        lines={k: v.line for k, v in located.items()})
    return _absolute(KafkatierConfig(source, tiering, embedded_dir, topics,
                                     parse_run(props, where), serve))  # fmt: skip


def _absolute(config: KafkatierConfig) -> KafkatierConfig:
    """Relative paths anchored at the current directory now, so no later chdir or symlink
    (a reader's scratch link to a segment) can read them relative to anything else."""
    run = config.run
    return dataclasses.replace(
        config,
        tiering=dataclasses.replace(
            config.tiering, log_dirs=tuple(p.absolute() for p in config.tiering.log_dirs)
        ),
        embedded_dir=config.embedded_dir.absolute() if config.embedded_dir else None,
        run=dataclasses.replace(
            run, checkpoint_dir=run.checkpoint_dir.absolute(), work_dir=run.work_dir.absolute(),
            input_path=run.input_path.absolute() if run.input_path else None,
        ),
    )


def _embedded(props: dict[str, str], tiering: TieringConfig, where: Where) -> Path | None:
    for key in props:
        if key.startswith(_EMBEDDED) and key not in (_EMBEDDED, _EMBEDDED_DIR):
            raise ConfigError(f"{where(key)}: unknown setting {key!r}", setting=key)
    text = props.get(_EMBEDDED, "false").strip().lower()
    if text not in ("true", "false"):
        raise ConfigError(f"{where(_EMBEDDED)}: invalid value for {_EMBEDDED}: expected true "
                          "or false", setting=_EMBEDDED, value=props[_EMBEDDED])  # fmt: skip
    if text == "false":
        return None
    if tiering.endpoint_url:
        raise ConfigError(f"{where(_EMBEDDED)}: {_EMBEDDED}=true starts a local S3 server; "
                          "remove remote.storage.s3.endpoint.url (or set this to false)",
                          setting=_EMBEDDED)  # fmt: skip
    if not tiering.remote_url.startswith("s3://"):
        raise ConfigError(f"{where('remote.storage.url')}: {_EMBEDDED}=true needs an s3:// "
                          "url (the bucket is created)", setting="remote.storage.url")  # fmt: skip
    folder = props.get(_EMBEDDED_DIR, "").strip()
    return Path(folder) if folder else WORK / "s3"


def split_topic_key(key: str) -> tuple[str, str] | None:
    """``topic.<name>.<setting>`` -> (name, setting) using the longest known setting, or None."""
    rest = key[len("topic.") :]
    for setting in sorted(_TOPIC_KEYS, key=len, reverse=True):
        if rest.endswith("." + setting) and len(rest) > len(setting) + 1:
            return rest[: -len(setting) - 1], setting
    return None


def _topics(props: dict[str, str], where: Where, source: str) -> dict[str, TopicSettings]:
    grouped: dict[str, dict[str, str]] = {}
    for key, text in props.items():
        if not key.startswith("topic."):
            continue
        split = split_topic_key(key)
        if split is None:
            tail = key.rsplit(".", 1)[-1]
            hint = did_you_mean(tail, _TOPIC_KEYS, prefix="...")
            raise ConfigError(f"{where(key)}: unknown setting {key!r} (expected "
                              f"topic.<name>.<Kafka topic setting>){hint}",
                              setting=key)  # fmt: skip
        name, setting = split
        grouped.setdefault(name, {})[setting] = text
        if setting != "partitions":  # each value alone first, so the error names its line
            _validate({setting: text}, where, name)
    result = {}
    for name, settings in grouped.items():
        count = settings.pop("partitions", None)
        partitions = _partitions(count, where(f"topic.{name}.partitions"))
        config = _validate(settings, where, name)
        result[name] = TopicSettings(name, partitions, settings, config)
    return result


def _validate(settings: Mapping[str, str], where: Where, topic: str) -> LogConfig:
    """LogConfig's checks; the error names the line of the setting it is about."""
    try:
        return LogConfig.from_properties(settings, source=f"topic {topic}")
    except ConfigError as exc:
        context = {k: v for k, v in exc.context.items() if k in ("setting", "value", "valid")}
        at = where(f"topic.{topic}.{context.get('setting', '')}")
        raise ConfigError(f"{at}: topic {topic}: {exc.message}", **context) from None


def _partitions(text: str | None, place: str) -> int | None:
    if text is None:
        return None
    try:
        value = int(text.strip())
    except ValueError:
        value = 0
    if value < 1:
        raise ConfigError(f"{place}: partitions must be a positive integer", value=text)
    return value
