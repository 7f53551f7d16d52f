"""The cleaned group's writer (``storage/cleaner/group_writer.py``): what is appended, and in
what order, is the same on its thread as without one, however long the deflates handed to the
thread take; a deflate's failure reaches the walk."""

from __future__ import annotations

import threading
import time

import pytest

from kafkatier.storage.cleaner.chunk import Deflated
from kafkatier.storage.cleaner.group_writer import BACKLOG, GroupWriter
from kafkatier.storage.log.batch_position import BatchInfo


class _Cleaned:
    """What ``GroupWriter`` appends to: each call's bytes and infos, and the thread it ran on."""

    def __init__(self) -> None:
        self.appends: list[tuple[bytes, list[BatchInfo]]] = []
        self.threads: set[str] = set()

    def append_batches(self, data: bytes, infos: list[BatchInfo]) -> None:
        self.appends.append((data, list(infos)))
        self.threads.add(threading.current_thread().name)


def _batches(tag: int, count: int) -> Deflated:
    """``count`` fake batches of 10 bytes, offsets ``tag * 100 + i``."""
    data = b"".join(bytes([tag % 256, i]) * 5 for i in range(count))
    return data, [BatchInfo(10 * i, 10, tag * 100 + i, 0) for i in range(count)]


def _slow(tag: int, seconds: float) -> Deflated:
    time.sleep(seconds)
    return _batches(tag, 2)


def _write(threaded: bool, chunk_bytes: int) -> tuple[_Cleaned, list[bool]]:
    """Plain batches and slow deflates interleaved, as a rewrite gives them."""
    cleaned = _Cleaned()
    handed = []
    with GroupWriter(cleaned, chunk_bytes, threaded) as writer:  # type: ignore[arg-type]
        for tag in range(12):
            if tag % 3:
                writer.add_many(*_batches(tag, 3))
                continue
            took = writer.hand_over(lambda tag=tag: _slow(tag, 0.02))
            handed.append(took)
            if not took:  # the walk deflates it itself, in its place
                writer.add_many(*_slow(tag, 0.0))
        writer.flush()
        deflated = writer.deflated_bytes
    assert deflated == 20 * sum(handed)
    return cleaned, handed


@pytest.mark.parametrize("chunk_bytes", [1, 45, 1 << 20])
def test_the_thread_appends_what_and_where_the_walk_would(chunk_bytes: int) -> None:
    """Every chunk's bytes and infos are the same with the thread; some deflates went there
    (and, past the backlog, some stayed with the walk)."""
    alone, handed_alone = _write(False, chunk_bytes)
    threaded, handed = _write(True, chunk_bytes)
    assert threaded.appends == alone.appends
    assert handed_alone == [False] * 4 and any(handed)
    assert alone.threads == {threading.current_thread().name}
    assert threaded.threads == {"kafkatier-cleaner-writer_0"}
    offsets = [i.last_offset for _, infos in threaded.appends for i in infos]
    assert offsets == sorted(offsets)


def test_the_walk_deflates_itself_past_the_backlog() -> None:
    cleaned = _Cleaned()
    release = threading.Event()
    with GroupWriter(cleaned, 1, True) as writer:  # type: ignore[arg-type]
        took = [writer.hand_over(lambda: (release.wait(), _batches(1, 1))[1])
                for _ in range(BACKLOG + 2)]  # fmt: skip
        release.set()
        writer.flush()
    assert took == [True] * BACKLOG + [False, False]


def test_a_failed_deflate_reaches_the_walk() -> None:
    def broken() -> Deflated:
        raise ValueError("zstd refused the batch")

    cleaned = _Cleaned()
    writer = GroupWriter(cleaned, 1, True)  # type: ignore[arg-type]
    with writer, pytest.raises(ValueError, match="zstd refused"):  # at this call or the next
        writer.hand_over(broken)
        writer.flush()
    assert cleaned.appends == []
