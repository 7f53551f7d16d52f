"""``kafkatier produce``'s input reading ahead of the encoder (kafkatier.cli.inputs.prefetched):
the same items in the same order, a source's error raised where it happened, at most ``depth``
items read ahead, and a caller that stops early stops the reading thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from kafkatier.cli.inputs import prefetched


class Source:
    """Numbers 0..n-1, counting how many were taken; raises at ``fail_at`` if given."""

    def __init__(self, n: int, fail_at: int | None = None) -> None:
        self.n, self.fail_at, self.taken = n, fail_at, 0

    def __iter__(self) -> Iterator[int]:
        for i in range(self.n):
            if i == self.fail_at:
                raise ValueError(f"input.parquet: corrupt row group at item {i}")
            self.taken += 1
            yield i


def _reader_alive() -> bool:
    return any(t.name == "kafkatier-input" and t.is_alive() for t in threading.enumerate())


def test_every_item_in_order() -> None:
    assert list(prefetched(iter(Source(50)), depth=2)) == list(range(50))


def test_a_source_error_is_raised_after_the_items_before_it() -> None:
    got: list[int] = []
    with pytest.raises(ValueError, match="corrupt row group at item 7"):
        for item in prefetched(iter(Source(20, fail_at=7)), depth=3):
            got.append(item)
    assert got == list(range(7))


def test_reads_at_most_depth_ahead_and_an_early_stop_ends_the_thread() -> None:
    source = Source(1000)
    items = prefetched(iter(source), depth=2)
    assert next(items) == 0
    time.sleep(0.3)  # the thread fills the queue, then waits
    assert source.taken <= 1 + 2 + 1  # the one handed over, the queue, the one waiting to go in
    items.close()  # the caller stops early (an encoding error, a full disk)
    deadline = time.monotonic() + 5
    while _reader_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _reader_alive()
    assert source.taken < 10
