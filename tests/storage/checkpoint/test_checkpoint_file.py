import pickle
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkatier.storage.checkpoint.checkpoint_file import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CheckpointFile,
    OffsetCheckpointFile,
    is_valid_topic_name,
    read_offsets_cached,
)
from kafkatier.storage.errors import CheckpointError

CORPUS = Path(__file__).resolve().parents[3].parent / "shared" / "kafka-corpus"
ROOT_FILES = (
    RECOVERY_POINT_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    CLEANER_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
)
TOPICS = st.text("abcXYZ019._-", min_size=1, max_size=30).filter(is_valid_topic_name)


def _checkpoint(tmp_path: Path, text: str) -> OffsetCheckpointFile:
    path = tmp_path / RECOVERY_POINT_CHECKPOINT
    path.write_bytes(text.encode())
    return OffsetCheckpointFile(path)


def test_root_file_names():
    assert ROOT_FILES == (
        "recovery-point-offset-checkpoint",
        "log-start-offset-checkpoint",
        "cleaner-offset-checkpoint",
        "replication-offset-checkpoint",
    )


def test_write_exact_kafka_text(tmp_path):
    cp = OffsetCheckpointFile(tmp_path / REPLICATION_OFFSET_CHECKPOINT)
    cp.write({("mytopic", 0): 1234, ("mytopic", 1): 99})
    assert cp.path.read_bytes() == b"0\n2\nmytopic 0 1234\nmytopic 1 99\n"
    assert cp.read() == {("mytopic", 0): 1234, ("mytopic", 1): 99}
    cp.write({})
    assert cp.path.read_bytes() == b"0\n0\n"
    assert cp.read() == {}


@pytest.mark.parametrize("text", ["", "0\n", "0", "0\n0\n", "0\r\n0\r\n"])
def test_empty_forms_read_as_no_entries(tmp_path, text):
    assert _checkpoint(tmp_path, text).read() == {}


def test_missing_file_reads_empty(tmp_path):
    assert OffsetCheckpointFile(tmp_path / "absent").read() == {}


def test_lenient_whitespace_and_line_endings(tmp_path):
    cp = _checkpoint(tmp_path, "0\r\n2\r\na.b_c-d 3\t\t42  \r\n__consumer_offsets  49 7")
    assert cp.read() == {("a.b_c-d", 3): 42, ("__consumer_offsets", 49): 7}


def test_duplicate_partition_keeps_last(tmp_path):
    assert _checkpoint(tmp_path, "0\n2\nt 0 1\nt 0 5\n").read() == {("t", 0): 5}


def test_version_mismatch_names_file_and_line(tmp_path):
    cp = _checkpoint(tmp_path, "1\n1\nt 0 5\n")
    with pytest.raises(CheckpointError, match="version 1") as info:
        cp.read()
    assert info.value.file == str(cp.path)
    assert info.value.line == 1


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("x\n1\nt 0 5\n", 1),
        ("0\ntwo\nt 0 5\n", 2),
        ("0\n-1\n", 2),
        ("0\n2\nt 0 5\nt 1\n", 4),
        ("0\n1\nt 0 5 6\n", 3),
        ("0\n1\n t 0 5\n", 3),  # Java's split keeps a leading empty field
        ("0\n1\nt zero 5\n", 3),
        ("0\n1\nt 0 5x\n", 3),
        ("0\n1\nt 2147483648 5\n", 3),
        ("0\n1\nt 0 9223372036854775808\n", 3),
        ("0\n2\nt 0 5\n\n", 4),
    ],
)
def test_malformed_lines_name_file_and_line(tmp_path, text, line):
    cp = _checkpoint(tmp_path, text)
    with pytest.raises(CheckpointError, match="malformed") as info:
        cp.read()
    assert info.value.file == str(cp.path)
    assert info.value.line == line
    assert str(cp.path) in str(info.value)


@pytest.mark.parametrize("text", ["0\n3\nt 0 5\nt 1 6\n", "0\n1\nt 0 5\nt 1 6\n"])
def test_count_mismatch(tmp_path, text):
    with pytest.raises(CheckpointError, match="expected") as info:
        _checkpoint(tmp_path, text).read()
    assert info.value.file.endswith(RECOVERY_POINT_CHECKPOINT)
    assert info.value.line == 2  # the count line


def test_error_survives_pickling(tmp_path):
    with pytest.raises(CheckpointError) as info:
        _checkpoint(tmp_path, "0\n1\nbad\n").read()
    clone = pickle.loads(pickle.dumps(info.value))
    assert (clone.file, clone.line, str(clone)) == (info.value.file, 3, str(info.value))


@pytest.mark.parametrize(
    "offsets",
    [
        {("has space", 0): 1},
        {("", 0): 1},
        {("ok", -1): 1},
        {("ok", 0): 2**63},
        {("x" * 250, 0): 1},
    ],
)
def test_write_rejects_what_kafka_could_not_read_back(tmp_path, offsets):
    cp = _checkpoint(tmp_path, "0\n1\nkept 0 1\n")
    with pytest.raises(CheckpointError):
        cp.write(offsets)
    assert cp.path.read_bytes() == b"0\n1\nkept 0 1\n"
    assert [p.name for p in tmp_path.iterdir()] == [RECOVERY_POINT_CHECKPOINT]


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(
        st.tuples(TOPICS, st.integers(0, 2**31 - 1)), st.integers(-(2**63), 2**63 - 1), max_size=20
    )
)
def test_round_trip(tmp_path_factory, offsets):
    cp = OffsetCheckpointFile(tmp_path_factory.mktemp("cp") / LOG_START_OFFSET_CHECKPOINT)
    cp.write(offsets)
    assert cp.read() == offsets
    lines = cp.path.read_text().split("\n")
    assert lines[:2] == ["0", str(len(offsets))] and lines[-1] == ""


def test_generic_checkpoint_file(tmp_path):
    cp: CheckpointFile[str] = CheckpointFile(
        tmp_path / "c", 3, lambda s: s.upper(), lambda line: line.lower() or None
    )
    cp.write(["a", "b"])
    assert (tmp_path / "c").read_text() == "3\n2\nA\nB\n"
    assert cp.read() == ["a", "b"]


def test_topic_name_rules():
    assert is_valid_topic_name("__consumer_offsets")
    assert is_valid_topic_name("a" * 249)
    assert not is_valid_topic_name("a" * 250)
    assert not is_valid_topic_name(".")
    assert not is_valid_topic_name("..")
    assert not is_valid_topic_name("tab\there")
    assert not is_valid_topic_name("ünïcode")


def _corpus_files() -> list[Path]:
    if not CORPUS.is_dir():
        return []
    return sorted(p for name in ROOT_FILES for p in CORPUS.rglob(name))


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"Kafka corpus not found at {CORPUS}")
def test_reads_every_corpus_offset_checkpoint():
    files = _corpus_files()
    assert len(files) >= 20
    for path in files:
        offsets = OffsetCheckpointFile(path).read()
        lines = path.read_text().splitlines()
        declared = int(lines[1]) if len(lines) > 1 else 0
        assert len(offsets) == declared, path
        for (topic, partition), offset in offsets.items():
            assert is_valid_topic_name(topic) and partition >= 0 and offset >= 0, path


def test_cached_offsets_follow_every_rewrite(tmp_path: Path) -> None:
    """The cache serves a parse only while the file is the one parsed: each writer's replace
    (a new inode, whatever its size or mtime) is read afresh."""
    path = tmp_path / "log-start-offset-checkpoint"
    file = OffsetCheckpointFile(path)
    for step in range(5):
        file.write({("t", p): step * 10 + p for p in range(3)}, sync=False)
        assert read_offsets_cached(path) == {("t", p): step * 10 + p for p in range(3)}
        assert read_offsets_cached(path) is read_offsets_cached(path)  # not parsed again
    path.unlink()
    with pytest.raises(FileNotFoundError):
        read_offsets_cached(path)
