"""Kafka's search of an offset or time index (``AbstractIndex.largestLowerBoundSlotFor``).

Entries are sorted by the searched field in a well-formed file, so a binary search finds the
last slot whose field is <= the target. Kafka first searches the warm section, the entries in
the last 8 KiB (the pages appends keep in memory), and only then the rest. On an unsorted file
(an untrimmed zero-filled tail) the two-step search can answer differently from one bisection
of the whole file, so it is reproduced step for step to answer as a broker would.
"""

from __future__ import annotations

from collections.abc import Callable

WARM_SECTION_BYTES = 8192
"""Kafka searches the last 8 KiB of entries first (``AbstractIndex.warmEntries``)."""

Parse = Callable[[int], tuple[int, int]]
"""A slot number to its entry (absolute offsets)."""


def largest_lower_bound(
    parse: Parse, entries: int, entry_size: int, target: int, field: int
) -> int:
    """The last slot among ``entries`` whose ``field`` is <= ``target``, warm section first;
    -1 if none."""
    if entries == 0:
        return -1
    first_hot = max(0, entries - 1 - WARM_SECTION_BYTES // entry_size)
    if parse(first_hot)[field] < target:
        return _binary_search(parse, target, field, first_hot, entries - 1)
    if parse(0)[field] > target:
        return -1
    return _binary_search(parse, target, field, 0, first_hot)


def _binary_search(parse: Parse, target: int, field: int, lo: int, hi: int) -> int:
    while lo < hi:
        mid = (lo + hi + 1) >> 1
        found = parse(mid)[field]
        if found > target:
            hi = mid - 1
        elif found < target:
            lo = mid
        else:
            return mid
    return lo
