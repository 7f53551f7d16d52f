"""A real size-limited filesystem for the full-disk tests: a tmpfs of a few MiB mounted on a
test's directory (mounting needs root, or CAP_SYS_ADMIN; without it the tests skip, saying so).

tmpfs refuses writes with ENOSPC exactly as a full ext4 or xfs does, and a write through a
memory map to a hole it cannot fill is a SIGBUS, as on those filesystems.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

FILLER = "filler"


@contextlib.contextmanager
def small_fs(where: Path, size_kib: int) -> Iterator[Path]:
    """A tmpfs of ``size_kib`` KiB mounted at ``where`` (created), unmounted on exit."""
    where.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_kib}k", "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(fs: Path, leave: int = 0) -> Path:
    """Fill ``fs`` to the last block (then give back ``leave`` bytes); returns the filler file,
    whose removal gives the space back."""
    path = fs / FILLER
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        chunk = b"\0" * (64 << 10)
        while True:
            try:
                if os.write(fd, chunk) < len(chunk):
                    chunk = chunk[:4096]
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
                if len(chunk) <= 4096:
                    break
                chunk = chunk[:4096]
    finally:
        os.close(fd)
    if leave:
        size = path.stat().st_size
        os.truncate(path, max(0, size - leave))
    return path


def free_bytes(fs: Path) -> int:
    st = os.statvfs(fs)
    return st.f_bavail * st.f_frsize
