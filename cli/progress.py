"""The commands' progress bars: tqdm's, on stderr, only where it is a terminal; tqdm is
imported (60 ms, ``python -X importtime -c 'import tqdm'``) only where a bar is shown, so a
piped or scripted run pays nothing for it."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Final

BYTES: Final = {"unit": "B", "unit_scale": True, "delay": 1.0, "leave": False}
"""A bar of bytes read, shown once a run has lasted a second, gone when it ends."""


@contextmanager
def progress_bar(
    show: bool, total: Callable[[], int] | None = None, **bar: Any
) -> Iterator[Callable[[int], None] | None]:
    """``update(n)`` of a tqdm bar made with ``bar``'s keywords (and ``total()``, asked only
    for a bar that is shown: it may walk the inputs) where ``show``; None otherwise."""
    if not show:
        yield None
        return
    from tqdm import tqdm

    with tqdm(total=None if total is None else total(), file=sys.stderr, **bar) as shown:
        yield shown.update
