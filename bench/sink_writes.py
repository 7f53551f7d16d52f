"""Benchmark: the end of the sink's appends with the caller writing, beside the queue's thread,
the appends the thread has not taken (``storage/native/writes.c``, since 2026-12-01) against the
caller waiting for the thread alone (as before), alternating in one process.

    python bench/sink_writes.py [--partitions 8,1024] [--rows 200000] [--rounds 10]
                                [--block 4] [--warmup 10]

bench/scale_sink.py's micro-batch (``batch_frame``: 16-byte keys, 100-byte values, lz4, a cached
DataFrame of two Spark partitions) written by one sink per partition count. Each round runs
both ways, in alternating order (``_sink_ways.py``): for each way and sink one untimed batch,
then ``--block`` timed batches. The way is ``queued_writes.SHARED_FINISH``. Printed: the
command, per way and partition count the median batch and the median of the appends alone
(``append.write_all``, timed around the call, the queue's finish included), and per way the
most partitions over the fewest.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _sink_ways import measure, report
from scale_sink import SinkRun, block_arguments

from kafkatier.storage.log import queued_writes


def _shared(run: SinkRun) -> None:
    queued_writes.SHARED_FINISH = True


def _alone(run: SinkRun) -> None:
    queued_writes.SHARED_FINISH = False


def main() -> int:
    args, partitions = block_arguments(
        __doc__ or "", "sink_writes.py", rounds=10, block=4, warmup=10
    )
    try:
        times = measure("kafkatier-sink-writes", {"shared": _shared, "alone": _alone},
                        partitions, args.rows, args.rounds, args.block, args.warmup)  # fmt: skip
    finally:
        queued_writes.SHARED_FINISH = True
    report(times, partitions)
    return 0


if __name__ == "__main__":
    sys.exit(main())
