"""``kafkatier dump``: kafka-dump-log.sh-style text, JSON Lines, exit codes 0/1/2, help."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kafkatier.cli.main import main
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record
from kafkatier.storage.wire import Codec

KAFKATIER = Path(sys.executable).with_name("kafkatier")
BATCH_LINE = re.compile(
    r"baseOffset: \d+ lastOffset: \d+ count: \d+ baseSequence: -?\d+ lastSequence: -?\d+ "
    r"producerId: -?\d+ producerEpoch: -?\d+ partitionLeaderEpoch: \d+ isTransactional: "
    r"(true|false) isControl: (true|false) deleteHorizonMs: OptionalLong.empty position: \d+ "
    r"CreateTime: \d+ size: \d+ magic: 2 compresscodec: (none|gzip|snappy|lz4|zstd) crc: \d+ "
    r"isvalid: true"
)
RECORD_LINE = re.compile(
    r"\| offset: \d+ CreateTime: \d+ keySize: -?\d+ valueSize: -?\d+ sequence: -?\d+ "
    r"headerKeys: \[[^\]]*\]( key: .* payload: .*)?"
)


@pytest.fixture(scope="module")
def partition(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A partition written by the real writer: idempotent and plain batches, two codecs."""
    root = tmp_path_factory.mktemp("cli") / "logs"
    with LogDirectory(root) as log_dir:
        log = log_dir.get_or_create("orders", 0)
        for i in range(4):
            records = [Record(j, 1_700_000_000_000 + j, b"k%d" % j, b"v" * 20, (("h", b"1"),))
                       for j in range(3)]  # fmt: skip
            codec = Codec.LZ4 if i % 2 else Codec.NONE
            batch = build_batch(records, codec=codec, producer_id=7, producer_epoch=0,
                                base_sequence=3 * i)  # fmt: skip
            log.append(batch)
    return root / "orders-0"


def run(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, list[str], str]:
    code = main(["dump", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def test_text_output_like_kafka_dump_log(
    partition: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = partition / "00000000000000000000.log"
    code, lines, _ = run(capsys, log, "--records")
    assert code == 0
    assert lines[:2] == [f"Dumping {log}", "Log starting offset: 0"]
    batches = [line for line in lines if line.startswith("baseOffset")]
    records = [line for line in lines if line.startswith("|")]
    assert len(batches) == 4 and all(BATCH_LINE.fullmatch(line) for line in batches)
    assert len(records) == 12 and all(RECORD_LINE.fullmatch(line) for line in records)
    assert records[0].endswith("keySize: 2 valueSize: 20 sequence: 0 headerKeys: [h]")


def test_print_data_log(partition: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, _ = run(capsys, partition / "00000000000000000000.log", "-d")
    assert code == 0
    assert lines[3].endswith(f"key: k0 payload: {'v' * 20}")


def test_json_lines(partition: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, _ = run(capsys, partition, "--json", "--records")
    assert code == 0
    items = [json.loads(line) for line in lines]
    batches = [i for i in items if i["type"] == "batch"]
    assert [b["codec"] for b in batches] == ["none", "lz4", "none", "lz4"]
    assert list(batches[0]) == [
        "type", "file", "position", "size", "baseOffset", "lastOffset", "count", "magic", "codec",
        "timestampType", "maxTimestamp", "producerId", "producerEpoch", "baseSequence",
        "isTransactional", "isControl", "crcValid",
    ]  # fmt: skip
    record = next(i for i in items if i["type"] == "record")
    b64 = base64.b64encode
    assert record == {
        "type": "record", "file": batches[0]["file"], "offset": 0, "timestamp": 1_700_000_000_000,
        "key": b64(b"k0").decode(), "value": b64(b"v" * 20).decode(),
        "headers": [["h", b64(b"1").decode()]],
    }  # fmt: skip


def test_index_and_state_files(partition: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, _ = run(capsys, partition)
    assert code == 0
    assert any(re.fullmatch(r"epoch: 0 startOffset: 0", line) for line in lines)
    assert any(line.startswith("producerId: 7 producerEpoch: 0") for line in lines)
    assert any(line.startswith("topicId: ") for line in lines)


def test_torn_tail_exits_1(partition: Path, tmp_path: Path,
                           capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes((partition / log.name).read_bytes()[:-10])
    code, lines, _ = run(capsys, log)
    assert code == 1
    assert re.fullmatch(r"problem at position \d+: incomplete batch at the end: .*", lines[-1])


def test_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, tmp_path / "missing.log")
    assert code == 2 and "no such file" in err
    (tmp_path / "notes.txt").write_text("x")
    code, _, err = run(capsys, tmp_path / "notes.txt")
    assert code == 2 and "not a Kafka" in err
    with pytest.raises(SystemExit) as exit_info:
        main(["dump"])
    assert exit_info.value.code == 2


def test_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["dump", "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert "exit codes" in text and "examples" in text and "--records" in text


def test_console_script(partition: Path) -> None:
    done = subprocess.run([str(KAFKATIER), "dump", "--json", str(partition)],
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert sum(json.loads(line)["type"] == "batch" for line in done.stdout.splitlines()) == 4
