"""The C library's queue of writes (``writes.c`` through ``native.Writes``): every entry written
whole at its position, each entry's own result, whoever writes it. At the finish the caller
writes the entries the thread has not taken, side by side with it; what the caller wrote is read
from its ``/proc/thread-self/io`` (``wchar``: the bytes its write calls took)."""

from __future__ import annotations

import errno
import os
import random
import time
from pathlib import Path
from typing import Any

import pytest

from kafkatier.storage import native


@pytest.fixture
def kernels() -> Any:
    found = native.native()
    if found is None:
        pytest.skip("the C library is not built here: no queue of writes to test")
    return found


def _written_by_this_thread() -> int:
    with open("/proc/thread-self/io") as io:
        fields = dict(line.split(": ") for line in io.read().splitlines())
    return int(fields["wchar"])


def _entry(i: int) -> list[memoryview]:
    """Entry ``i``'s bytes: one to six iovecs (more than ``Writes.IOVS`` take their own array)
    of about 10 KB each, so that the thread is still writing when the caller finishes."""
    parts = 1 + i % 6
    return [memoryview(b"%06d:%d|" % (i, p) * (1000 + p)) for p in range(parts)]


@pytest.mark.parametrize("share", [True, False])
def test_every_entry_is_written_at_its_place_by_the_thread_or_the_caller(
    tmp_path: Path, kernels: Any, monkeypatch: pytest.MonkeyPatch, share: bool
) -> None:
    """Nothing is handed over before the finish (the queue publishes only then), and the thread
    sleeps by then: the finishing caller takes entries from the start, the thread once awake
    (``share`` False: the thread writes them all, the caller waits)."""
    monkeypatch.setattr(kernels, "PUBLISH_EVERY", 1 << 30)
    count = 1500
    fds = [os.open(tmp_path / f"f{i}", os.O_RDWR | os.O_CREAT) for i in range(count)]
    try:
        for i, fd in enumerate(fds):
            os.write(fd, b"head-%d" % i)  # each entry appends behind what its file holds
        writes = kernels.Writes(count)
        before = _written_by_this_thread()
        for i, fd in enumerate(fds):
            views = _entry(i)
            writes.add(fd, views, len(b"head-%d" % i), sum(v.nbytes for v in views))
        time.sleep(0.01)  # past the thread's spin (writes.c's SPIN_NS): it sleeps
        results = writes.finish(share)
        by_caller = _written_by_this_thread() - before
    finally:
        for fd in fds:
            os.close(fd)
    assert results == [sum(v.nbytes for v in _entry(i)) for i in range(count)]
    for i in range(count):
        expected = b"head-%d" % i + b"".join(bytes(v) for v in _entry(i))
        assert (tmp_path / f"f{i}").read_bytes() == expected
    if share:
        assert by_caller > 0, "the finishing caller wrote entries itself"
    else:
        assert by_caller == 0, "the thread wrote every entry"


def test_each_failed_entry_has_its_own_error(tmp_path: Path, kernels: Any) -> None:
    """Entries on descriptors opened read-only fail with EBADF, wherever they fall in the queue
    and whichever side writes them; the others are written."""
    count = 600
    failing = set(random.Random(7).sample(range(count), 40))
    fds = []
    for i in range(count):
        path = tmp_path / f"f{i}"
        path.touch()
        fds.append(os.open(path, os.O_RDONLY if i in failing else os.O_WRONLY))
    try:
        writes = kernels.Writes(count)
        for i, fd in enumerate(fds):
            writes.add(fd, _entry(i), 0, sum(v.nbytes for v in _entry(i)))
        results = writes.finish()
    finally:
        for fd in fds:
            os.close(fd)
    for i, result in enumerate(results):
        if i in failing:
            assert result == -errno.EBADF
            assert (tmp_path / f"f{i}").stat().st_size == 0
        else:
            assert result == sum(v.nbytes for v in _entry(i))
            assert (tmp_path / f"f{i}").read_bytes() == b"".join(bytes(v) for v in _entry(i))
