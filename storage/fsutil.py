"""Crash-safe file replacement, as Kafka does it for every checkpoint and metadata file, and
the system calls that make files durable.

Kafka never rewrites a checkpoint in place: it writes ``<file>.tmp``, fsyncs it, renames it over
the target (``Utils.atomicMoveWithFallback``) and fsyncs the parent directory so the rename itself
survives a power loss. A crash therefore leaves either the old file or the new one, plus at worst a
stray ``.tmp`` that the next write overwrites.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from kafkatier.storage.errors import StorageError

TMP_SUFFIX: Final = ".tmp"
"""Kafka appends this to the full target name: ``replication-offset-checkpoint.tmp``."""


MAX_NAME_BYTES: Final = 255
"""A file name's limit on Linux filesystems; a 249-character topic's names come close."""
ATOMIC_NAME_BYTES: Final = MAX_NAME_BYTES - len(TMP_SUFFIX)
"""A name :func:`atomic_write` can write: its temporary's name (``<name>.tmp``) fits too."""
_DIGEST_CHARS: Final = 16  # hex characters of SHA-256: 64 bits tell two long names apart


def as_path(path: str | os.PathLike[str]) -> Path:
    """``path`` as a :class:`Path`: itself when it is one. Python 3.11's ``Path(p)`` parses a
    Path's parts again (a few microseconds); the constructors a partition's open runs made ten a
    partition, and an open and close of 1,024 partitions took 1.21 s with them against 0.98 s
    without (medians of 8 alternating rounds, ad hoc, 2026-12-01)."""
    return path if isinstance(path, Path) else Path(path)


def fitted_name(stem: str, suffix: str, *, room: int = MAX_NAME_BYTES) -> str:
    """``stem + suffix``, or, longer than ``room`` bytes, the stem's start, ``~``, a hash of
    the whole stem and ``suffix``: the same name for the same stem (a resumed restore finds
    its directory), another for another."""
    name = stem + suffix
    if len(name.encode()) <= room:
        return name
    digest = hashlib.sha256(stem.encode()).hexdigest()[:_DIGEST_CHARS]
    keep = room - len(suffix.encode()) - _DIGEST_CHARS - 1
    return stem.encode()[:keep].decode(errors="ignore") + "~" + digest + suffix


def temp_path(path: Path) -> Path:
    """The temporary sibling Kafka writes before renaming over ``path``."""
    return path.with_name(path.name + TMP_SUFFIX)


@contextlib.contextmanager
def naming(path: Path | str) -> Iterator[None]:
    """An ``OSError`` raised inside without a file name (a write, fsync or ftruncate on a
    descriptor: ENOSPC, EIO) gets ``path`` as its name, so its one line says which file."""
    try:
        yield
    except OSError as exc:
        if exc.filename is not None or exc.errno is None:
            raise
        raise OSError(exc.errno, exc.strerror, str(path)) from exc


def fsync_file(path: Path) -> None:
    """Flush a file's data and metadata to stable storage."""
    fd = os.open(path, os.O_RDONLY)
    try:
        with naming(path):
            os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    """Make renames, creations and deletions inside ``path`` durable.

    Platforms that cannot open a directory (Windows) make renames durable on their own, so the
    failure to open one is not an error there.
    """
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
    try:
        fd = os.open(path, flags)
    except (PermissionError, IsADirectoryError):
        if os.name == "nt":
            return
        raise
    try:
        with naming(path):
            os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(path: Path) -> None:
    """fsync every regular file directly in ``path``, then ``path`` itself (what a syncfs of
    its filesystem would have made durable of it)."""
    for entry in os.scandir(path):
        if entry.is_file(follow_symlinks=False):
            fsync_file(Path(entry.path))
    fsync_dir(path)


def write_unseen(path: Path, data: bytes, *, sync: bool = True) -> None:
    """Write and fsync a file no reader can see yet (inside a directory still staged under
    another name): no temporary file is needed, and the fsync uses the writing descriptor
    (``sync=False``: none; the caller syncs the filesystem before anyone can see the file)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        with naming(path):
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if sync:
                os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, sync: bool = True) -> None:
    """Replace ``path`` with ``data`` so that readers see the old or the new content, never a mix.

    With ``sync=False`` the replacement is still atomic but may be lost in a crash (Kafka's
    ``fsync=false`` writes of meta.properties). On any failure the temporary file is removed and
    the target is left untouched.
    """
    tmp = temp_path(path)
    try:
        with naming(tmp), open(tmp, "wb") as out:
            out.write(data)
            out.flush()
            if sync:
                os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    if sync:
        fsync_dir(path.parent)


FileVersion = tuple[int, int, int]
"""A file's (inode, size, mtime in ns): :func:`file_version`."""


def make_log_dir(path: Path) -> None:
    """``path`` made, with its parents, where it is not there yet; a file there is an error
    naming it (``mkdir``'s own said only "File exists")."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise StorageError(f"log dir {path} is not a directory") from None


def file_version(path: Path | str) -> FileVersion | None:
    """Which version of ``path`` is there now (None: none is): for a cache of a file's parsed
    contents, re-read only when the file changed. The files kafkatier caches are replaced
    whole (:func:`atomic_write`), so a new version is a new inode; size and mtime catch a
    file rewritten in place."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def delete_if_exists(path: Path, *, sync: bool = True) -> bool:
    """Remove ``path`` if present (Kafka's ``Files.deleteIfExists``); True if it was removed."""
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    if sync:
        fsync_dir(path.parent)
    return True


SYNCFS_FILESYSTEMS: Final = {0xEF53: "ext4", 0x58465342: "xfs", 0x9123683E: "btrfs"}
"""``statfs`` magic numbers of the filesystems whose ``syncfs`` is trusted (:func:`syncfs_trusted`);
0xEF53 is also ext2/ext3, which Linux mounts with the ext4 driver."""
SYNCFS_MIN_KERNEL: Final = (5, 8)
"""The first Linux whose ``syncfs`` reports writeback errors (before, it always returned 0)."""


def syncfs(fd: int) -> None:
    """``syncfs(2)``: write back everything cached for the filesystem holding ``fd`` (file data,
    pages written through shared mappings, metadata, directories), wait for it and flush the
    device's cache; ``OSError`` when it fails."""
    if _libc().syncfs(fd) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"syncfs: {os.strerror(code)}")


SYNC_FILE_RANGE_WRITE: Final = 2  # linux/fs.h: start writeback of dirty pages, do not wait


def start_writeback(fd: int, offset: int, nbytes: int) -> None:
    """Ask Linux to start writing ``nbytes`` at ``offset`` of ``fd`` back to disk without
    waiting (``sync_file_range(SYNC_FILE_RANGE_WRITE)``), as RocksDB's ``bytes_per_sync`` does:
    a large write's I/O then runs while it is written, and the fsync that makes it durable
    later finds little left. A hint only: nothing is durable until that fsync, and where the
    call is missing or fails nothing happens."""
    call = _sync_file_range()
    if call is not None:
        call(fd, offset, nbytes, SYNC_FILE_RANGE_WRITE)


@functools.cache
def _sync_file_range() -> Any:
    call = getattr(_libc(), "sync_file_range", None) if sys.platform.startswith("linux") else None
    if call is not None:
        call.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
        call.restype = ctypes.c_int
    return call


def syncfs_trusted(path: Path) -> bool:
    """Whether one :func:`syncfs` of the filesystem holding ``path`` is as strong as an fsync of
    every file written there: Linux 5.8 or later (which reports a writeback error of any file to
    every descriptor that was open on the filesystem when it happened, as fsync reports one of
    its file) on ext4, XFS or btrfs, whose ``sync_fs`` commits the journal (or transaction) and
    flushes the device as their fsync does. Network and FUSE filesystems, overlayfs and other
    systems: no."""
    if not sys.platform.startswith("linux") or _kernel() < SYNCFS_MIN_KERNEL:
        return False
    try:
        libc = _libc()
        found = ctypes.create_string_buffer(256)  # struct statfs: 120 bytes on 64-bit Linux
        if not hasattr(libc, "syncfs") or libc.statfs(os.fsencode(path), found) != 0:
            return False
    except OSError:
        return False
    return ctypes.c_long.from_buffer(found).value in SYNCFS_FILESYSTEMS  # f_type comes first


def _kernel() -> tuple[int, int]:
    found = re.match(r"(\d+)\.(\d+)", os.uname().release)
    return (int(found[1]), int(found[2])) if found else (0, 0)


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)
