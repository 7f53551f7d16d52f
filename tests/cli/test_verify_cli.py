"""``kafkatier verify``: problem lines and summary, JSON Lines, exit codes 0/1/2, help."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kafkatier.cli.main import main
from kafkatier.storage.log.directory import LogDirectory
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record

KAFKATIER = Path(sys.executable).with_name("kafkatier")
SUMMARY = re.compile(
    r"checked (\d+) partitions, (\d+) segments, (\d+) batches, (\d+) records \(\d+ files\): (.*)"
)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two partitions of three batches of two records, written by the real writer."""
    root = tmp_path_factory.mktemp("cli") / "logs"
    with LogDirectory(root) as log_dir:
        for partition in (0, 1):
            log = log_dir.get_or_create("orders", partition)
            for _ in range(3):
                log.append(build_batch([Record(0, 1_700_000_000_000, None, b"x"),
                                        Record(1, 1_700_000_000_001, b"k", b"y")]))  # fmt: skip
    return root


@pytest.fixture
def logs(pristine: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(pristine, tmp_path / "logs"))


def run(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, list[str], str]:
    code = main(["verify", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def test_clean_dir(logs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, _ = run(capsys, logs)
    assert code == 0
    [summary] = lines
    match = SUMMARY.fullmatch(summary)
    assert match is not None and match.groups() == ("2", "2", "6", "12", "no problems")


def test_problem_lines_name_file_and_position(
    logs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = logs / "orders-1" / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    second = len(data) // 3  # three batches of equal size
    data[second + 30] ^= 0x01
    log.write_bytes(data)
    (logs / "orders-0" / "00000000000000000000.timeindex").unlink()
    code, lines, _ = run(capsys, logs)
    assert code == 1
    assert lines[0] == (f"{logs}/orders-0/00000000000000000000.timeindex: time index missing "
                        "(Kafka rebuilds it by recovering the segment at startup)")  # fmt: skip
    assert lines[1].startswith(f"{log}:{second}: corrupt batch: stored CRC ")
    assert SUMMARY.fullmatch(lines[2]).group(5) == "2 errors, 0 warnings"  # type: ignore[union-attr]


def test_json_lines(logs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (logs / "orders-0" / "00000000000000000000.index").unlink()
    code, lines, _ = run(capsys, logs / "orders-0", "--json")
    assert code == 1
    problem, summary = map(json.loads, lines)
    assert problem == {
        "type": "problem", "file": str(logs / "orders-0" / "00000000000000000000.index"),
        "position": None, "offset": 0, "severity": "error",
        "message": "offset index missing (Kafka rebuilds it by recovering the segment at startup)",
    }  # fmt: skip
    del summary["files"]
    assert summary == {"type": "summary", "partitions": 1, "segments": 1, "batches": 3,
                       "records": 6, "errors": 1, "warnings": 0}  # fmt: skip


def test_warnings_alone_exit_0(logs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = logs / "orders-0" / "00000000000000000000.log"
    shutil.copy(log, log.with_name(log.name + ".swap"))
    code, lines, _ = run(capsys, logs)
    assert code == 0 and ": warning: left over" in lines[0]


def test_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, tmp_path / "nope")
    assert code == 2 and "no such file or directory" in err
    code, _, err = run(capsys, tmp_path)
    assert code == 2 and "neither a Kafka log dir nor a partition dir" in err
    with pytest.raises(SystemExit) as exit_info:
        main(["verify"])
    assert exit_info.value.code == 2


def test_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["verify", "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for words in ("what is checked", "exit codes", "examples", ".txnindex", "--json"):
        assert words in text
    with pytest.raises(SystemExit):
        main(["--help"])
    listed = capsys.readouterr().out
    assert "verify" in listed and "dump" in listed


def test_console_script(logs: Path) -> None:
    (logs / "meta.properties").unlink()
    done = subprocess.run([str(KAFKATIER), "verify", str(logs)],
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines()[0].startswith(f"{logs}/meta.properties: missing")


def test_a_meta_properties_a_broker_refuses_is_an_error_and_no_writer_uses_it(
    logs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Garbage (or a file without ``version``) in ``meta.properties``: Kafka's broker refuses
    to start on it, so ``verify`` reports it (it read as version 0: "no problems") and
    ``produce`` refuses the log dir before writing anything."""
    (logs / "meta.properties").write_bytes(b"\x00\x9f\x07 garbage\n")
    code, lines, _ = run(capsys, logs)
    assert code == 1 and any("meta.properties: missing version" in line for line in lines)
    data = logs.parent / "in.jsonl"
    data.write_text('{"value": "v"}\n')
    assert main(["produce", str(logs), "--topic", "orders", "--input", str(data)]) == 1
    assert "missing version" in capsys.readouterr().err
