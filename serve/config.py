"""The configuration of ``kafkatier serve``: the same ``.properties`` file as ``kafkatier sidecar``
and ``kafkatier run``, with Kafka's broker keys for where to listen.

Keys (defaults in brackets)::

    log.dirs                   comma-separated Kafka log dirs (required)
    listeners                  Kafka's listeners: NAME://host:port, comma-separated
                               [PLAINTEXT://127.0.0.1:9092]; port 0 takes a free port
    advertised.listeners       what Metadata tells clients to connect to [listeners]; required
                               when a listener binds every interface (empty host or 0.0.0.0)
    socket.request.max.bytes   the largest request frame accepted [104857600, Kafka's]
    connections.max.idle.ms    a connection that sends no request for this long is closed, an
                               unauthenticated one too [600000, Kafka's; -1: never]
    offsets.log.dir            the server's own log dir for ``__consumer_offsets``
                               [<first log.dirs entry>/.kafkatier-serve]
    offsets.topic.num.partitions      partitions of ``__consumer_offsets`` [1; Kafka's is 50]
    offsets.topic.segment.bytes       its segment size [104857600, Kafka's]
    log.cleaner.enable                the server compacts ``__consumer_offsets`` [true]
    log.cleaner.backoff.ms            how often it looks [15000, Kafka's]
    offsets.retention.minutes         a group without members loses the commits older than
                                      this [10080, Kafka's 7 days]
    offsets.retention.check.interval.ms  how often that is looked at [600000, Kafka's]
    group.min.session.timeout.ms      [6000, Kafka's]    group.max.session.timeout.ms [1800000]
    group.initial.rebalance.delay.ms  [3000, Kafka's]    offset.metadata.max.bytes    [4096]
    serve.metrics.port         Prometheus metrics on http://<address>:<port>/metrics (serve/
                               metrics.py) [-1: none; 0: a free port]
    serve.metrics.bind.address the address it listens on [127.0.0.1]
    remote.storage.url ...     the sidecar's remote store keys (tiering/config.py), optional

    listener.security.protocol.map    NAME:PROTOCOL,... [each of PLAINTEXT, SSL, SASL_PLAINTEXT,
                               SASL_SSL maps to itself, Kafka's default]
    ssl.*, sasl.*, listener.name.<name>.*   TLS and SASL (kafkatier.serve.security)

Every other key the sidecar or ``kafkatier run`` reads is accepted; anything else is an error
naming the file and line. Metadata answers a client with the advertised listener of the
listener it connected to, as Kafka does (a TLS client is never sent to a plaintext port).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kafkatier.serve.group.settings import GroupSettings
from kafkatier.serve.security.listener import ListenerSecurity, hint, listener_security
from kafkatier.storage.errors import ConfigError
from kafkatier.storage.java_properties import read_properties_located
from kafkatier.tiering.config import (
    FOREIGN_PREFIXES,
    KNOWN_KEYS,
    SERVE_KEYS,
    TieringConfig,
    log_dir_list,
)

DEFAULT_LISTENERS = "PLAINTEXT://127.0.0.1:9092"
DEFAULT_MAX_REQUEST_BYTES = 104_857_600  # Kafka's socket.request.max.bytes
OFFSETS_DIR_NAME = ".kafkatier-serve"
"""Hidden: the log dirs' readers list only ``<topic>-<partition>`` children."""
_GROUP_INTS = {  # key -> (GroupSettings field, minimum)
    "group.min.session.timeout.ms": ("min_session_timeout_ms", 1),
    "group.max.session.timeout.ms": ("max_session_timeout_ms", 1),
    "group.initial.rebalance.delay.ms": ("initial_rebalance_delay_ms", 0),
    "offset.metadata.max.bytes": ("offset_metadata_max_bytes", 0),
}
_NAME = re.compile(r"[A-Za-z0-9_]+")
PLAINTEXT = ListenerSecurity()


@dataclass(frozen=True)
class Listener:
    """One ``NAME://host:port`` of Kafka's ``listeners`` / ``advertised.listeners``."""

    name: str
    host: str
    port: int

    @property
    def binds_all(self) -> bool:
        return self.host in ("", "0.0.0.0", "::")


@dataclass(frozen=True)
class ServeConfig:
    """The parsed configuration (module docstring lists the keys)."""

    log_dirs: tuple[Path, ...]
    listeners: tuple[Listener, ...]
    advertised: tuple[Listener, ...]
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    max_idle_ms: int = 600_000  # connections.max.idle.ms; -1: never
    tiering: TieringConfig | None = None  # the remote store, when the file names one
    offsets_log_dir: Path | None = None  # None: <first log dir>/.kafkatier-serve
    offsets_partitions: int = 1
    offsets_segment_bytes: int = 104_857_600
    cleaner_backoff_ms: int | None = 15_000  # None: log.cleaner.enable=false
    offsets_retention_ms: int = 10_080 * 60_000
    offsets_check_ms: int = 600_000
    groups: GroupSettings = field(default_factory=GroupSettings)
    metrics_port: int = -1
    metrics_host: str = "127.0.0.1"
    security: Mapping[str, ListenerSecurity] = field(default_factory=dict)
    sources: Mapping[str, str] = field(default_factory=dict, compare=False)
    """Where ``log.dirs``, ``listeners`` and ``offsets.log.dir`` were read (file:line), for the
    errors the server meets with them at its start."""
    """Listener name -> its security protocol, TLS context and SASL users (PLAINTEXT if absent)."""

    def security_of(self, listener: str) -> ListenerSecurity:
        return self.security.get(listener, PLAINTEXT)

    @property
    def idle_s(self) -> float | None:
        """``connections.max.idle.ms`` in seconds; None: never."""
        return None if self.max_idle_ms < 0 else self.max_idle_ms / 1000

    @property
    def offsets_dir(self) -> Path:
        return self.offsets_log_dir or self.log_dirs[0] / OFFSETS_DIR_NAME

    @classmethod
    def load(cls, path: Path) -> ServeConfig:
        try:
            located = read_properties_located(Path(path))
        except OSError as exc:
            raise ConfigError(f"cannot read configuration file: {exc.strerror}",
                              source=str(path)) from None  # fmt: skip
        props = {k: v.value for k, v in located.items()}
        lines = {k: v.line for k, v in located.items()}
        return cls.from_properties(props, source=str(path), lines=lines)

    @classmethod
    def from_properties(
        cls, props: Mapping[str, str], *, source: str, lines: Mapping[str, int] | None = None
    ) -> ServeConfig:
        def where(key: str) -> str:
            line = (lines or {}).get(key)
            return source if line is None else f"{source}:{line}"

        for key in props:
            if key not in KNOWN_KEYS | SERVE_KEYS and not key.startswith(FOREIGN_PREFIXES):
                raise ConfigError(f"unknown setting {key!r}{hint(key)}", setting=key,
                                  source=where(key))  # fmt: skip
        dirs = log_dir_list(props.get("log.dirs", ""), where("log.dirs"))
        if not dirs:
            raise ConfigError("required setting missing", setting="log.dirs",
                              source=where("log.dirs"))  # fmt: skip
        listeners = parse_listeners(
            props.get("listeners", DEFAULT_LISTENERS), "listeners", where("listeners")
        )
        advertised = _advertised(props, listeners, where("advertised.listeners"))
        tiering = None
        if props.get("remote.storage.url", "").strip():
            tiering = TieringConfig.from_properties(props, source=source, lines=lines)
        return cls(
            log_dirs=tuple(d.absolute() for d in dirs), listeners=listeners,
            advertised=advertised, tiering=tiering,
            max_request_bytes=_max_request_bytes(props, where("socket.request.max.bytes")),
            max_idle_ms=_idle_ms(props, where("connections.max.idle.ms")),
            offsets_log_dir=_offsets_dir(props),
            security=listener_security(props, tuple(lst.name for lst in listeners), where),
            offsets_partitions=_int(props, "offsets.topic.num.partitions", 1, 1, where),
            offsets_segment_bytes=_int(props, "offsets.topic.segment.bytes", 104_857_600,
                                       1024, where),
            cleaner_backoff_ms=_cleaner(props, where),
            offsets_retention_ms=60_000 * _int(props, "offsets.retention.minutes", 10_080, 1,
                                               where),
            offsets_check_ms=_int(props, "offsets.retention.check.interval.ms", 600_000, 1,
                                  where),
            metrics_port=_metrics_port(props, where("serve.metrics.port")),
            metrics_host=props.get("serve.metrics.bind.address", "").strip() or "127.0.0.1",
            groups=GroupSettings(**{
                attr: _int(props, key, getattr(GroupSettings(), attr), low, where)
                for key, (attr, low) in _GROUP_INTS.items()
            }),
            sources={key: where(key) for key in ("log.dirs", "listeners", "offsets.log.dir")},
        )


def parse_listeners(text: str, key: str, where: str) -> tuple[Listener, ...]:
    """Kafka's ``NAME://host:port,...``; names are upper-cased, as Kafka normalises them."""
    found: list[Listener] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, rest = item.partition("://")
        host, colon, port_text = rest.rpartition(":")
        if not sep or not colon or not port_text.isdigit() or int(port_text) > 65535:
            raise ConfigError(f"not a listener NAME://host:port: {item!r}", setting=key,
                              source=where)  # fmt: skip
        if not _NAME.fullmatch(name):
            raise ConfigError(f"listener name {name!r}: letters, digits and _ only", setting=key,
                              source=where)  # fmt: skip
        found.append(Listener(name.upper(), host.strip("[]"), int(port_text)))
    if not found:
        raise ConfigError("no listener given", setting=key, source=where)
    if len({listener.name for listener in found}) != len(found):
        raise ConfigError("each listener name may appear once", setting=key, source=where)
    return tuple(found)


def _advertised(
    props: Mapping[str, str], listeners: tuple[Listener, ...], where: str
) -> tuple[Listener, ...]:
    text = props.get("advertised.listeners", "").strip()
    advertised = parse_listeners(text, "advertised.listeners", where) if text else ()
    names = {a.name for a in advertised}
    if not names <= {listener.name for listener in listeners}:
        raise ConfigError("advertised.listeners may only name listeners of listeners "
                          "(Kafka's rule)", setting="advertised.listeners",
                          source=where)  # fmt: skip
    for listener in listeners:
        if listener.binds_all and listener.name not in names:
            raise ConfigError(f"required for {listener.name} (it binds every interface): say "
                              "the host clients reach", setting="advertised.listeners",
                              source=where)  # fmt: skip
    return advertised + tuple(lst for lst in listeners if lst.name not in names)


def _max_request_bytes(props: Mapping[str, str], where: str) -> int:
    text = props.get("socket.request.max.bytes", str(DEFAULT_MAX_REQUEST_BYTES)).strip()
    if not text.isdigit() or int(text) < 1024:
        raise ConfigError("not an integer >= 1024", setting="socket.request.max.bytes",
                          value=text, source=where)  # fmt: skip
    return int(text)


def _idle_ms(props: Mapping[str, str], where: str) -> int:
    text = props.get("connections.max.idle.ms", "600000").strip()
    if not text.lstrip("-").isdigit() or (int(text) < 1 and int(text) != -1):
        raise ConfigError("not an integer >= 1, or -1 (never)", setting="connections.max.idle.ms",
                          value=text, source=where)  # fmt: skip
    return int(text)


def _cleaner(props: Mapping[str, str], where: Callable[[str], str]) -> int | None:
    """``log.cleaner.backoff.ms``, or None when ``log.cleaner.enable=false``."""
    enabled = props.get("log.cleaner.enable", "true").strip().lower()
    if enabled not in ("true", "false"):
        raise ConfigError("expected true or false", setting="log.cleaner.enable", value=enabled,
                          source=where("log.cleaner.enable"))  # fmt: skip
    backoff = _int(props, "log.cleaner.backoff.ms", 15_000, 1, where)
    return backoff if enabled == "true" else None


def _metrics_port(props: Mapping[str, str], where: str) -> int:
    text = props.get("serve.metrics.port", "-1").strip()
    if not text.lstrip("-").isdigit() or not -1 <= int(text) <= 65535:
        raise ConfigError("not a port (0-65535, or -1 for none)", setting="serve.metrics.port",
                          value=text, source=where)  # fmt: skip
    return int(text)


def _offsets_dir(props: Mapping[str, str]) -> Path | None:
    text = props.get("offsets.log.dir", "").strip()
    return Path(text).absolute() if text else None


def _int(props: Mapping[str, str], key: str, default: int, low: int,
         where: Callable[[str], str]) -> int:  # fmt: skip
    text = props.get(key, str(default)).strip()
    if not text.isdigit() or int(text) < low:
        raise ConfigError(f"not an integer >= {low}", setting=key, value=text,
                          source=where(key))  # fmt: skip
    return int(text)
