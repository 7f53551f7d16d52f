"""Python's cyclic garbage collector paused over bulk work that allocates many short-lived
objects while many long-lived ones are alive: a collection then traverses the long-lived ones
for nothing (reference counting frees the short-lived ones meanwhile; any cycle among them is
collected once the collector is on again).

Measured where it is used: the sink's micro-batch (with a thousand partitions' logs, indexes and
producer states alive, the collections its checks and appends triggered cost about a tenth of
a batch; paused for the check and the appends only, a 200,000-row batch at 1,024 partitions
still met 3.6 young and, every 15 batches, one full collection of 65-79 ms: 7.6-9.3 ms a batch,
against 0.3 ms paused for the whole call; ``gc.callbacks`` timing 15 warm batches, ad hoc), and
a compaction (about a tenth of compacting the compaction bench's lz4 topic went to collections,
``perf record``, ad hoc).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """The collector off for the block, then on again if it was on (nested or concurrent uses
    leave it on once the first one that turned it off is done: at worst slower, never off)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
