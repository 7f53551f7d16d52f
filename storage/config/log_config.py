"""Typed topic configuration with Kafka's names, defaults and validations (``LogConfig.java``).

Settings arrive as text from ``.properties`` files (:func:`read_properties`) or ``--config k=v``
options (:func:`parse_overrides`); every error says which setting, the bad value, the valid range
and where the value came from.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kafkatier.storage.config.spec import LONG_MAX, Spec, did_you_mean, setting, spec_of
from kafkatier.storage.errors import ConfigError
from kafkatier.storage.wire import (
    DEFAULT_MAX_MESSAGE_BYTES,
    MIN_LEGACY_RECORD_SIZE,
    TIME_INDEX_ENTRY,
    Codec,
    TimestampType,
)

__all__ = ["LogConfig", "parse_overrides"]

_DAY_MS: Final = 86_400_000
_UNLIMITED: Final = str(2**63 - 1)  # Long.MAX_VALUE, as a broker shows "no limit"
_COMPRESSION_TYPES: Final = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_KEY_ALIASES: Final = {
    # The brief's (and intuition's) name; Kafka's real key is log.cleaner.io.buffer.load.factor.
    "log.cleaner.dedupe.buffer.load.factor": "log.cleaner.io.buffer.load.factor",
}


_REPLICA_LIST: Final = {  # Kafka's ThrottledReplicaListValidator
    "items": r"([0-9]+:[0-9]+)?",
    "items_text": "the literal '*' or a list of replicas as [partitionId]:[brokerId],...",
}


@dataclass(frozen=True)
class LogConfig:
    """Per-partition settings: Kafka's topic configs plus the broker settings a log dir needs.

    ``segment.bytes`` keeps Kafka 3.x's lower bound (14 bytes) rather than 4.0's 1 MiB so small
    segments stay possible in tests. ``compression.type`` uses Kafka's topic vocabulary
    (``uncompressed`` rather than ``none``; ``none`` is accepted and normalized).
    ``message.timestamp.*.max.ms`` of None means unlimited (Long.MAX).
    """

    segment_bytes: int = setting("segment.bytes", 1 << 30, "int", low=MIN_LEGACY_RECORD_SIZE)
    segment_ms: int = setting("segment.ms", 7 * _DAY_MS, "long", low=1)
    segment_jitter_ms: int = setting("segment.jitter.ms", 0, "long", low=0)
    segment_index_bytes: int = setting("segment.index.bytes", 10 << 20, "int", low=4)
    index_interval_bytes: int = setting("index.interval.bytes", 4096, "int", low=0)
    max_message_bytes: int = setting(
        "max.message.bytes", DEFAULT_MAX_MESSAGE_BYTES, "int", low=0
    )
    message_timestamp_type: str = setting(
        "message.timestamp.type", "CreateTime", "choice", choices=("CreateTime", "LogAppendTime")
    )
    message_timestamp_before_max_ms: int | None = setting(
        "message.timestamp.before.max.ms", None, "long", low=0, optional=True, unset=_UNLIMITED
    )
    message_timestamp_after_max_ms: int | None = setting(  # Kafka 3.x's default: no limit
        "message.timestamp.after.max.ms", None, "long", low=0, optional=True, unset=_UNLIMITED
    )
    compression_type: str = setting(
        "compression.type", "producer", "choice", choices=_COMPRESSION_TYPES,
        aliases=(("none", "uncompressed"),),
    )
    compression_gzip_level: int = setting(
        "compression.gzip.level", -1, "int", low=1, high=9, extra=(-1,)
    )
    compression_lz4_level: int = setting("compression.lz4.level", 9, "int", low=1, high=17)
    compression_zstd_level: int = setting(
        "compression.zstd.level", 3, "int", low=-131072, high=22
    )
    cleanup_policy: tuple[str, ...] = setting(
        "cleanup.policy", ("delete",), "list", choices=("compact", "delete")
    )
    retention_ms: int = setting("retention.ms", 7 * _DAY_MS, "long", low=-1)
    retention_bytes: int = setting("retention.bytes", -1, "long")
    delete_retention_ms: int = setting("delete.retention.ms", _DAY_MS, "long", low=0)
    min_cleanable_dirty_ratio: float = setting(
        "min.cleanable.dirty.ratio", 0.5, "double", low=0, high=1
    )
    min_compaction_lag_ms: int = setting("min.compaction.lag.ms", 0, "long", low=0)
    max_compaction_lag_ms: int = setting("max.compaction.lag.ms", LONG_MAX, "long", low=1)
    file_delete_delay_ms: int = setting("file.delete.delay.ms", 60_000, "long", low=0)
    flush_messages: int = setting("flush.messages", LONG_MAX, "long", low=1)
    flush_ms: int = setting("flush.ms", LONG_MAX, "long", low=0)
    remote_storage_enable: bool = setting("remote.storage.enable", False, "boolean")
    # Kafka 3.9's KIP-950: a tiered topic made read-only remotely (no more uploads, local
    # retention by the total retention.*), and remote storage turned off with its data deleted.
    remote_log_copy_disable: bool = setting("remote.log.copy.disable", False, "boolean")
    remote_log_delete_on_disable: bool = setting("remote.log.delete.on.disable", False, "boolean")
    # Kafka's replication and placement settings: accepted and kept, so a topic's configs copy
    # over from a cluster as they are; with one writer and no replicas they change nothing here.
    min_insync_replicas: int = setting("min.insync.replicas", 1, "int", low=1)
    unclean_leader_election_enable: bool = setting(
        "unclean.leader.election.enable", False, "boolean"
    )
    leader_replication_throttled_replicas: tuple[str, ...] = setting(
        "leader.replication.throttled.replicas", (), "list", **_REPLICA_LIST
    )
    follower_replication_throttled_replicas: tuple[str, ...] = setting(
        "follower.replication.throttled.replicas", (), "list", **_REPLICA_LIST
    )
    preallocate: bool = setting("preallocate", False, "boolean")
    local_retention_ms: int = setting("local.retention.ms", -2, "long", low=-2)
    local_retention_bytes: int = setting("local.retention.bytes", -2, "long", low=-2)
    # Broker-level settings (server.properties names) that apply per log dir.
    producer_id_expiration_ms: int = setting(
        "producer.id.expiration.ms", _DAY_MS, "int", low=1, broker=True
    )
    # At least two 24-byte entries, so the key map holds one key at the 0.9 load factor (smaller
    # was a ValueError traceback, or a map that never compacts). Kafka asks for 1 MiB a cleaner
    # thread; tests give a few hundred bytes to force several passes.
    dedupe_buffer_size: int = setting(
        "log.cleaner.dedupe.buffer.size", 128 << 20, "long", low=48, broker=True
    )
    io_buffer_size: int = setting(
        "log.cleaner.io.buffer.size", 512 << 10, "int", low=0, broker=True
    )
    dedupe_buffer_load_factor: float = setting(
        "log.cleaner.io.buffer.load.factor", 0.9, "double", low=0, high=1, low_open=True,
        broker=True,
    )

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            spec = spec_of(f)
            value = spec.normalize(getattr(self, f.name))
            object.__setattr__(self, f.name, value)
            _check(spec, value, value, "LogConfig(...)")
        _check_combination(self, "LogConfig(...)")

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def from_properties(cls, props: Mapping[str, str], *, source: str) -> LogConfig:
        """Kafka's defaults overridden by ``props`` (Kafka names); ``source`` is named in errors."""
        return cls().with_overrides(props, source=source)

    def with_overrides(self, props: Mapping[str, str], source: str) -> LogConfig:
        """A copy with the given settings (Kafka names, text values) replaced."""
        changes: dict[str, Any] = {}
        given_as: dict[str, str] = {}
        for key, text in props.items():
            attr, spec = _lookup(key, source)
            if attr in changes:
                raise ConfigError(
                    f"{spec.name} given twice (as {given_as[attr]!r} and {key!r})",
                    setting=spec.name, source=source,
                )
            try:
                changes[attr] = spec.parse(text)
            except ValueError as e:
                raise _bad_value(spec, text, source, str(e)) from None
            given_as[attr] = key
            _check(spec, changes[attr], text, source)
        try:
            return dataclasses.replace(self, **changes)
        except ConfigError as e:
            raise ConfigError(e.message, **{**e.context, "source": source}) from None

    def to_properties(self, *, include_defaults: bool = False) -> dict[str, str]:
        """Kafka names to text; only the settings that differ from Kafka's defaults unless asked."""
        result: dict[str, str] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is not None and (include_defaults or value != f.default):
                result[spec_of(f).name] = spec_of(f).format(value)
        return result

    # -- effective values ---------------------------------------------------------------------

    @property
    def is_compacted(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def is_delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def max_batch_bytes(self) -> int:
        """The largest batch kafkatier's own writers build for this topic: ``max.message.bytes``,
        and never more than ``segment.bytes``, which a batch must fit (Kafka's broker refuses a
        larger one; a producer's ``batch.size`` is the client's to bound, and here we are the
        client)."""
        return min(self.max_message_bytes, self.segment_bytes)

    @property
    def max_segment_ms(self) -> int:
        """Roll age (§9.2): compacted topics roll by max.compaction.lag.ms too."""
        if self.is_compacted and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    @property
    def effective_local_retention_ms(self) -> int:
        """local.retention.ms, where -2 means "same as retention.ms" (§10); retention.ms once
        copying is disabled (Kafka's ``UnifiedLog.localRetentionMs``)."""
        if self.local_retention_ms == -2 or self.remote_log_copy_disable:
            return self.retention_ms
        return self.local_retention_ms

    @property
    def effective_local_retention_bytes(self) -> int:
        """local.retention.bytes, where -2 means "same as retention.bytes" (§10); retention.bytes
        once copying is disabled (Kafka's ``UnifiedLog.localRetentionSize``)."""
        if self.local_retention_bytes == -2 or self.remote_log_copy_disable:
            return self.retention_bytes
        return self.local_retention_bytes

    @property
    def codec(self) -> Codec | None:
        """The codec the broker re-compresses to; None for ``producer`` (keep the producer's)."""
        return None if self.compression_type == "producer" else Codec.parse(self.compression_type)

    @property
    def timestamp_type(self) -> TimestampType:
        if self.message_timestamp_type == "LogAppendTime":
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    def compression_level(self, codec: Codec) -> int | None:
        """The configured level for ``codec``; None for codecs without levels."""
        levels = {
            Codec.GZIP: self.compression_gzip_level,
            Codec.LZ4: self.compression_lz4_level,
            Codec.ZSTD: self.compression_zstd_level,
        }
        return levels.get(codec)

    def random_segment_jitter(self, rng: random.Random | None = None) -> int:
        """``LogConfig.randomSegmentJitter``: |random int32| mod min(jitter, segment.ms)."""
        if self.segment_jitter_ms == 0:
            return 0
        draw = (rng or random).getrandbits(32) - (1 << 31)
        magnitude = 0 if draw == -(1 << 31) else abs(draw)  # Kafka's Utils.abs
        return magnitude % min(self.segment_jitter_ms, self.segment_ms)


_FIELDS: Final = {spec_of(f).name: (f.name, spec_of(f)) for f in dataclasses.fields(LogConfig)}


def _lookup(key: str, source: str) -> tuple[str, Spec]:
    found = _FIELDS.get(_KEY_ALIASES.get(key, key))
    if found is not None:
        return found
    raise ConfigError(
        f"unknown setting {key!r}{did_you_mean(key, _FIELDS)}", setting=key, source=source,
        known=", ".join(sorted(_FIELDS)),
    )


def _bad_value(spec: Spec, value: object, source: str, reason: str) -> ConfigError:
    return ConfigError(
        f"invalid value for {spec.name}: {reason}",
        setting=spec.name, value=value, source=source, valid=spec.describe(),
    )


def _check(spec: Spec, value: object, shown: object, source: str) -> None:
    reason = spec.problem(value)
    if reason is not None:
        raise _bad_value(spec, shown, source, reason)


def _conflict(name: str, value: object, source: str, reason: str) -> ConfigError:
    return ConfigError(reason, setting=name, value=value, source=source)


def _check_combination(cfg: LogConfig, source: str) -> None:
    """Kafka's cross-setting rules (``LogConfig.validateValues`` and the tiered-storage ones,
    except the refusal of compacted tiered topics)."""
    if cfg.min_compaction_lag_ms > cfg.max_compaction_lag_ms:
        raise _conflict("min.compaction.lag.ms", cfg.min_compaction_lag_ms, source,
                        f"must not exceed max.compaction.lag.ms ({cfg.max_compaction_lag_ms})")
    if cfg.segment_index_bytes < TIME_INDEX_ENTRY.size:
        raise _conflict("segment.index.bytes", cfg.segment_index_bytes, source,
                        f"must be at least {TIME_INDEX_ENTRY.size}, one time index entry: Kafka "
                        "accepts it from 4, then cannot create a segment's time index")
    if not cfg.remote_storage_enable:
        return
    # Kafka refuses remote.storage.enable with cleanup.policy=compact (its remote compaction,
    # KIP-1272, is a proposal); kafkatier's sidecar compacts the tiered copy, so it is allowed.
    for local_name, local, total_name, total, off in (
        ("local.retention.bytes", cfg.local_retention_bytes, "retention.bytes",
         cfg.retention_bytes, cfg.retention_bytes <= -1),
        ("local.retention.ms", cfg.local_retention_ms, "retention.ms",
         cfg.retention_ms, cfg.retention_ms == -1),
    ):
        if off or local == -2:
            continue
        if local == -1:
            raise _conflict(local_name, local, source,
                            f"must not be -1 as {total_name} is set to {total}")
        if local > total:
            raise _conflict(local_name, local, source,
                            f"must not be more than {total_name} ({total})")


def parse_overrides(items: Sequence[str], source: str = "--config") -> dict[str, str]:
    """``["segment.ms=1000", ...]`` (command-line ``k=v`` items) as a mapping."""
    result: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError("expected key=value", item=item, source=source)
        if key in result:
            raise ConfigError(f"{key} given twice", setting=key, item=item, source=source)
        result[key] = value
    return result
