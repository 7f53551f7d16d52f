"""Every command walked through each kind of bad path and bad value a user may give it: a path
that does not exist, a file where a folder belongs, a folder where a file belongs, a file of
garbage, a setting with a bad value. Each answers with exactly one line on stderr, starting with
the command's name, exits non-zero, and prints no traceback."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kafkatier.cli.main import main


def parquet_bytes(tmp_path: Path) -> bytes:
    path = tmp_path / "made.parquet"
    pq.write_table(pa.table({"key": [b"k"] * 50, "value": [b"v,w\x00"] * 50}), path)
    return path.read_bytes()


@pytest.fixture
def places(tmp_path: Path) -> dict[str, Path]:
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(b"\x00\xffnot what you think\n" * 10)
    folder = tmp_path / "a-folder"
    folder.mkdir()
    parquet = tmp_path / "in.parquet"
    pq.write_table(pa.table({"key": [b"k"], "value": [b"v"]}), parquet)
    (tmp_path / "bad.jsonl").write_text('{"value": "a"}\n{"value": \n')
    (tmp_path / "parquet.csv").write_bytes(parquet_bytes(tmp_path))
    (tmp_path / "cut.parquet").write_bytes(parquet_bytes(tmp_path)[:40])
    (tmp_path / "partition.jsonl").write_text('{"value": "a", "partition": 5}\n')
    bad_conf = tmp_path / "bad.properties"
    bad_conf.write_text("log.dirs=/tmp\nremote.storage.url=s3://b/p\nremote.log.metrics.port=x\n")
    remote = f"remote.storage.url=file://{tmp_path}/remote\n"
    (tmp_path / "file-dir.properties").write_text(f"log.dirs={folder},{garbage}\n{remote}")
    (tmp_path / "twice.properties").write_text(f"log.dirs={folder},{folder}/.\n{remote}")
    (tmp_path / "scheme.properties").write_text(f"log.dirs={folder}\nremote.storage.url=bogus://x\n")
    return {"missing": tmp_path / "no" / "such", "garbage": garbage, "folder": folder,
            "parquet": parquet, "bad_conf": bad_conf, "tmp": tmp_path}  # fmt: skip


def _cases(p: dict[str, Path]) -> dict[str, list[str]]:
    missing, garbage, folder = str(p["missing"]), str(p["garbage"]), str(p["folder"])
    logs = str(p["tmp"] / "logs")
    return {
        "produce: missing input": ["produce", logs, "--topic", "t", "--input", missing],
        "produce: folder as input": ["produce", logs, "--topic", "t", "--input", folder],
        "produce: garbage input": ["produce", logs, "--topic", "t", "--input", garbage],
        "produce: file as log dir": ["produce", garbage, "--topic", "t", "--input",
                                     str(p["parquet"])],
        "produce: bad topic name": ["produce", logs, "--topic", "a/b", "--input",
                                    str(p["parquet"])],
        "produce: an internal topic": ["produce", logs, "--topic", "__consumer_offsets",
                                       "--input", str(p["parquet"])],
        "produce: bad setting": ["produce", logs, "--topic", "t", "--input", str(p["parquet"]),
                                 "--config", "segment.bytes=lots"],
        "produce: malformed JSON Lines": ["produce", logs, "--topic", "t", "--input",
                                          str(p["tmp"] / "bad.jsonl")],
        "produce: Parquet named .csv": ["produce", logs, "--topic", "t", "--input",
                                        str(p["tmp"] / "parquet.csv")],
        "produce: Parquet cut short": ["produce", logs, "--topic", "t", "--input",
                                       str(p["tmp"] / "cut.parquet")],
        "produce: partition out of range": ["produce", logs, "--topic", "t", "--input",
                                            str(p["tmp"] / "partition.jsonl"),
                                            "--partitions", "2"],
        "produce: zero partitions": ["produce", logs, "--topic", "t", "--input",
                                     str(p["parquet"]), "--partitions", "0"],
        "dump: missing path": ["dump", missing],
        "dump: garbage file": ["dump", garbage],
        "verify: missing path": ["verify", missing],
        "clean: missing log dir": ["clean", missing],
        "clean: file as log dir": ["clean", garbage],
        "clean: bad setting": ["clean", folder, "--config", "retention.ms=soon"],
        "run: missing config": ["run", "--config", missing],
        "run: garbage config": ["run", "--config", garbage],
        "sidecar: missing config": ["sidecar", "--config", missing, "--once"],
        "sidecar: folder as config": ["sidecar", "--config", folder, "--once"],
        "sidecar: bad value": ["sidecar", "--config", str(p["bad_conf"]), "--once"],
        "status: garbage config": ["status", "--config", garbage],
        "restore: missing config": ["restore", "--config", missing, "--topic", "t", "--to",
                                    folder],
        "restore: bad value": ["restore", "--config", str(p["bad_conf"]), "--topic", "t",
                               "--to", folder],
        "clean --remote: missing config": ["clean", "--remote", "--config", missing],
        "status: a file in log.dirs": ["status", "--config",
                                       str(p["tmp"] / "file-dir.properties")],
        "status: a log dir twice": ["status", "--config", str(p["tmp"] / "twice.properties")],
        "sidecar: a log dir twice": ["sidecar", "--config", str(p["tmp"] / "twice.properties"),
                                     "--once"],
        "serve: a log dir twice": ["serve", "--config", str(p["tmp"] / "twice.properties")],
        "status: a URL no store takes": ["status", "--config",
                                         str(p["tmp"] / "scheme.properties")],
        "restore: a URL no store takes": ["restore", "--config",
                                          str(p["tmp"] / "scheme.properties"), "--topic", "t",
                                          "--to", folder],
    }  # fmt: skip


NAMES = {
    "produce: file as log dir": "garbage.bin is not a directory",
    "produce: an internal topic": "cannot append to internal topic __consumer_offsets",
    "clean --remote: missing config": "no/such",
    "status: a file in log.dirs": "garbage.bin is not a directory",
    "status: a log dir twice": "duplicate log directory",
    "sidecar: a log dir twice": "duplicate log directory",
    "serve: a log dir twice": "duplicate log directory",
    "status: a URL no store takes": "setting=remote.storage.url",
    "restore: a URL no store takes": "setting=remote.storage.url",
}
"""What the line must name, where a line that names something else was the fault."""


CASES = sorted(_cases({k: Path("/x") for k in
                       ("missing", "garbage", "folder", "parquet", "bad_conf", "tmp")}))


@pytest.mark.parametrize("case", CASES)
def test_bad_input_gets_one_clear_line(
    case: str, places: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = _cases(places)[case]
    capsys.readouterr()
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0, (case, err)
    assert len(err) == 1, (case, err)
    assert err[0].startswith(f"kafkatier {argv[0]}"), (case, err)
    assert "Traceback" not in err[0] and "unexpected" not in err[0], (case, err)
    assert NAMES.get(case, "") in err[0], (case, err)
