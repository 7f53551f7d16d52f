"""The directory watch (storage/log/dir_watch.py): a watched folder's generation moves with
every write, creation, removal and rename in it, as the kernel reports them, and with nothing
else; a folder removed is no longer watched, and watched anew gets a generation it never had."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkatier.storage.log.dir_watch import IN_Q_OVERFLOW, DirectoryWatch

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify: Linux")


@pytest.fixture
def watch() -> Iterator[DirectoryWatch]:
    found = DirectoryWatch.open()
    assert found is not None
    yield found
    found.close()


def test_every_change_in_the_folder_moves_its_generation(tmp_path: Path, watch) -> None:
    folder = tmp_path / "t-0"
    folder.mkdir()
    log = folder / "00000000000000000000.log"
    log.write_bytes(b"x" * 10)
    first = watch.watch(str(folder))
    assert first is not None and watch.generation(str(folder)) == first
    log.read_bytes()
    os.stat(log)
    assert watch.generation(str(folder)) == first  # reads change nothing
    seen = [first]
    for change in (
        lambda: log.open("ab").write(b"y"),  # an append
        lambda: os.truncate(log, 5),  # a truncation
        lambda: (folder / "00000000000000000005.snapshot.tmp").write_bytes(b"s"),  # created
        lambda: os.replace(folder / "00000000000000000005.snapshot.tmp",
                           folder / "00000000000000000005.snapshot"),  # renamed
        lambda: (folder / "00000000000000000005.snapshot").unlink(),  # removed
    ):  # fmt: skip
        change()
        now = watch.generation(str(folder))
        assert now is not None and now > seen[-1], change
        seen.append(now)
    assert watch.generation(str(tmp_path / "other")) is None  # never watched


def test_a_removed_folder_is_watched_anew(tmp_path: Path, watch) -> None:
    folder = tmp_path / "t-0"
    folder.mkdir()
    first = watch.watch(str(folder))
    (folder / "a").write_bytes(b"1")
    (folder / "a").unlink()
    folder.rmdir()
    assert watch.generation(str(folder)) is None  # gone: its reader falls back
    folder.mkdir()  # a recreated topic's partition
    again = watch.watch(str(folder))
    assert first is not None and again is not None and again > first
    (folder / "b").write_bytes(b"2")
    assert watch.generation(str(folder)) not in (None, again)


def test_changes_are_told_and_an_overflow_moves_every_generation(tmp_path: Path, watch) -> None:
    folders = [tmp_path / f"t-{p}" for p in range(3)]
    for folder in folders:
        folder.mkdir()
    before = [watch.watch(str(f)) for f in folders]
    told: list[int] = []
    watch.on_change = lambda: told.append(1)
    watch.drain()
    assert told == []  # nothing changed
    (folders[1] / "x").write_bytes(b"x")
    watch.drain()
    assert told == [1]
    after = [watch.generation(str(f)) for f in folders]
    assert after[0] == before[0] and after[2] == before[2] and after[1] != before[1]
    watch._event(-1, IN_Q_OVERFLOW)  # the kernel dropped events: any folder may have changed
    now = [watch.generation(str(f)) for f in folders]
    assert all(n not in (a, None) for n, a in zip(now, after, strict=True))
    assert watch.overflows == 1


def test_one_shared_watch_a_process_and_a_forked_child_gets_its_own() -> None:
    """Readers share one watch (a user's inotify instances are few); a forked child must not
    read its parent's events, so it makes its own."""
    shared = DirectoryWatch.shared()
    assert shared is not None and DirectoryWatch.shared() is shared
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the child: report whether it got another watch, then leave at once
        mine = DirectoryWatch.shared()
        os.write(write, b"1" if mine is not None and mine is not shared else b"0")
        os._exit(0)
    os.close(write)
    try:
        assert os.read(read, 1) == b"1"
    finally:
        os.close(read)
        os.waitpid(child, 0)
