"""Spark's Kafka source's data loss as the planner sees it: partitions the topic's recorded
count (``storage/log/partition_count.py``) says exist that neither the log dir nor the store
holds. ``failOnDataLoss`` (the default) makes it an error; otherwise one warning."""

from __future__ import annotations

import functools
import logging
from pathlib import Path

from kafkatier.sink.source.options import SourceOptions
from kafkatier.storage.errors import OffsetOutOfRangeError
from kafkatier.storage.log.partition_count import missing_partitions, number_ranges

logger = logging.getLogger(__name__)
TopicPartition = tuple[str, int]


def report_missing(opts: SourceOptions, found: set[TopicPartition]) -> None:
    """Partitions the topic's recorded count says exist but neither the log dir nor the store
    holds (a directory moved away): Kafka's data loss, an error under ``failOnDataLoss`` (the
    default), else a warning (once per topic and partitions) and a read of the rest."""
    by_topic: dict[str, set[int]] = {}
    for topic, partition in found:
        by_topic.setdefault(topic, set()).add(partition)
    for topic, present in sorted(by_topic.items()):
        missing = missing_partitions(Path(opts.path), topic, present)
        if opts.assign is not None:
            missing = [p for p in missing if (topic, p) in opts.assign]
        if not missing:
            continue
        message = (f"topic {topic!r} in {opts.path}: partitions {number_ranges(missing)} are "
                   "missing (their directories moved away?): some data may be missed")  # fmt: skip
        if opts.fail_on_data_loss:
            raise OffsetOutOfRangeError(f"{message}; set failOnDataLoss=false to read the rest",
                                        file=opts.path)  # fmt: skip
        _warn_once(f"{message}; reading the rest (failOnDataLoss=false)")


@functools.lru_cache(maxsize=256)
def _warn_once(message: str) -> None:
    logger.warning("%s", message)
