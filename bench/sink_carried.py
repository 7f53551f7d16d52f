"""Benchmark: the sink's appends starting each partition from the state the last batch's call
left (``storage/log/commit_fields.Carried``) against reading it from the logs every batch (as
before 2026-12-01), alternating in one process.

    python bench/sink_carried.py [--partitions 8,1024] [--rows 200000] [--rounds 10]
                                 [--block 4] [--warmup 10]

bench/scale_sink.py's micro-batch (``batch_frame``: 16-byte keys, 100-byte values, lz4, a cached
DataFrame of two Spark partitions) written by one sink per partition count. Each round runs
both ways, in alternating order (``_sink_ways.py``): for each way and sink, one batch that fills
(or empties) the carried state, untimed, then ``--block`` timed batches. The way that reads is
the same sink with a ``Carried`` that never has an entry. Printed: the command, per way and
partition count the median batch and the median of the appends alone (``append.write_all``,
timed around the call), and per way the most partitions over the fewest.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _sink_ways import measure, report
from scale_sink import SinkRun, block_arguments

from kafkatier.storage.log.commit_fields import Carried


class _Reading(Carried):
    """A carried state that never has an entry: every call reads each partition's state."""

    def take(self, *args: Any, **kwargs: Any) -> None:
        return None

    def keep(self, *args: Any, **kwargs: Any) -> None:
        return None


def _carrying(run: SinkRun) -> None:
    run.sink._held.carried = Carried()


def _reading(run: SinkRun) -> None:
    run.sink._held.carried = _Reading()


def main() -> int:
    args, partitions = block_arguments(
        __doc__ or "", "sink_carried.py", rounds=10, block=4, warmup=10
    )
    ways = {"carried": _carrying, "read": _reading}
    times = measure("kafkatier-sink-carried", ways, partitions, args.rows, args.rounds,
                    args.block, args.warmup)  # fmt: skip
    report(times, partitions)
    return 0


if __name__ == "__main__":
    sys.exit(main())
