"""The commands that write, on a real full filesystem (a small tmpfs, ``small_fs``): each
fails with one line naming the file and ENOSPC, leaves nothing half-written where a reader or a
broker looks, and does its work once space returns (the tmpfs grown with ``mount -o remount``,
or the filler removed)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from kafka.record import MemoryRecords
from small_fs import fill, free_bytes, small_fs
from tier_fixtures import write_tiered

from kafkatier.cli.main import main
from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.sidecar.tierer import Tierer
from kafkatier.tiering.store.weed import WeedServer


def grow(fs: Path, size_kib: int) -> None:
    subprocess.run(["mount", "-o", f"remount,size={size_kib}k", str(fs)], check=True)


def one_error(capsys: pytest.CaptureFixture[str], command: str) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"kafkatier {command}: error: "), err
    assert "Traceback" not in err[0]
    return err[0]


def logs_digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*.log"))
    }


def latest_values(root: Path) -> dict[bytes, bytes]:
    """Each key's latest value in the topic's live segments, by kafka-python's parser:
    what compaction must keep whether a pass finished or stopped between groups."""
    out: dict[bytes, bytes] = {}
    for path in sorted(root.rglob("*.log")):
        records = MemoryRecords(path.read_bytes())
        while records.has_next():
            for record in records.next_batch():
                out[record.key] = record.value
    return out


def records_file(path: Path, n: int, dup_every: int = 0) -> Path:
    with path.open("w") as out:
        for i in range(n):
            key = f"k{i % dup_every}" if dup_every else f"k{i}"
            out.write(json.dumps({"key": key, "value": f"{i:08d}" + "x" * 300}) + "\n")
    return path


def test_produce_into_a_full_disk_then_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = records_file(tmp_path / "in.jsonl", 12_000)
    with small_fs(tmp_path / "fs", 2048) as fs:
        logs = fs / "logs"
        argv = ["produce", str(logs), "--topic", "t", "--input", str(data), "--partitions", "2",
                "--config", "segment.bytes=262144"]  # fmt: skip
        assert main(argv) == 1
        line = one_error(capsys, "produce")
        assert "No space left on device" in line and str(logs) in line, line
        assert "records of the input were appended before it" in line, line
        assert main(["verify", str(logs)]) == 0  # whole batches only, offsets in order
        capsys.readouterr()
        grow(fs, 16384)
        assert main([*argv[:6], "--config", "segment.bytes=262144"]) == 0  # same partitions
        assert main(["verify", str(logs)]) == 0


def test_clean_on_a_full_disk_leaves_the_log_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = records_file(tmp_path / "in.jsonl", 6_000, dup_every=5_000)
    with small_fs(tmp_path / "fs", 8192) as fs:
        logs = fs / "logs"
        assert main(["produce", str(logs), "--topic", "c", "--input", str(data),
                     "--config", "cleanup.policy=compact", "--config", "segment.bytes=65536",
                     "--config", "min.cleanable.dirty.ratio=0.01"]) == 0  # fmt: skip
        before, latest = logs_digest(logs), latest_values(logs)
        filler = fill(fs, leave=48 << 10)  # room for the small files, not the cleaned segments
        capsys.readouterr()
        assert main(["clean", str(logs)]) == 1
        line = one_error(capsys, "clean")
        assert "No space left on device" in line and str(logs / "c-0") in line, line
        assert not [p for p in logs.rglob("*") if p.suffix in (".cleaned", ".swap")]
        assert latest_values(logs) == latest  # groups before the failure swapped in, none half
        assert main(["verify", str(logs)]) == 0
        filler.unlink()
        capsys.readouterr()
        assert main(["clean", str(logs)]) == 0
        assert "records removed" in capsys.readouterr().out
        assert logs_digest(logs) != before and latest_values(logs) == latest
        assert main(["verify", str(logs)]) == 0


def test_clean_frees_a_full_disk_by_retention(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A user whose disk is full runs ``clean`` to apply retention: its turn on the log dir
    cannot make a new generation file then, so it overwrites the old token in place (it
    failed on the temporary file before it deleted anything). The summary says the deleted
    segments stay as ``.deleted`` for readers; with ``file.delete.delay.ms=0`` the space comes
    back in the same run."""
    data = records_file(tmp_path / "in.jsonl", 6_000)
    with small_fs(tmp_path / "fs", 4096) as fs:
        logs = fs / "logs"
        argv = ["produce", str(logs), "--topic", "t", "--input", str(data),
                "--config", "segment.bytes=262144"]  # fmt: skip
        assert main(argv) == 0
        fill(fs)
        assert free_bytes(fs) < 4096
        capsys.readouterr()
        assert main(["clean", str(logs), "--config", "retention.bytes=600000"]) == 0
        out = capsys.readouterr().out
        assert "segments deleted" in out and "file.delete.delay.ms=0 frees" in out, out
        assert list(logs.glob("t-0/*.log.deleted")) and free_bytes(fs) < 4096
        assert main(["clean", str(logs), "--config", "file.delete.delay.ms=0"]) == 0
        assert free_bytes(fs) > 1 << 20
        assert not list(logs.glob("t-0/*.deleted"))
        capsys.readouterr()
        assert main(["verify", str(logs)]) == 0


def test_restore_into_a_full_disk_shows_nothing_half_restored(
    tmp_path: Path, s3_store, s3_env: WeedServer, capsys: pytest.CaptureFixture[str]  # type: ignore[no-untyped-def]
) -> None:
    source = write_tiered(tmp_path / "logs", steps=120)
    conf = tmp_path / "sidecar.properties"
    conf.write_text(f"log.dirs={source}\nremote.storage.url={s3_store.url}\n"
                    f"remote.storage.s3.endpoint.url={s3_env.endpoint}\n"
                    "remote.storage.s3.region=us-east-1\n")  # fmt: skip
    assert Tierer(TieringConfig.load(conf)).run_once().failures == 0
    with small_fs(tmp_path / "fs", 1024) as fs:
        target = fs / "logs"
        filler = fill(fs, leave=24 << 10)
        argv = ["restore", "--config", str(conf), "--topic", "tiered", "--to", str(target),
                "--quiet"]  # fmt: skip
        capsys.readouterr()
        assert main(argv) == 1
        line = one_error(capsys, "restore")
        assert "No space left on device" in line, line
        assert not (target / "tiered-0").exists()  # nothing half-restored where readers look
        assert not list((target / ".kafkatier-restore").glob("objects/*/*"))  # no partial object
        filler.unlink()
        assert main(argv) == 0
        assert main(["verify", str(target)]) == 0
        assert (target / "tiered-0").is_dir() and not (target / ".kafkatier-restore").exists()


def test_produce_whose_close_fails_says_every_record_is_in_and_leaves_no_sigbus(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A record that fits in its segment's last page on a full disk is appended, then closing
    the log dir fails on the time index's last entry. The error had no note (a user retried and
    got the record twice), and the indexes stayed at their sparse preallocated length, whose
    reading on the still-full tmpfs killed the next command with SIGBUS."""
    (tmp_path / "a.jsonl").write_text('{"value": "first"}\n')
    (tmp_path / "b.jsonl").write_text('{"value": "second"}\n')
    with small_fs(tmp_path / "fs", 1024) as fs:
        logs = fs / "logs"
        produce = ["produce", str(logs), "--topic", "t", "--input"]
        assert main([*produce, str(tmp_path / "a.jsonl")]) == 0
        capsys.readouterr()
        fill(fs)
        assert main([*produce, str(tmp_path / "b.jsonl")]) == 1
        line = one_error(capsys, "produce")
        assert "every record of the input (1) was appended (t-0 offsets 1..1)" in line, line
        indexes = [p.stat().st_size for p in (logs / "t-0").glob("*index")]
        assert indexes and max(indexes) < 4096, indexes  # trimmed, not 10 MiB of holes
        clean = subprocess.run(  # its own process: a SIGBUS must not take the test run down
            [sys.executable, "-c", "import sys; from kafkatier.cli.main import main; "
             f"sys.exit(main(['clean', {str(logs)!r}]))"],
            capture_output=True, text=True, check=False)  # fmt: skip
        assert clean.returncode in (0, 1), clean
        assert len(clean.stderr.strip().splitlines()) <= 1, clean.stderr


def test_a_new_log_dir_on_a_full_disk_names_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The first write of a new log dir (the writer's lock) failed as a bare 'No space left on
    device' naming no file."""
    (tmp_path / "a.jsonl").write_text('{"value": "first"}\n')
    with small_fs(tmp_path / "fs", 1024) as fs:
        fill(fs)
        logs = fs / "logs"
        argv = ["produce", str(logs), "--topic", "t", "--input", str(tmp_path / "a.jsonl")]
        assert main(argv) == 1
        line = one_error(capsys, "produce")
        assert "No space left on device" in line and f"{logs}/" in line, line
