"""The unified configuration file (kafkatier.cli.config.loader): every key checked, errors at
file:line,
topic settings validated by LogConfig, the shipped example equal to the built-in defaults, and
every command taking the same file."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from kafkatier.cli.config.loader import BUILTIN, load_config, split_topic_key
from kafkatier.cli.main import main
from kafkatier.storage.config.topic_files import TopicConfigStore
from kafkatier.storage.errors import ConfigError
from kafkatier.tiering.config import TieringConfig

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = ROOT / "conf" / "kafkatier.properties"
BASE = """\
# a comment
log.dirs={logs}
remote.storage.url=file://{remote}
topic.events.partitions=2
topic.events.segment.bytes=262144
topic.events.remote.storage.enable=true
run.batches=3
"""


def write(tmp_path: Path, extra: str = "", base: str = BASE) -> Path:
    path = tmp_path / "k.properties"
    text = base.format(logs=tmp_path / "logs", remote=tmp_path / "remote") + extra
    path.write_text(text)
    return path


def error_of(path: Path) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(path)
    return str(info.value)


def test_a_valid_file_parses_into_typed_settings(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, "topic.a.b.retention.ms=1000\n"))
    assert config.tiering.log_dirs == (tmp_path / "logs",)
    assert config.embedded_dir is None
    events = config.topics["events"]
    assert events.partitions == 2 and events.config.segment_bytes == 262144
    assert events.config.remote_storage_enable
    assert config.topics["a.b"].config.retention_ms == 1000  # a topic name with a dot
    assert config.run.batches == 3 and not config.run.reset  # production defaults otherwise


@pytest.mark.parametrize(
    ("extra", "line", "words"),
    [
        ("remote.storage.secret=x\n", 8, "unknown sidecar setting 'remote.storage.secret'"),
        ("topic.events.segment.byte=1\n", 8, "unknown setting 'topic.events.segment.byte'"),
        ("run.batchez=1\n", 8, "did you mean 'run.batches'"),
        ("\n\nrun.batches=-1\n", 10, "run.batches: out of range"),
        ("run.input=kafka\n", 8, "expected one of clickstream, files"),
        ("topic.events.retention.ms=soon\n", 8, "invalid value for retention.ms"),
        ("topic.events.cleanup.policy=sometimes\n", 8, "cleanup.policy"),
        ("topic.events.partitions=0\n", 8, "partitions must be a positive integer"),
        ("remote.log.metrics.port=70000\n", 8, "out of range"),
        ("remote.storage.embedded=maybe\n", 8, "expected true or false"),
        ("run.input=files\n", 8, "run.input=files needs run.input.path"),
    ],
)
def test_errors_name_file_and_line(tmp_path: Path, extra: str, line: int, words: str) -> None:
    path = write(tmp_path, extra)  # a repeated key: the later line wins (as in Java)
    message = error_of(path)
    assert f"{path}:{line}" in message, message
    assert words in message


def test_a_topic_combination_error_names_the_offending_line(tmp_path: Path) -> None:
    # local.retention.bytes above retention.bytes: Kafka's tiered-storage rule, across two lines
    path = write(tmp_path, "topic.events.retention.bytes=1000\n"
                           "topic.events.local.retention.bytes=2000\n")  # fmt: skip
    message = error_of(path)
    assert f"{path}:9" in message and "local.retention.bytes" in message


def test_embedded_s3_needs_no_endpoint_and_an_s3_url(tmp_path: Path) -> None:
    embedded = "remote.storage.embedded=true\n"
    with_endpoint = write(tmp_path, embedded + "remote.storage.s3.endpoint.url=http://x:1\n")
    assert "remove remote.storage.s3.endpoint.url" in error_of(with_endpoint)
    assert "needs an s3:// url" in error_of(write(tmp_path, embedded))
    short = write(tmp_path, embedded, base=BASE.replace("file://{remote}", "s3://b/p"))
    assert "'b' is not an S3 bucket name" in error_of(short)
    ok = write(tmp_path, embedded, base=BASE.replace("file://{remote}", "s3://bucket/p"))
    assert load_config(ok).embedded_dir == Path("kafkatier-run/s3").absolute()


def test_longest_setting_name_wins_when_splitting_topic_keys() -> None:
    assert split_topic_key("topic.x.local.retention.ms") == ("x", "local.retention.ms")
    assert split_topic_key("topic.x.local.retention.ms.retention.ms") == (
        "x.local.retention.ms", "retention.ms")  # fmt: skip
    assert split_topic_key("topic.retention.ms") is None  # no name left


def test_shipped_example_is_the_built_in_configuration() -> None:
    shipped, builtin = load_config(SHIPPED), load_config(None)
    assert dataclasses.replace(shipped, source="") == dataclasses.replace(builtin, source="")
    assert builtin.run.reset and builtin.run.batches > 0 and builtin.embedded_dir is not None
    assert set(builtin.topics) == {"events", "user-state"}
    state = builtin.topics["user-state"].config
    assert "compact" in state.cleanup_policy and state.remote_storage_enable
    assert all(not key.startswith("remote.storage.s3.endpoint") for key in BUILTIN)


def test_the_sidecar_loader_skips_only_the_unified_sections(tmp_path: Path) -> None:
    path = write(tmp_path, "remote.storage.embedded=false\n")
    assert TieringConfig.load(path).log_dirs == (tmp_path / "logs",)
    bad = write(tmp_path, "remote.log.nonsense=1\n")
    with pytest.raises(ConfigError, match=r"k\.properties:8"):
        TieringConfig.load(bad)


def test_old_sidecar_files_still_load() -> None:
    config = load_config(ROOT / "conf" / "sidecar.properties")
    assert config.tiering.remote_url.startswith("s3://") and config.topics == {}


def test_topic_settings_are_written_where_writers_read_them(tmp_path: Path) -> None:
    config = load_config(write(tmp_path))
    config.write_topic_configs()
    stored = TopicConfigStore(tmp_path / "logs").get("events")
    assert stored.segment_bytes == 262144 and stored.remote_storage_enable


def test_every_command_takes_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path)
    (tmp_path / "remote").mkdir()
    assert main(["sidecar", "--config", str(path), "--once"]) == 0
    assert (tmp_path / "logs" / "kafkatier-topic.events.properties").exists()
    assert main(["status", "--config", str(path), "--json"]) == 0
    (tmp_path / "r").mkdir()
    assert main(["restore", "--config", str(path), "--topic", "events", "--to",
                 str(tmp_path / "r"), "--quiet"]) == 1  # fmt: skip  (nothing uploaded yet)
    bad = write(tmp_path, "run.batches=x\n")
    for command in (["sidecar", "--once"], ["status"], ["run"],
                    ["restore", "--topic", "t", "--to", str(tmp_path / "r")]):  # fmt: skip
        assert main([command[0], "--config", str(bad), *command[1:]]) == 2
        assert f"{bad}:8" in capsys.readouterr().err


def test_a_partition_count_that_differs_from_the_disk_is_an_error(tmp_path: Path) -> None:
    """``topic.events.partitions=2`` against three partitions on disk: the sidecar and
    ``run`` refuse it naming the setting (the sidecar accepted it), as the sink does."""
    from kafkatier.storage.log.directory import LogDirectory

    config = load_config(write(tmp_path))
    with LogDirectory(tmp_path / "logs") as logs:
        logs.create_partitions("events", 3)
    with pytest.raises(ConfigError, match="has 3 partitions") as raised:
        config.write_topic_configs()
    assert raised.value.context["setting"] == "topic.events.partitions"
    with LogDirectory(tmp_path / "logs2") as logs:
        logs.create_partitions("events", 2)
    same = load_config(write(tmp_path, base=BASE.replace("{logs}", str(tmp_path / "logs2"))))
    same.write_topic_configs()  # the same count: fine
