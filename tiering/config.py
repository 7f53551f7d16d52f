"""The sidecar's configuration file: Java ``.properties``, as every other Kafka config.

Why properties (not TOML): it is the format of Kafka's own broker and topic configs and of
``conf/topic.properties``; operators already know it, the keys can mirror Kafka's tiered-storage
names (``remote.log.*``), and the project already has an exact parser (java_properties.py).

Keys (defaults in brackets)::

    log.dirs                               comma-separated Kafka log dirs (required)
    remote.storage.url                     s3://bucket/prefix, file:///path, memory://... (required)
    remote.storage.s3.endpoint.url         S3 endpoint [AWS default]
    remote.storage.s3.region               region [the AWS chain's]
    remote.storage.s3.profile              shared-config profile [the AWS chain's]
    remote.storage.multipart.threshold.bytes   [8388608]
    remote.storage.multipart.part.bytes        [8388608]
    remote.log.manager.copier.thread.pool.size partitions uploaded in parallel [4]
    remote.log.manager.copy.max.bytes.per.second   upload rate limit, -1 = none [-1]
                                           (across all of the process's uploads)
    remote.log.manager.task.interval.ms    periodic rescan [30000]
    remote.log.orphan.grace.ms             age before another owner's unfinished attempt is an
                                           orphan [60000]
    remote.log.metrics.port                Prometheus port, -1 = none [-1]

Credentials are never in this file: the AWS chain provides them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kafkatier.storage.errors import ConfigError
from kafkatier.storage.java_properties import read_properties
from kafkatier.tiering.s3store import S3Store
from kafkatier.tiering.store import FsspecStore, ObjectStore

_INT_KEYS = {
    "remote.storage.multipart.threshold.bytes": ("multipart_threshold", 8 << 20),
    "remote.storage.multipart.part.bytes": ("multipart_part", 8 << 20),
    "remote.log.manager.copier.thread.pool.size": ("threads", 4),
    "remote.log.manager.copy.max.bytes.per.second": ("rate_limit_bps", -1),
    "remote.log.manager.task.interval.ms": ("interval_ms", 30_000),
    "remote.log.orphan.grace.ms": ("orphan_grace_ms", 60_000),
    "remote.log.metrics.port": ("metrics_port", -1),
}
_STR_KEYS = {
    "remote.storage.s3.endpoint.url": "endpoint_url",
    "remote.storage.s3.region": "region",
    "remote.storage.s3.profile": "profile",
}


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

    @classmethod
    def load(cls, path: Path) -> TieringConfig:
        return cls.from_properties(read_properties(Path(path)), source=str(path))

    @classmethod
    def from_properties(cls, props: dict[str, str], *, source: str) -> TieringConfig:
        known = {"log.dirs", "remote.storage.url", *_INT_KEYS, *_STR_KEYS}
        for key in props:
            if key not in known:
                raise ConfigError("unknown sidecar setting", setting=key, source=source)
        for key in ("log.dirs", "remote.storage.url"):
            if not props.get(key, "").strip():
                raise ConfigError("required setting missing", setting=key, source=source)
        values: dict[str, object] = {}
        for key, (attr, _default) in _INT_KEYS.items():
            if key in props:
                try:
                    values[attr] = int(props[key].strip())
                except ValueError:
                    raise ConfigError("not an integer", setting=key, source=source) from None
        for key, attr in _STR_KEYS.items():
            if props.get(key, "").strip():
                values[attr] = props[key].strip()
        dirs = tuple(Path(d.strip()) for d in props["log.dirs"].split(",") if d.strip())
        return cls(log_dirs=dirs, remote_url=props["remote.storage.url"].strip(), **values)  # type: ignore[arg-type]

    def open_store(self) -> ObjectStore:
        """The remote store this config names (S3 via boto3, anything else via fsspec)."""
        if self.remote_url.startswith("s3://"):
            return S3Store(
                self.remote_url,
                endpoint_url=self.endpoint_url,
                region=self.region,
                profile=self.profile,
                multipart_threshold=self.multipart_threshold,
                multipart_chunksize=self.multipart_part,
                rate_limit_bps=max(self.rate_limit_bps, 0),
            )
        return FsspecStore(self.remote_url, rate_limit_bps=max(self.rate_limit_bps, 0))
