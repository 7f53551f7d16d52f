"""``kafkatier clean``: retention per topic configuration, --config for one run, --topic, the
summary (text and JSON), exit codes, and that bad settings touch no file."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from kafkatier.cli import clean_run as clean_cli
from kafkatier.cli.main import main
from kafkatier.storage.checkpoint.checkpoint_file import OffsetCheckpointFile
from kafkatier.storage.config.topic_files import TopicConfigStore
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record
from kafkatier.storage.verify.paths import verify_paths

OLD = 1_000_000_000_000  # 2001: expired under any retention.ms below twenty years
LINE = re.compile(
    r"(?P<tp>\S+) \[(?P<policy>[a-z,]+)\]: (?P<before>\d+) -> (?P<after>\d+) bytes, "
    r"(?P<segments>\d+) segments deleted, (?P<records>\d+) records removed, tombstones "
    r"(?P<kept>\d+) kept / (?P<dropped>\d+) dropped, log start (?P<s0>\d+) -> (?P<s1>\d+), "
    r"compaction (?P<compaction>.+)"
)


def write_topic(root: Path, topic: str, segments: int, *, keyed: bool = True,
                timestamp: int = OLD, partitions: int = 1) -> None:  # fmt: skip
    """``segments`` rolled segments of one three-record batch each, plus an active one."""
    with LogDirectory(root) as log_dir:
        for partition in range(partitions):
            log = log_dir.get_or_create(topic, partition)
            for i in range(segments + 1):
                key = (lambda j: b"k%d" % j) if keyed else (lambda j: None)
                log.append(build_batch([Record(j, timestamp + i, key(j), b"v%d" % i)
                                        for j in range(3)]))  # fmt: skip
                if i < segments:
                    log.roll()


def state(root: Path) -> dict[str, tuple[int, int]]:
    """Every file (hidden ones too) with size and mtime: what 'untouched' means."""
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def summary_lines(out: str) -> dict[str, dict[str, str]]:
    rows = {}
    for line in out.splitlines():
        match = LINE.fullmatch(line)
        if match:
            rows[match["tp"]] = match.groupdict()
    return rows


def no_errors(root: Path) -> bool:
    return not [p for p in verify_paths([root]) if p.severity == "error"]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "logs"
    write_topic(root, "events", 3)
    write_topic(root, "keep", 2, timestamp=4_000_000_000_000)  # 2096
    TopicConfigStore(root).update("events", {"retention.ms": "86400000"}, source="test")
    return root


def test_retention_by_stored_topic_config(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["clean", str(root)]) == 0
    out = capsys.readouterr().out
    rows = summary_lines(out)
    events, keep = rows["events-0"], rows["keep-0"]
    # every segment expired, the active one too: a new empty one was rolled at the end
    assert (events["segments"], events["records"], events["s0"], events["s1"]) == (
        "4", "12", "0", "12")  # fmt: skip
    assert int(events["after"]) < int(events["before"]) and events["compaction"] == "off"
    assert (keep["segments"], keep["before"] == keep["after"]) == ("0", True)
    total = out.splitlines()[-1]
    assert total.startswith("total: 2 partitions, ") and "4 segments deleted, 12 records" in total
    # the start is the first segment's base, which Kafka does not checkpoint (§8.2)
    assert OffsetCheckpointFile(root / "log-start-offset-checkpoint").read() == {}
    points = OffsetCheckpointFile(root / "recovery-point-offset-checkpoint").read()
    assert points[("events", 0)] == 12
    assert sorted(p.name for p in (root / "events-0").glob("*.log")) == [
        "00000000000000000012.log"]  # fmt: skip
    assert (root / ".kafka_cleanshutdown").exists()  # closed cleanly
    assert no_errors(root)
    assert main(["clean", str(root)]) == 0  # a second pass has nothing left to do
    assert summary_lines(capsys.readouterr().out)["events-0"]["segments"] == "0"


def test_config_overrides_apply_to_this_run_and_topic_only(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stored = TopicConfigStore(root).path("events").read_text()
    args = ["clean", str(root), "--topic", "keep", "--config", "retention.bytes=0",
            "--config", "file.delete.delay.ms=0"]  # fmt: skip
    assert main(args) == 0
    rows = summary_lines(capsys.readouterr().out)
    assert list(rows) == ["keep-0"]
    assert (rows["keep-0"]["segments"], rows["keep-0"]["s1"]) == ("3", "9")
    assert not list((root / "keep-0").glob("*.deleted"))  # zero delay: gone in the pass
    assert TopicConfigStore(root).path("events").read_text() == stored
    assert not TopicConfigStore(root).path("keep").exists()
    assert len(list((root / "events-0").glob("*.log"))) == 4  # not selected: untouched


def test_json_lines(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["clean", str(root), "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    parts, total = lines[:-1], lines[-1]["total"]
    assert [(p["topic"], p["partition"]) for p in parts] == [("events", 0), ("keep", 0)]
    assert parts[0]["cleanup_policy"] == "delete" and parts[0]["log_start_after"] == 12
    for name in ("bytes_before", "bytes_after", "segments_deleted", "records_removed"):
        assert total[name] == sum(p[name] for p in parts)
    assert total["partitions"] == 2


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("retention.msec=5", "unknown setting 'retention.msec'"),
        ("retention.ms=soon", "invalid value for retention.ms"),
        ("cleanup.policy=shred", "invalid value for cleanup.policy"),
        ("retention.ms", "expected key=value"),
    ],
)
def test_bad_config_is_refused_before_any_file_is_touched(
    root: Path, capsys: pytest.CaptureFixture[str], config: str, message: str
) -> None:
    before = state(root)
    assert main(["clean", str(root), "--config", "retention.bytes=0", "--config", config]) == 2
    assert message in capsys.readouterr().err
    assert state(root) == before


def test_bad_stored_config_of_another_topic_is_refused_first(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    TopicConfigStore(root).path("keep").write_text("segment.bytes=tiny\n")
    before = state(root)
    assert main(["clean", str(root), "--topic", "events"]) == 2
    assert "segment.bytes" in capsys.readouterr().err
    assert state(root) == before


def test_compact_without_keys_is_a_config_error(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_topic(root, "nokeys", 1, keyed=False)
    before = state(root)
    args = ["clean", str(root), "--config", "cleanup.policy=compact"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "nokeys-0" in err and "key" in err
    assert state(root) == before
    TopicConfigStore(root).update("nokeys", {"cleanup.policy": "delete,compact"}, source="t")
    assert main(["clean", str(root), "--topic", "nokeys"]) == 2
    assert main(["clean", str(root), "--topic", "nokeys", "--config", "cleanup.policy=delete",
                 "--config", "retention.ms=1000"]) == 0  # fmt: skip


def test_compaction_not_available(
    root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(clean_cli, "load_compactor", lambda: None)
    TopicConfigStore(root).update("keep", {"cleanup.policy": "compact"}, source="test")
    assert main(["clean", str(root)]) == 1
    captured = capsys.readouterr()
    rows = summary_lines(captured.out)
    assert rows["keep-0"]["compaction"] == "not available"
    assert rows["events-0"]["segments"] == "4"  # retention still ran
    assert "compaction is not available" in captured.err and "keep-0" in captured.err


def test_compaction_runs_and_checkpoints_the_cleaner_offset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if clean_cli.load_compactor() is None:
        pytest.skip("kafkatier.storage.cleaner.compact is not written yet")
    root = tmp_path / "logs"
    write_topic(root, "users", 4, timestamp=4_000_000_000_000)  # the same three keys, 5 times
    args = ["clean", str(root), "--config", "cleanup.policy=compact",
            "--config", "min.cleanable.dirty.ratio=0.01"]  # fmt: skip
    assert main(args) == 0
    row = summary_lines(capsys.readouterr().out)["users-0"]
    assert row["compaction"] == "cleaned" and int(row["records"]) > 0
    offsets = OffsetCheckpointFile(root / "cleaner-offset-checkpoint").read()
    assert 0 < offsets[("users", 0)] <= 15
    assert no_errors(root)


@pytest.mark.parametrize("where", ["missing", "plain"])
def test_not_a_log_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str) -> None:
    target = tmp_path / "nothing"
    if where == "plain":
        target.mkdir()
        (target / "notes.txt").write_text("hello")
    assert main(["clean", str(target)]) == 2
    assert "not a Kafka log dir" in capsys.readouterr().err
    assert where == "missing" or [p.name for p in target.iterdir()] == ["notes.txt"]


def test_unknown_topic(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = state(root)
    assert main(["clean", str(root), "--topic", "nope"]) == 2
    assert "no partitions of topic 'nope'" in capsys.readouterr().err
    assert state(root) == before


def test_help_lists_clean(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "clean" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["clean", "--help"])
    assert "retention.bytes" in capsys.readouterr().out


def test_produce_and_clean_leave_a_cleanly_shut_down_log_dir(tmp_path: Path) -> None:
    """As a broker after a clean shutdown: the marker, indexes trimmed to their entries, and a
    log dir that opens with nothing to recover."""
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps({"key": f"k{i % 5}", "value": str(i)}) + "\n"
                              for i in range(300)))  # fmt: skip
    logs = tmp_path / "logs"
    steps = (["produce", str(logs), "--topic", "t", "--input", str(source), "--partitions", "2"],
             ["clean", str(logs)])  # fmt: skip
    for argv in steps:
        assert main(argv) == 0, argv
        for index in logs.rglob("*index"):
            entry = {".index": 8, ".timeindex": 12, ".txnindex": 34}[index.suffix]
            assert index.stat().st_size % entry == 0 and index.stat().st_size < 1024, index
        with LogDirectory(logs) as opened:
            assert opened.had_clean_shutdown, argv
        assert verify_paths([logs]) == []


CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "kafka-corpus"
BROKER = CORPUS / "ArthurArutunyan04__Backend_labs" / "kafka-data"  # a KRaft broker's log dir


@pytest.mark.skipif(not BROKER.is_dir(), reason=f"the Kafka-written corpus is not at {BROKER}")
def test_a_brokers_internal_topics_are_not_cleaned_as_user_topics(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A copy of a Kafka broker's log dir, no kafkatier settings in it: the KRaft metadata log
    is not a topic (Kafka's LogManager skips it) and stays byte for byte; ``__consumer_offsets``
    is compacted as Kafka created it (``cleanup.policy=compact``), not emptied by a user topic's
    7-day ``retention.ms``; the user topics' old data goes, as Kafka's retention would take it."""
    root = tmp_path / "broker"
    shutil.copytree(BROKER, root)
    metadata = {p.name: p.read_bytes() for p in (root / "__cluster_metadata-0").iterdir()}
    offsets_before = sum(p.stat().st_size for p in root.glob("__consumer_offsets-*/*.log"))
    assert main(["clean", str(root), "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    rows = [line for line in lines if "topic" in line]
    assert not [r for r in rows if r["topic"] == "__cluster_metadata"]
    offsets = [r for r in rows if r["topic"] == "__consumer_offsets"]
    assert len(offsets) == 50 and {r["cleanup_policy"] for r in offsets} == {"compact"}
    assert sum(r["segments_deleted"] for r in offsets) == 0
    offsets_after = sum(p.stat().st_size for p in root.glob("__consumer_offsets-*/*.log"))
    assert 0 < offsets_after <= offsets_before
    assert {p.name: p.read_bytes() for p in (root / "__cluster_metadata-0").iterdir()} == metadata
    users = [r for r in rows if not r["topic"].startswith("__")]
    assert users and {r["cleanup_policy"] for r in users} == {"delete"}


def test_a_stray_partition_directory_is_not_the_partition_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``t-01`` beside ``t-1`` (a copy, a typo: Kafka never names a partition so) was opened
    as ``t-1`` a second time: a retention pass deleted ``t-1``'s segments; a ``produce`` made
    a one-partition topic two. Now it is no partition of the topic at all."""
    root = tmp_path / "logs"
    write_topic(root, "t", 2, timestamp=4_000_000_000_000, partitions=2)  # nothing is due
    write_topic(root, "u", 0, timestamp=4_000_000_000_000)
    (root / "t-01").mkdir()
    (root / "u-01").mkdir()
    logs = lambda: {k: v for k, v in state(root / "t-1").items() if k.endswith(".log")}  # noqa: E731
    before = logs()
    for _ in range(2):  # the second open deletes what the first marked
        assert main(["clean", str(root)]) == 0
        rows = summary_lines(capsys.readouterr().out)
        assert set(rows) == {"t-0", "t-1", "u-0"} and rows["t-1"]["segments"] == "0"
    assert logs() == before
    data = tmp_path / "in.jsonl"
    data.write_text("".join(f"{{\"key\": \"k{i}\", \"value\": \"v\"}}\n" for i in range(50)))
    assert main(["produce", str(root), "--topic", "u", "--input", str(data)]) == 0
    assert not (root / "u-1").exists() and (root / "u-01").is_dir()
    assert no_errors(root)


def test_a_partition_that_cannot_be_cleaned_does_not_stop_the_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kafka's cleaner marks a partition whose data it cannot read uncleanable and goes on with
    the others; the pass stopped at the first one. It is left as it was, named with the file
    at fault, and the exit status says a partition was not cleaned."""
    root = tmp_path / "logs"
    write_topic(root, "users", 4, timestamp=4_000_000_000_000, partitions=3)
    segment = sorted((root / "users-1").glob("*.log"))[1]
    data = bytearray(segment.read_bytes())
    data[8:12] = (1 << 20).to_bytes(4, "big")  # the batch length: past the end of the file
    segment.write_bytes(bytes(data))
    before = {p.name: p.read_bytes() for p in (root / "users-1").glob("*.log")}
    args = ["clean", str(root), "--config", "cleanup.policy=compact",
            "--config", "min.cleanable.dirty.ratio=0.01"]  # fmt: skip
    assert main(args) == 1
    out, err = capsys.readouterr()
    rows = summary_lines(out)
    assert rows["users-0"]["compaction"] == rows["users-2"]["compaction"] == "cleaned"
    assert int(rows["users-2"]["records"]) > 0
    [line] = err.splitlines()
    assert "users-1" in line and segment.name in line, line
    assert {p.name: p.read_bytes() for p in (root / "users-1").glob("*.log")} == before
