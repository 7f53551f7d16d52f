"""The sidecar's configuration file: Java ``.properties``, as every other Kafka config.

Why properties (not TOML): it is the format of Kafka's own broker and topic configs and of
``conf/topic.properties``; operators already know it, the keys can mirror Kafka's tiered-storage
names (``remote.log.*``), and the project already has an exact parser (java_properties.py).

Keys (defaults in brackets)::

    log.dirs                               comma-separated Kafka log dirs (required)
    remote.storage.url                     s3://bucket/prefix, file:///path, ... (required)
    remote.storage.s3.endpoint.url         S3 endpoint [AWS default]
    remote.storage.s3.region               region [the AWS chain's]
    remote.storage.s3.profile              shared-config profile [the AWS chain's]
    remote.storage.s3.max.attempts         tries of one request, retries with backoff included [5]
    remote.storage.multipart.threshold.bytes   [8388608]
    remote.storage.multipart.part.bytes        [8388608]
    remote.log.manager.copier.thread.pool.size partitions uploaded in parallel [4]
    remote.log.manager.copy.max.bytes.per.second   upload rate limit, -1 = none [-1]
                                           (across all of the process's uploads)
    remote.log.manager.task.interval.ms    periodic rescan [30000]
    remote.log.orphan.grace.ms             age before another owner's unfinished attempt is an
                                           orphan [60000]
    remote.log.metrics.port                Prometheus port, -1 = none [-1]
    remote.log.metrics.bind.address        address it listens on [127.0.0.1]; 0.0.0.0 in a
                                           container whose port is published

Credentials are never in this file: the AWS chain provides them.

The same file may be the unified ``kafkatier.properties`` of ``kafkatier run``: its ``topic.*``,
``run.*`` and ``remote.storage.embedded*`` keys belong to that loader (kafkatier.cli.config.loader),
which validates them; here they are skipped, every other unknown key is an error.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kafkatier.storage.config.spec import did_you_mean
from kafkatier.storage.errors import ConfigError
from kafkatier.storage.java_properties import read_properties_located
from kafkatier.tiering.store.object_store import FsspecStore, ObjectStore

_INT_KEYS = {
    "remote.storage.multipart.threshold.bytes": ("multipart_threshold", 8 << 20),
    "remote.storage.multipart.part.bytes": ("multipart_part", 8 << 20),
    "remote.log.manager.copier.thread.pool.size": ("threads", 4),
    "remote.log.manager.copy.max.bytes.per.second": ("rate_limit_bps", -1),
    "remote.log.manager.task.interval.ms": ("interval_ms", 30_000),
    "remote.log.orphan.grace.ms": ("orphan_grace_ms", 60_000),
    "remote.log.metrics.port": ("metrics_port", -1),
    "remote.storage.s3.max.attempts": ("max_attempts", 5),
}
_RANGES = {  # attr: (low, high) inclusive, with -1 allowed where it means "off"
    "multipart_threshold": (1, None),
    "multipart_part": (5 << 20, 5 << 30),  # S3's part size limits
    "threads": (1, 1024),
    "rate_limit_bps": (1, None),
    "interval_ms": (1, None),
    "orphan_grace_ms": (0, None),
    "metrics_port": (0, 65535),
    "max_attempts": (1, 100),
}
_OFF_ALLOWED = {"rate_limit_bps", "metrics_port"}
SERVE_SECURITY_PREFIXES = ("ssl.", "sasl.", "listener.", "connection.failed.authentication.")
"""Security keys of ``kafkatier serve``, checked by kafkatier.serve.security.listener."""
FOREIGN_PREFIXES = ("topic.", "run.", "remote.storage.embedded", *SERVE_SECURITY_PREFIXES)
"""Keys of the unified configuration (kafkatier.cli.config.loader) that this loader leaves alone."""
SERVE_KEYS = frozenset({
    "listeners", "advertised.listeners", "socket.request.max.bytes", "offsets.log.dir",
    "connections.max.idle.ms",
    "offsets.topic.num.partitions", "offsets.topic.segment.bytes", "log.cleaner.enable",
    "log.cleaner.backoff.ms", "offsets.retention.minutes", "offsets.retention.check.interval.ms",
    "group.min.session.timeout.ms",
    "group.max.session.timeout.ms", "group.initial.rebalance.delay.ms",
    "offset.metadata.max.bytes", "serve.metrics.port", "serve.metrics.bind.address",
})  # fmt: skip
"""Keys of ``kafkatier serve`` (kafkatier.serve.config), left alone here too."""
_STR_KEYS = {
    "remote.storage.s3.endpoint.url": "endpoint_url",
    "remote.storage.s3.region": "region",
    "remote.storage.s3.profile": "profile",
    "remote.log.metrics.bind.address": "metrics_host",
}
KNOWN_KEYS = frozenset({"log.dirs", "remote.storage.url", *_INT_KEYS, *_STR_KEYS})
"""Every key this loader reads (``kafkatier serve`` accepts them beside its own)."""


@dataclass(frozen=True)
class TieringConfig:
    """The parsed sidecar configuration (module docstring lists the keys)."""

    log_dirs: tuple[Path, ...]
    remote_url: str
    endpoint_url: str | None = None
    region: str | None = None
    profile: str | None = None
    multipart_threshold: int = 8 << 20
    multipart_part: int = 8 << 20
    threads: int = 4
    rate_limit_bps: int = -1
    interval_ms: int = 30_000
    orphan_grace_ms: int = 60_000
    metrics_port: int = -1
    metrics_host: str | None = None
    max_attempts: int = 5
    url_source: str = field(default="", compare=False, repr=False)
    """Where ``remote.storage.url`` was read (file:line), for the errors that name it."""

    @classmethod
    def load(cls, path: Path) -> TieringConfig:
        located = read_properties_located(Path(path))
        return cls.from_properties(
            {k: v.value for k, v in located.items()}, source=str(path),
            lines={k: v.line for k, v in located.items()},
        )

    @classmethod
    def from_properties(
        cls, props: Mapping[str, str], *, source: str, lines: Mapping[str, int] | None = None
    ) -> TieringConfig:
        """Parse and check the sidecar's keys; errors name ``source`` (and the line, if known)."""

        def where(key: str) -> str:
            line = (lines or {}).get(key)
            return source if line is None else f"{source}:{line}"

        for key in props:
            if key not in KNOWN_KEYS | SERVE_KEYS and not key.startswith(FOREIGN_PREFIXES):
                raise ConfigError(f"unknown sidecar setting {key!r}"
                                  f"{did_you_mean(key, KNOWN_KEYS | SERVE_KEYS)}", setting=key,
                                  source=where(key))  # fmt: skip
        for key in ("log.dirs", "remote.storage.url"):
            if not props.get(key, "").strip():
                raise ConfigError("required setting missing", setting=key, source=where(key))
        values: dict[str, object] = {}
        for key, (attr, _default) in _INT_KEYS.items():
            if key in props:
                values[attr] = _int_value(key, attr, props[key], where(key))
        for key, attr in _STR_KEYS.items():
            if props.get(key, "").strip():
                values[attr] = props[key].strip()
        dirs = log_dir_list(props["log.dirs"], where("log.dirs"))
        url = props["remote.storage.url"].strip()
        _check_url(url, where("remote.storage.url"))
        values["url_source"] = where("remote.storage.url")
        endpoint = values.get("endpoint_url")
        if isinstance(endpoint, str) and not endpoint.startswith(("http://", "https://")):
            raise ConfigError("an endpoint is a URL: http://host:port or https://host",
                              setting="remote.storage.s3.endpoint.url", value=endpoint,
                              source=where("remote.storage.s3.endpoint.url"))  # fmt: skip
        return cls(log_dirs=dirs, remote_url=url, **values)  # type: ignore[arg-type]

    def open_store(self) -> ObjectStore:
        """The remote store this config names (S3 through botocore, anything else through
        fsspec). botocore is imported here, not with the configuration (0.30 s: ``python -X
        importtime -c "import kafkatier.tiering.store.s3store"``), so the commands that never
        reach an S3 store do not pay it."""
        if self.remote_url.startswith("s3://"):
            from kafkatier.tiering.store.s3store import S3Store

            return S3Store(
                self.remote_url,
                endpoint_url=self.endpoint_url,
                region=self.region,
                profile=self.profile,
                multipart_threshold=self.multipart_threshold,
                multipart_chunksize=self.multipart_part,
                rate_limit_bps=max(self.rate_limit_bps, 0),
                max_attempts=self.max_attempts,
            )
        try:
            return FsspecStore(self.remote_url, rate_limit_bps=max(self.rate_limit_bps, 0))
        except (ValueError, ImportError) as exc:  # fsspec's: a protocol it does not know, or
            # whose package is not installed (gcs:// without gcsfs)
            raise ConfigError(f"no object store for this URL: {exc}",
                              setting="remote.storage.url", value=self.remote_url,
                              source=self.url_source) from None  # fmt: skip


def log_dir_list(text: str, where: str) -> tuple[Path, ...]:
    """``log.dirs``' directories, checked as Kafka's ``LogManager`` checks them before it
    starts: none named twice (by canonical path: ``L`` and ``./L`` are one; two entries of one
    directory listed and counted each partition twice), none that is a file (the listings then
    found nothing in it and said nothing)."""
    dirs = tuple(Path(d.strip()) for d in text.split(",") if d.strip())
    seen: dict[str, Path] = {}
    for d in dirs:
        canonical = os.path.realpath(d)
        if canonical in seen:
            raise ConfigError(f"duplicate log directory: {seen[canonical]} and {d} are one",
                              setting="log.dirs", value=text, source=where)  # fmt: skip
        seen[canonical] = d
        if d.exists() and not d.is_dir():
            raise ConfigError(f"{d} is not a directory", setting="log.dirs", value=text,
                              source=where)  # fmt: skip
    return dirs


_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")  # S3's bucket naming rules


def _check_url(url: str, where: str) -> None:
    """A URL with a scheme (a bare ``bucket/prefix``, a forgotten ``s3://``, was taken for a
    folder under the working directory), never fsspec's ``memory://``: it lives in one process,
    so the sidecar's local retention deleted segments whose only copy went with the process
    (each command is a process of its own). An ``s3://`` URL names a bucket by S3's rules
    (botocore's own check was a multi-line ParamValidationError naming no setting)."""
    scheme = url.split("://", 1)[0] if "://" in url else None
    if scheme is None:
        raise ConfigError("not a URL: give its scheme, s3://<bucket>/<prefix> or file:///<path>",
                          setting="remote.storage.url", value=url, source=where)  # fmt: skip
    if scheme == "memory":
        raise ConfigError("memory:// keeps objects in this process's memory alone, lost when it "
                          "exits (and local retention would delete the local copies): use "
                          "s3://<bucket>/<prefix> or file:///<path>",
                          setting="remote.storage.url", value=url, source=where)  # fmt: skip
    if scheme != "s3":
        return
    bucket = url[len("s3://") :].split("/", 1)[0]
    if not _BUCKET.fullmatch(bucket):
        raise ConfigError(f"{bucket!r} is not an S3 bucket name (3-63 lowercase letters, digits, "
                          "dots and hyphens): s3://<bucket>/<prefix>",
                          setting="remote.storage.url", value=url, source=where)  # fmt: skip


def _int_value(key: str, attr: str, text: str, where: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise ConfigError("not an integer", setting=key, value=text, source=where) from None
    low, high = _RANGES[attr]
    if value == -1 and attr in _OFF_ALLOWED:
        return value
    if value < low or (high is not None and value > high):
        valid = f"{low}..{high}" if high is not None else f">= {low}"
        if attr in _OFF_ALLOWED:
            valid += " or -1 (off)"
        raise ConfigError(f"out of range ({valid})", setting=key, value=value, source=where)
    return value
