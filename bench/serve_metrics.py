"""Benchmark: what counting a response's error codes costs ``kafkatier serve`` per answer.

    python bench/serve_metrics.py [--partitions 1024] [--rounds 200]

One kio FetchResponse v16 of ``--partitions`` partitions (no error), as serve builds it, given
to ``serve.metrics.error_codes`` (which walks only the fields whose type can hold entities) and,
in the same run, to the walk of every field of every entity (what it did before), rounds
alternating. Prints the command, the median milliseconds per answer of each and their ratio.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.fetch.v16 import response as fetch

from kafkatier.serve.metrics import error_codes


def every_field(response: Any) -> Iterator[ErrorCode]:
    """The walk of every field (the baseline)."""
    if not dataclasses.is_dataclass(response):
        return
    for f in dataclasses.fields(response):
        value = getattr(response, f.name)
        if f.name == "error_code" and value:
            yield ErrorCode(value)
        elif isinstance(value, tuple):
            for item in value:
                yield from every_field(item)
        elif dataclasses.is_dataclass(value):
            yield from every_field(value)


def answer(partitions: int) -> Any:
    parts = tuple(
        fetch.PartitionData(partition_index=i, error_code=ErrorCode.none, high_watermark=i,
                            last_stable_offset=i, log_start_offset=0, aborted_transactions=(),
                            records=b"")
        for i in range(partitions)
    )
    topic = fetch.FetchableTopicResponse(topic_id=uuid.uuid4(), partitions=parts)
    return fetch.FetchResponse(throttle_time=datetime.timedelta(0), error_code=ErrorCode.none,
                               session_id=0, responses=(topic,))  # fmt: skip


def timed(walk: Callable[[Any], Iterator[ErrorCode]], response: Any) -> float:
    began = time.perf_counter()
    assert list(walk(response)) == []
    return (time.perf_counter() - began) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    response = answer(args.partitions)
    ours: list[float] = []
    before: list[float] = []
    for r in range(args.rounds):
        sides = [(error_codes, ours), (every_field, before)]
        for walk, into in sides if r % 2 == 0 else sides[::-1]:
            into.append(timed(walk, response))
    a, b = statistics.median(ours), statistics.median(before)
    print(f"command: python bench/serve_metrics.py --partitions {args.partitions} "
          f"--rounds {args.rounds}")  # fmt: skip
    print(f"error_codes {a:.2f} ms, every field {b:.2f} ms per answer: {b / a:.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
