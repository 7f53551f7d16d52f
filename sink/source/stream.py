"""A streaming query's offsets: what each trigger reads, decided once for both readers.

Spark asks a stream for its initial offset, then per trigger for the latest offset it may read
to (within a read limit: ``maxOffsetsPerTrigger``), then for the tasks that read a micro-batch
from one offset to another. :class:`StreamOffsets` answers all of it from the partitions' bounds
on disk: the Python source's stream reader (``datasource.KafkaTierStreamReader``, run by Spark
in a Python process of its own) and the JVM reader's stream (``JvmStream.java``, which asks
the driver's planner, ``jvm.Planner``, and so starts no Python process) both delegate to it.
Offsets are Spark's Kafka offset JSON, ``{"topic": {"0": 42}}``, the same from either reader,
so a checkpoint written with one resumes with the other.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from kafkatier.sink.source.offsets import Offsets, from_json, rate_limit, starting_offsets, to_json
from kafkatier.sink.source.options import SourceOptions
from kafkatier.sink.source.plan import survey, topic_partitions
from kafkatier.sink.source.queries import micro_batch_plan
from kafkatier.sink.source.task import ReadTask
from kafkatier.storage.errors import OffsetOutOfRangeError
from kafkatier.storage.log.bounds import PartitionBounds
from kafkatier.storage.log.bounds_cache import BoundsCache
from kafkatier.storage.log.dir_watch import DirectoryWatch
from kafkatier.storage.log.readonly import TopicPartition
from kafkatier.storage.log.tail_cache import TailCache

logger = logging.getLogger(__name__)

REMOTE_LISTING_MAX_AGE_S = 60.0
"""How long a streaming query reuses its listing of the remote store's partitions."""


class StreamOffsets:
    """One streaming query's offsets. Partitions that appear later (a topic the sink creates, a
    pattern that starts to match) are read from their earliest offset, as Spark does."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._bounds: dict[TopicPartition, PartitionBounds] = {}
        self._target: Offsets | None = None  # Trigger.AvailableNow's end, once prepared
        self._tails = TailCache()  # what the last segments said, carried trigger to trigger
        # each partition's bounds while its folder is unchanged (the kernel's word, inotify)
        self._kept = BoundsCache(watch=DirectoryWatch.shared())
        self._reported_gone: set[TopicPartition] = set()  # warned of (failOnDataLoss=false)
        self._last_trigger = -float("inf")  # when a batch was last allowed (minOffsetsPerTrigger)

    def _survey(self) -> dict[TopicPartition, PartitionBounds]:
        """Bounds of every subscribed partition on disk now, kept for :meth:`plan`: its ABORT
        markers must cover the offsets :meth:`latest` handed out."""
        tps = topic_partitions(self.opts, listing_max_age_s=REMOTE_LISTING_MAX_AGE_S)
        self._bounds = survey(self.opts, tps, self._tails, self._kept)
        return self._bounds

    def initial(self) -> dict[str, Any]:
        return to_json(starting_offsets(self.opts, self._survey()))

    def latest(self, start: dict[str, Any], max_rows: int | None) -> dict[str, Any]:
        """The end of the next micro-batch from ``start``: every partition's last stable offset
        (high watermark under ``read_uncommitted``), within Trigger.AvailableNow's target, at
        most ``max_rows`` records past ``start`` in all (None: no limit)."""
        begin = from_json(start)
        bounds = self._survey()
        self._gone(sorted(tp for tp in begin if tp not in bounds))
        starts = {tp: begin.get(tp, b.log_start) for tp, b in bounds.items()}
        ends = {tp: b.latest(self.opts.committed) for tp, b in bounds.items()}
        back = {tp: self._went_back(tp, starts[tp], e) for tp, e in ends.items() if e < starts[tp]}
        ends = {tp: e for tp, e in ends.items() if tp not in back}
        if self._target is not None:
            ends = {
                tp: max(min(e, self._target.get(tp, starts[tp])), starts[tp])
                for tp, e in ends.items()
            }
        elif self._too_few(starts, ends):
            return to_json({**begin, **back})  # no batch yet: the start again, as Spark's
        if max_rows is not None:
            ends = rate_limit(starts, ends, max_rows)
        return to_json({**begin, **ends, **back})

    def _too_few(self, starts: Offsets, ends: Offsets) -> bool:
        """Spark's ``minOffsetsPerTrigger``: a trigger with fewer new offsets in all is skipped
        until ``maxTriggerDelay`` has passed since the last batch (the first one always runs;
        Trigger.AvailableNow reads what there is)."""
        wanted = self.opts.min_offsets_per_trigger
        if wanted is None:
            return False
        now = time.monotonic()
        waited = (now - self._last_trigger) * 1000 >= self.opts.max_trigger_delay_ms
        if not waited and sum(max(end - starts[tp], 0) for tp, end in ends.items()) < wanted:
            return True
        self._last_trigger = now
        return False

    def _gone(self, gone: list[TopicPartition]) -> None:
        """Partitions the query read that are no longer on disk (their topic deleted): Spark's
        Kafka source's data loss, an error under ``failOnDataLoss``, else one warning each (the
        query reads on without them)."""
        new = [tp for tp in gone if tp not in self._reported_gone]
        if not new:
            return
        names = ", ".join(f"{t}-{p}" for t, p in new)
        self._data_loss(f"partitions {names} are gone (their topic deleted?): some data may "
                        "have been missed", "read on without them")  # fmt: skip
        self._reported_gone.update(new)

    def _went_back(self, tp: TopicPartition, start: int, end: int) -> int:
        """A partition whose end is below the query's position (its topic deleted and created
        again, its log cut back): Spark's Kafka source's data loss, an error under
        ``failOnDataLoss`` (the default), else a warning and the new end as the partition's
        next start, as Spark reads on."""
        self._data_loss(f"{tp[0]}-{tp[1]}: its offset was changed from {start} to {end} (the "
                        "topic deleted and created again, or its log cut back): some data may "
                        "have been missed", f"read on from offset {end}")  # fmt: skip
        return end

    def _data_loss(self, message: str, instead: str) -> None:
        """Spark's Kafka source's data loss: an error under ``failOnDataLoss`` (the default)
        saying what ``failOnDataLoss=false`` does ``instead``, else one warning that it does."""
        if self.opts.fail_on_data_loss:
            raise OffsetOutOfRangeError(f"{message}; set failOnDataLoss=false to {instead}",
                                        file=self.opts.path)  # fmt: skip
        logger.warning("%s; failOnDataLoss=false: %s", message, instead)

    @property
    def default_max_rows(self) -> int | None:
        """``maxOffsetsPerTrigger``: Spark's default read limit for this stream."""
        return self.opts.max_offsets_per_trigger

    def report_latest(self) -> dict[str, Any] | None:
        """The latest offsets the last survey saw, for the query's progress metrics."""
        if not self._bounds:
            return None
        return to_json({tp: b.latest(self.opts.committed) for tp, b in self._bounds.items()})

    def prepare_available_now(self) -> None:
        """Trigger.AvailableNow: read up to what is on disk now, however long that takes."""
        self._target = {tp: b.latest(self.opts.committed) for tp, b in self._survey().items()}

    def plan(
        self, start: dict[str, Any], end: dict[str, Any], cores: int | None = None
    ) -> list[tuple[ReadTask, ...]]:
        """The Spark tasks reading offsets ``start`` to ``end``."""
        begin, stop = from_json(start), from_json(end)
        bounds = self._bounds
        if not all(tp in bounds and bounds[tp].high_watermark >= e for tp, e in stop.items()):
            bounds = self._survey()  # a restart replays a logged batch before any latest()
            stop = self._still_there(stop, bounds)
            begin = {tp: min(b, stop.get(tp, b)) for tp, b in begin.items()}
        return micro_batch_plan(self.opts, begin, stop, bounds, cores)

    def _still_there(
        self, stop: Offsets, bounds: dict[TopicPartition, PartitionBounds]
    ) -> Offsets:
        """A batch's ends against the log now: a batch replayed after a restart was planned
        before it (Spark's offset log), and a partition that since ends below its planned end
        (its topic deleted and created again, its log cut back) lost those offsets: Spark's
        tasks fail fetching them under ``failOnDataLoss``, else read what is left. The batch
        was committed with none of them, silently."""
        self._gone(sorted(tp for tp in stop if tp not in bounds))
        ends: Offsets = {}
        for tp, end in stop.items():
            if tp not in bounds:
                continue
            there = bounds[tp].high_watermark
            if end > there:
                self._data_loss(f"{tp[0]}-{tp[1]}: offsets {there} to {end} of this micro-batch "
                                "are gone (the topic deleted and created again, or its log cut "
                                "back)", "read what is left")  # fmt: skip
            ends[tp] = min(end, there)
        return ends
