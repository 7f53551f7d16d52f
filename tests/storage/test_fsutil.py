import errno
import os
from pathlib import Path

import pytest

from kafkatier.storage.fsutil import (
    atomic_write,
    delete_if_exists,
    file_version,
    fsync_dir,
    fsync_file,
    syncfs,
    syncfs_trusted,
    temp_path,
)


def test_temp_name_is_kafkas(tmp_path):
    target = tmp_path / "replication-offset-checkpoint"
    assert temp_path(target) == tmp_path / "replication-offset-checkpoint.tmp"


@pytest.mark.parametrize("sync", [True, False])
def test_atomic_write_creates_and_replaces(tmp_path, sync):
    target = tmp_path / "partition.metadata"
    atomic_write(target, b"first", sync=sync)
    assert target.read_bytes() == b"first"
    atomic_write(target, b"second, longer content", sync=sync)
    assert target.read_bytes() == b"second, longer content"
    atomic_write(target, b"", sync=sync)
    assert target.read_bytes() == b""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["partition.metadata"]


def test_stale_temp_file_from_a_crash_is_overwritten(tmp_path):
    target = tmp_path / "leader-epoch-checkpoint"
    target.write_bytes(b"old")
    temp_path(target).write_bytes(b"half-written garbage from a crash, longer than new")
    atomic_write(target, b"new")
    assert target.read_bytes() == b"new"
    assert not temp_path(target).exists()


def test_failed_rename_leaves_target_and_removes_temp(tmp_path):
    # A non-empty directory cannot be replaced by a file: the rename step fails for real.
    target = tmp_path / "cleaner-offset-checkpoint"
    target.mkdir()
    (target / "inside").write_bytes(b"keep")
    with pytest.raises(OSError):
        atomic_write(target, b"0\n0\n")
    assert (target / "inside").read_bytes() == b"keep"
    assert not temp_path(target).exists()


def test_failed_write_never_replaces_target(tmp_path):
    target = tmp_path / "meta.properties"
    target.write_bytes(b"version=1\n")
    with pytest.raises(TypeError):
        atomic_write(target, "text is not bytes")  # type: ignore[arg-type]
    assert target.read_bytes() == b"version=1\n"
    assert not temp_path(target).exists()


def test_missing_directory_fails_without_creating_anything(tmp_path):
    with pytest.raises(FileNotFoundError):
        atomic_write(tmp_path / "absent" / "file", b"x")
    assert list(tmp_path.iterdir()) == []


def test_fsync_helpers(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"data")
    os.chmod(path, 0o444)  # fsync must work on read-only files (Kafka's corpus is read-only)
    fsync_file(path)
    fsync_dir(tmp_path)
    with pytest.raises(FileNotFoundError):
        fsync_file(tmp_path / "missing")
    with pytest.raises(FileNotFoundError):
        fsync_dir(tmp_path / "missing")


def test_delete_if_exists(tmp_path):
    path = tmp_path / ".kafka_cleanshutdown"
    assert delete_if_exists(path) is False
    path.write_bytes(b"")
    assert delete_if_exists(path) is True
    assert not path.exists()
    path.write_bytes(b"")
    assert delete_if_exists(path, sync=False) is True


def test_syncfs_is_trusted_only_where_it_is_as_strong_as_fsync(tmp_path):
    assert not syncfs_trusted(Path("/proc"))  # procfs: not a disk filesystem
    assert not syncfs_trusted(tmp_path / "missing")  # statfs fails: not trusted


def test_syncfs_failures_raise(tmp_path):
    fd = os.open(tmp_path, os.O_RDONLY)
    os.close(fd)
    with pytest.raises(OSError) as raised:
        syncfs(fd)  # closed descriptor
    assert raised.value.errno == errno.EBADF


def test_file_version_changes_with_every_replacement_and_only_then(tmp_path: Path) -> None:
    path = tmp_path / "cleaner-offset-checkpoint"
    assert file_version(path) is None
    atomic_write(path, b"0\n0\n")
    first = file_version(path)
    assert first is not None and file_version(path) == first
    atomic_write(path, b"0\n0\n")  # the same bytes, a new file: a new version
    assert file_version(path) not in (None, first)
