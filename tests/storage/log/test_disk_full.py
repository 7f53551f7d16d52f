"""A full disk (ENOSPC) at each write of the log engine: the operation fails with one error
naming the file, nothing half-written is left, the log reopens and verifies, and appends resume
once space returns. On a real size-limited filesystem (``small_fs``: a tmpfs) and with injected
errors for the points a real disk cannot be made to hit on cue (a short write, the index)."""

from __future__ import annotations

import errno
import itertools
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from crash_writer import check_partition
from kafka.record import MemoryRecords
from small_fs import fill, small_fs

from kafkatier.storage.config.log_config import LogConfig
from kafkatier.storage.errors import LogWriteError
from kafkatier.storage.log.loader import open_log
from kafkatier.storage.log.log import Log
from kafkatier.storage.record.builder import build_batch
from kafkatier.storage.record.record import Record


def batch(n: int = 2, size: int = 30) -> bytes:
    return build_batch([Record(i, 1_700_000_000_000, b"k%d" % i, b"v" * size) for i in range(n)])


def new_log(root: Path, **settings: str) -> Log:
    config = LogConfig.from_properties({"segment.index.bytes": "4096", **settings}, source="test")
    return open_log(root / "t-0", config)


def reopen(log: Log, clean: bool = True) -> Log:
    if clean:
        log.close()
    else:
        for segment in log.segments:
            segment.close_handlers()
    return open_log(log.directory, log.config, clean_shutdown=clean)


def whole_batches(log: Log) -> list[tuple[int, int]]:
    """(base, last) offset of every batch in the partition's .log files, by kafka-python's
    parser (outside eyes); asserts no file ends in a partial batch."""
    out = []
    for path in sorted(log.directory.glob("*.log")):
        data = path.read_bytes()
        records = MemoryRecords(data)
        used = 0
        while records.has_next():
            b = records.next_batch()
            out.append((b.base_offset, b.base_offset + b.last_offset_delta))
            used += 12 + int.from_bytes(data[used + 8 : used + 12], "big")
        assert used == len(data), f"{path} ends in a partial batch"
    return out


def append_until_full(log: Log, size: int) -> LogWriteError:
    for _ in range(10_000):
        try:
            log.append(batch(n=4, size=size))
        except LogWriteError as exc:
            return exc
    raise AssertionError("the disk never filled")


def test_append_on_a_full_disk_fails_whole_and_resumes(tmp_path: Path) -> None:
    with small_fs(tmp_path / "fs", 1024) as fs:
        log = new_log(fs, **{"segment.bytes": "262144"})
        for _ in range(20):
            log.append(batch(n=4, size=3000))
        filler = fill(fs)
        end = log.log_end_offset
        error = append_until_full(log, 3000)
        assert "ENOSPC" in str(error) and str(log.active_segment.log_path) in str(error)
        assert log.log_end_offset == end
        assert log.active_segment.log_path.stat().st_size == log.active_segment.size
        assert whole_batches(log)[-1][1] == end - 1
        filler.unlink()  # space returns
        log.append(batch(n=4, size=3000))
        assert log.log_end_offset == end + 4
        log = reopen(log, clean=False)
        check_partition(log)
        assert whole_batches(log)[-1][1] == end + 3
        log.close()


def test_rolls_into_a_full_disk_until_space_returns(tmp_path: Path) -> None:
    """Many small segments: the disk fills at a roll (new files, the producer snapshot) or at
    an append, whichever comes first; every failure is a one-line error naming a file."""
    with small_fs(tmp_path / "fs", 1024) as fs:
        log = new_log(fs, **{"segment.bytes": "16384"})
        filler = fill(fs, leave=200 << 10)
        failures = []
        for _ in range(400):
            try:
                log.append(batch(n=4, size=1500))
            except (LogWriteError, OSError) as exc:
                failures.append(exc)
                if len(failures) == 3:
                    break
        assert failures, "the disk never filled"
        for exc in failures:
            assert str(fs) in str(exc), exc
        end = log.log_end_offset
        filler.unlink()
        for _ in range(20):
            log.append(batch(n=4, size=1500))
        assert log.log_end_offset == end + 80
        log = reopen(log, clean=True)
        check_partition(log)
        offsets = whole_batches(log)
        assert all(b == a + 1 for (_, a), (b, _) in itertools.pairwise(offsets))
        log.close()


APPEND = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from kafkatier.storage.config.log_config import LogConfig
    from kafkatier.storage.errors import KafkaTierError
    from kafkatier.storage.log.loader import open_log
    from kafkatier.storage.record.builder import build_batch
    from kafkatier.storage.record.record import Record
    props = {"segment.index.bytes": "1048576", "index.interval.bytes": "1"}
    config = LogConfig.from_properties(props, source="test")
    try:
        log = open_log(Path(sys.argv[1]), config, clean_shutdown=sys.argv[2] == "clean")
        for i in range(int(sys.argv[3])):
            log.append(build_batch([Record(0, 1_700_000_000_000, b"k", b"v")]))
    except (KafkaTierError, OSError) as exc:
        print(exc)
        sys.exit(3)
    print(log.log_end_offset)
    """
)


def run_append(directory: Path, shutdown: str, batches: int) -> subprocess.CompletedProcess[str]:
    """Open the log in a child process (a SIGBUS kills only it) and append tiny batches."""
    return subprocess.run(
        [sys.executable, "-c", APPEND, str(directory), shutdown, str(batches)],
        capture_output=True,
        text=True,
        check=False,
    )


def test_index_entries_on_a_full_disk_are_an_error_not_a_sigbus(tmp_path: Path) -> None:
    """Tiny batches still fit the .log's last page of a full disk, but their index entries go
    through a map of a sparse file: a write into a hole the filesystem cannot fill is a SIGBUS
    that killed the process. Now the append fails with one line; with space back it works."""
    with small_fs(tmp_path / "fs", 1024) as fs:
        log = new_log(fs, **{"segment.index.bytes": "1048576"})
        log.append(batch())
        log.close()
        filler = fill(fs)
        run = run_append(log.directory, "clean", 20)
        assert run.returncode != -signal.SIGBUS, "killed by SIGBUS"
        assert run.returncode == 3, run.stdout + run.stderr
        assert "cannot allocate index space" in run.stdout and "ENOSPC" in run.stdout
        filler.unlink()
        run = run_append(log.directory, "unclean", 20)
        assert run.returncode == 0, run.stdout + run.stderr
        check_partition(reopen(open_log(log.directory, log.config)))


def test_reopen_on_a_full_disk_is_one_error_then_works_with_space(tmp_path: Path) -> None:
    """An unclean shutdown makes the next open recover: rebuild indexes, write a snapshot. On
    a full disk that fails with an error naming the file; with space back it works."""
    with small_fs(tmp_path / "fs", 1024) as fs:
        log = new_log(fs, **{"segment.index.bytes": "1048576", "segment.bytes": "300000"})
        for _ in range(60):
            log.append(batch(n=4, size=2000))
        end = log.log_end_offset
        for segment in log.segments:
            segment.close_handlers()
        for index in log.directory.glob("*.index"):
            index.unlink()  # rebuilt at the next open (no clean-shutdown marker)
        filler = fill(fs)
        run = run_append(log.directory, "unclean", 0)
        assert run.returncode != -signal.SIGBUS, "killed by SIGBUS"
        assert run.returncode in (0, 3), run.stderr
        if run.returncode == 3:
            assert "No space left on device" in run.stdout and str(log.directory) in run.stdout
        filler.unlink()
        run = run_append(log.directory, "unclean", 0)
        assert run.returncode == 0, run.stdout + run.stderr
        assert int(run.stdout) == end


def test_a_short_write_is_cut_back_and_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The filesystem takes part of the write, then has no room: the part is cut off again."""
    log = new_log(tmp_path)
    log.append(batch())
    before = log.active_segment.size
    real = os.pwritev
    calls = []

    def half_then_full(fd: int, buffers: list[memoryview], offset: int) -> int:
        calls.append(offset)
        if len(calls) == 1:
            return real(fd, [memoryview(b"".join(buffers))[:17]], offset)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "pwritev", half_then_full)
    with pytest.raises(LogWriteError, match=r"No space left on device \(ENOSPC\)") as caught:
        log.append(batch(n=3))
    assert caught.value.position == before and calls == [before, before + 17]
    monkeypatch.setattr(os, "pwritev", real)
    assert log.active_segment.log_path.stat().st_size == before
    log.append(batch(n=3))
    check_partition(reopen(log))


def test_no_space_for_an_index_entry_fails_before_the_log_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = new_log(tmp_path, **{"index.interval.bytes": "100"})
    log.append(batch(size=200))
    log.append(batch(size=200))  # one offset-index entry: its first block allocated
    segment = log.active_segment
    files = {p.name: p.read_bytes() for p in log.directory.iterdir()}
    entries = segment.offset_index.entries
    monkeypatch.setattr(segment.offset_index, "_backed", 0)  # as if its block were a hole

    def no_space(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "posix_fallocate", no_space)
    with pytest.raises(LogWriteError, match="cannot allocate index space") as caught:
        log.append(batch(size=200))
    assert caught.value.file == str(segment.offset_index.path)
    assert segment.offset_index.entries == entries
    assert {p.name: p.read_bytes() for p in log.directory.iterdir()} == files
    monkeypatch.undo()
    log.append(batch(size=200))
    check_partition(reopen(log))
