import dataclasses
import pickle
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkatier.storage.config.log_config import LogConfig, parse_overrides
from kafkatier.storage.config.spec import LONG_MAX
from kafkatier.storage.errors import ConfigError
from kafkatier.storage.java_properties import read_properties
from kafkatier.storage.wire import Codec, TimestampType

# Kafka's documented defaults (kafka-format.md §9-§11, LogConfig/CleanerConfig/ServerLogConfigs).
KAFKA_DEFAULTS = {
    "segment.bytes": "1073741824",
    "segment.ms": "604800000",
    "segment.jitter.ms": "0",
    "segment.index.bytes": "10485760",
    "index.interval.bytes": "4096",
    "max.message.bytes": "1048588",
    "message.timestamp.type": "CreateTime",
    "compression.type": "producer",
    "compression.gzip.level": "-1",
    "compression.lz4.level": "9",
    "compression.zstd.level": "3",
    "cleanup.policy": "delete",
    "retention.ms": "604800000",
    "retention.bytes": "-1",
    "delete.retention.ms": "86400000",
    "min.cleanable.dirty.ratio": "0.5",
    "min.compaction.lag.ms": "0",
    "max.compaction.lag.ms": "9223372036854775807",
    "file.delete.delay.ms": "60000",
    "flush.messages": "9223372036854775807",
    "flush.ms": "9223372036854775807",
    "remote.storage.enable": "false",
    "remote.log.copy.disable": "false",
    "remote.log.delete.on.disable": "false",
    "local.retention.ms": "-2",
    "local.retention.bytes": "-2",
    "min.insync.replicas": "1",
    "unclean.leader.election.enable": "false",
    "leader.replication.throttled.replicas": "",
    "follower.replication.throttled.replicas": "",
    "preallocate": "false",
    "producer.id.expiration.ms": "86400000",
    "log.cleaner.dedupe.buffer.size": "134217728",
    "log.cleaner.io.buffer.size": "524288",
    "log.cleaner.io.buffer.load.factor": "0.9",
}


def _parse(**props: str) -> LogConfig:
    return LogConfig.from_properties({k.replace("_", "."): v for k, v in props.items()}, source="t")


def test_defaults_are_kafkas():
    assert LogConfig().to_properties(include_defaults=True) == KAFKA_DEFAULTS
    assert LogConfig().to_properties() == {}
    assert LogConfig.from_properties(KAFKA_DEFAULTS, source="defaults") == LogConfig()
    cfg = LogConfig()
    assert cfg.message_timestamp_before_max_ms is None
    assert cfg.message_timestamp_after_max_ms is None
    assert (cfg.is_delete, cfg.is_compacted, cfg.codec) == (True, False, None)


def test_only_non_defaults_are_written():
    cfg = _parse(segment_bytes="1048576", retention_ms="-1")
    assert cfg.to_properties() == {"segment.bytes": "1048576", "retention.ms": "-1"}
    assert cfg.segment_bytes == 1 << 20 and cfg.retention_ms == -1


@pytest.mark.parametrize(
    ("text", "policy", "compact", "delete"),
    [
        ("delete", ("delete",), False, True),
        ("compact", ("compact",), True, False),
        ("delete,compact", ("delete", "compact"), True, True),
        ("compact, delete", ("compact", "delete"), True, True),
        ("", (), False, False),
    ],
)
def test_cleanup_policy(text, policy, compact, delete):
    cfg = _parse(cleanup_policy=text)
    assert (cfg.cleanup_policy, cfg.is_compacted, cfg.is_delete) == (policy, compact, delete)
    assert LogConfig.from_properties(cfg.to_properties(), source="again") == cfg


@pytest.mark.parametrize("text", ["Compact", "delete,delete", "compact;delete", "none"])
def test_bad_cleanup_policy(text):
    with pytest.raises(ConfigError) as info:
        _parse(cleanup_policy=text)
    assert info.value.setting == "cleanup.policy"
    assert "compact, delete" in info.value.valid


@pytest.mark.parametrize(
    ("text", "stored", "codec"),
    [
        ("producer", "producer", None),
        ("uncompressed", "uncompressed", Codec.NONE),
        ("none", "uncompressed", Codec.NONE),
        ("gzip", "gzip", Codec.GZIP),
        ("snappy", "snappy", Codec.SNAPPY),
        ("lz4", "lz4", Codec.LZ4),
        ("zstd", "zstd", Codec.ZSTD),
    ],
)
def test_compression_type(text, stored, codec):
    cfg = _parse(compression_type=text)
    assert (cfg.compression_type, cfg.codec) == (stored, codec)


def test_compression_levels():
    cfg = _parse(compression_gzip_level="9", compression_lz4_level="1", compression_zstd_level="-5")
    assert cfg.compression_level(Codec.GZIP) == 9
    assert cfg.compression_level(Codec.LZ4) == 1
    assert cfg.compression_level(Codec.ZSTD) == -5
    assert cfg.compression_level(Codec.SNAPPY) is None
    assert cfg.compression_level(Codec.NONE) is None


@pytest.mark.parametrize(
    ("key", "good", "bad"),
    [
        ("compression.gzip.level", ["-1", "1", "9"], ["0", "10", "-2"]),
        ("compression.lz4.level", ["1", "17"], ["0", "18"]),
        ("compression.zstd.level", ["-131072", "22", "0"], ["-131073", "23"]),
        ("segment.bytes", ["14", "2147483647"], ["13", "2147483648", "-1"]),
        ("segment.ms", ["1", str(LONG_MAX)], ["0", str(LONG_MAX + 1)]),
        ("retention.ms", ["-1", "0"], ["-2"]),
        ("retention.bytes", ["-5", "0", "-9223372036854775808"], ["x"]),
        ("local.retention.ms", ["-2", "-1"], ["-3"]),
        ("max.compaction.lag.ms", ["1"], ["0"]),
        ("flush.messages", ["1"], ["0"]),
        ("min.cleanable.dirty.ratio", ["0", "1", "0.25", ".5", "1e-1"], ["1.5", "-0.1", "nan"]),
        ("log.cleaner.io.buffer.load.factor", ["1", "0.5"], ["0", "1.01"]),
        ("remote.storage.enable", ["true", "FALSE", " True "], ["yes", "1", ""]),
        ("message.timestamp.type", ["CreateTime", "LogAppendTime"], ["createtime", "None"]),
        ("message.timestamp.after.max.ms", ["0", "3600000"], ["-1"]),
        ("producer.id.expiration.ms", ["1"], ["0", "2147483648"]),
        ("log.cleaner.dedupe.buffer.size", ["48", "134217728"], ["47", "1", "0"]),
    ],
)
def test_ranges(key, good, bad):
    for text in good:
        LogConfig.from_properties({key: text}, source="t")
    for text in bad:
        with pytest.raises(ConfigError) as info:
            LogConfig.from_properties({key: text}, source="topic.properties")
        err = info.value
        assert (err.setting, err.value, err.source) == (key, text, "topic.properties")
        assert err.valid and key in str(err) and "topic.properties" in str(err)


def test_valid_range_text_is_kafka_style():
    with pytest.raises(ConfigError) as info:
        _parse(compression_gzip_level="0")
    assert info.value.valid == "[1,...,9] or -1"
    with pytest.raises(ConfigError) as info:
        _parse(segment_index_bytes="3")
    assert info.value.valid == "[4,...]"
    with pytest.raises(ConfigError, match="not a number of type INT") as info:  # Kafka's words
        _parse(segment_bytes="99999999999")  # beyond a Java int: "[14,...]" alone did not say
    assert "2147483647" in str(info.value)


def test_unknown_setting_suggests_closest():
    with pytest.raises(ConfigError, match=r"did you mean 'segment\.bytes'") as info:
        LogConfig.from_properties({"segment.byte": "1"}, source="--config")
    assert info.value.setting == "segment.byte" and info.value.source == "--config"
    assert "retention.ms" in info.value.known
    with pytest.raises(ConfigError, match="unknown setting 'zzz'") as info:
        _parse(zzz="1")
    assert "did you mean" not in str(info.value)


def test_key_alias_for_the_load_factor():
    cfg = LogConfig.from_properties({"log.cleaner.dedupe.buffer.load.factor": "0.75"}, source="t")
    assert cfg.dedupe_buffer_load_factor == 0.75
    assert cfg.to_properties() == {"log.cleaner.io.buffer.load.factor": "0.75"}
    both = {
        "log.cleaner.dedupe.buffer.load.factor": "0.7",
        "log.cleaner.io.buffer.load.factor": "0.8",
    }
    with pytest.raises(ConfigError, match="given twice"):
        LogConfig.from_properties(both, source="t")


def test_compaction_lags_must_be_ordered():
    with pytest.raises(ConfigError, match=r"max\.compaction\.lag\.ms") as info:
        _parse(min_compaction_lag_ms="10", max_compaction_lag_ms="5")
    assert (info.value.setting, info.value.value, info.value.source) == (
        "min.compaction.lag.ms", 10, "t"
    )


@pytest.mark.parametrize(
    ("props", "setting"),
    [
        ({"local.retention.ms": "-1"}, "local.retention.ms"),
        ({"local.retention.ms": "604800001"}, "local.retention.ms"),
        ({"retention.bytes": "100", "local.retention.bytes": "-1"}, "local.retention.bytes"),
        ({"retention.bytes": "100", "local.retention.bytes": "101"}, "local.retention.bytes"),
    ],
)
def test_tiered_storage_rules(props, setting):
    with pytest.raises(ConfigError) as info:
        LogConfig.from_properties({"remote.storage.enable": "true", **props}, source="s")
    assert info.value.setting == setting and info.value.source == "s"
    LogConfig.from_properties(props, source="s")  # the rules apply only with remote storage


@pytest.mark.parametrize("policy", ["compact", "delete,compact", "compact,delete"])
def test_compacted_topics_may_be_tiered_unlike_in_kafka(policy):
    """Kafka refuses this combination; kafkatier's sidecar compacts the tiered copy (issue 6)."""
    cfg = LogConfig.from_properties(
        {"remote.storage.enable": "true", "cleanup.policy": policy}, source="s"
    )
    assert cfg.remote_storage_enable and cfg.is_compacted


def test_tiered_storage_effective_local_retention():
    cfg = _parse(remote_storage_enable="true", retention_ms="1000", retention_bytes="500")
    assert (cfg.effective_local_retention_ms, cfg.effective_local_retention_bytes) == (1000, 500)
    cfg = _parse(remote_storage_enable="true", retention_ms="-1", local_retention_ms="-1")
    assert cfg.effective_local_retention_ms == -1
    cfg = _parse(remote_storage_enable="true", retention_ms="1000", local_retention_ms="200")
    assert cfg.effective_local_retention_ms == 200


def test_max_segment_ms():
    assert _parse(segment_ms="1000", max_compaction_lag_ms="10").max_segment_ms == 1000
    compacted = _parse(cleanup_policy="compact", segment_ms="1000", max_compaction_lag_ms="10")
    assert compacted.max_segment_ms == 10
    assert _parse(cleanup_policy="compact", segment_ms="1000").max_segment_ms == 1000


def test_timestamp_type():
    assert LogConfig().timestamp_type is TimestampType.CREATE_TIME
    assert _parse(message_timestamp_type="LogAppendTime").timestamp_type is (
        TimestampType.LOG_APPEND_TIME
    )


def test_with_overrides_layers_and_names_its_source():
    base = _parse(segment_bytes="2000000", cleanup_policy="compact")
    cfg = base.with_overrides({"retention.ms": "5"}, source="--config")
    assert (cfg.segment_bytes, cfg.cleanup_policy, cfg.retention_ms) == (2000000, ("compact",), 5)
    with pytest.raises(ConfigError) as info:
        base.with_overrides({"max.compaction.lag.ms": "1", "min.compaction.lag.ms": "2"}, "cli")
    assert info.value.source == "cli"


def test_direct_construction_is_validated_and_normalized():
    with pytest.raises(ConfigError) as info:
        LogConfig(segment_bytes=1)
    assert (info.value.setting, info.value.source) == ("segment.bytes", "LogConfig(...)")
    with pytest.raises(ConfigError):
        LogConfig(remote_storage_enable=1)  # type: ignore[arg-type]
    cfg = LogConfig(cleanup_policy="compact,delete", compression_type="none")  # type: ignore[arg-type]
    assert cfg.cleanup_policy == ("compact", "delete") and cfg.compression_type == "uncompressed"
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.segment_ms = 5  # type: ignore[misc]


def test_random_segment_jitter():
    assert LogConfig().random_segment_jitter() == 0
    cfg = _parse(segment_jitter_ms="100", segment_ms="40")
    draws = {cfg.random_segment_jitter(random.Random(seed)) for seed in range(200)}
    assert draws <= set(range(40)) and len(draws) > 20


def test_errors_pickle():
    with pytest.raises(ConfigError) as info:
        _parse(segment_ms="x")
    clone = pickle.loads(pickle.dumps(info.value))
    assert (clone.setting, clone.value, clone.source, str(clone)) == (
        "segment.ms", "x", "t", str(info.value)
    )


_VALUES = st.fixed_dictionaries(
    {},
    optional={
        "segment.bytes": st.integers(14, 2**31 - 1).map(str),
        "retention.ms": st.integers(-1, 2**63 - 1).map(str),
        "retention.bytes": st.integers(-(2**63), 2**63 - 1).map(str),
        "cleanup.policy": st.sampled_from(["delete", "compact", "compact,delete", ""]),
        "compression.type": st.sampled_from(["gzip", "zstd", "producer", "uncompressed"]),
        "min.cleanable.dirty.ratio": st.floats(0, 1).map(repr),
        "remote.storage.enable": st.just("false"),
        "message.timestamp.before.max.ms": st.integers(0, 2**63 - 1).map(str),
        "compression.zstd.level": st.integers(-131072, 22).map(str),
    },
)


@settings(max_examples=100, deadline=None)
@given(_VALUES)
def test_properties_round_trip(props):
    cfg = LogConfig.from_properties(props, source="t")
    assert LogConfig.from_properties(cfg.to_properties(), source="t") == cfg
    full = cfg.to_properties(include_defaults=True)
    assert LogConfig.from_properties(full, source="t") == cfg


def test_parse_overrides():
    assert parse_overrides(["a=1", " b = 2", "c=x=y", "d="]) == {
        "a": "1", "b": " 2", "c": "x=y", "d": ""
    }
    for bad in (["novalue"], ["=v"], ["a=1", "a=2"]):
        with pytest.raises(ConfigError) as info:
            parse_overrides(bad, source="--topic-config")
        assert info.value.source == "--topic-config"
        assert info.value.item == bad[-1]


def test_properties_file_to_config(tmp_path):
    path = tmp_path / "topic.properties"
    path.write_text("# topic overrides\nsegment.bytes = 1048576\ncleanup.policy: compact\n")
    cfg = LogConfig.from_properties(read_properties(path), source=str(path))
    assert (cfg.segment_bytes, cfg.cleanup_policy) == (1048576, ("compact",))
    path.write_text("segment.ms=soon\n")
    with pytest.raises(ConfigError) as info:
        LogConfig.from_properties(read_properties(path), source=str(path))
    assert str(path) in str(info.value) and "segment.ms" in str(info.value)


def test_kafkas_replication_settings_are_accepted_as_a_cluster_has_them() -> None:
    """A topic's configs copied from a cluster (``kafka-configs --describe``) carry replication
    and placement settings: accepted, validated as Kafka validates them, kept, and of no effect
    with one writer and no replicas (they were "unknown setting" errors)."""
    given = {
        "min.insync.replicas": "2",
        "unclean.leader.election.enable": "true",
        "leader.replication.throttled.replicas": "*",
        "follower.replication.throttled.replicas": "0:1,1:0",
        "preallocate": "true",
    }
    config = LogConfig.from_properties(given, source="test")
    assert config.min_insync_replicas == 2 and config.unclean_leader_election_enable
    assert config.follower_replication_throttled_replicas == ("0:1", "1:0")
    assert {k: v for k, v in config.to_properties().items() if k in given} == given
    throttled = "leader.replication.throttled.replicas"
    for key, bad in (("min.insync.replicas", "0"), ("preallocate", "maybe"), (throttled, "any"),
                     (throttled, "0:1,*"), (throttled, "0:x"), (throttled, "0-1")):  # fmt: skip
        with pytest.raises(ConfigError, match=key):
            LogConfig.from_properties({key: bad}, source="test")
    for good in ("*", "0:1", "0:1,", " 0:1 , 12:345 "):  # Kafka's ThrottledReplicaListValidator
        LogConfig.from_properties({throttled: good}, source="test")
