"""Fetch (key 1): record batches as they lie on disk, by isolation level, with long polling.

Per partition the answer is ``partition_view.fetch``: the batches from the fetch offset up to the
high watermark (read_uncommitted) or the last stable offset (read_committed, with the aborted
transactions), OFFSET_OUT_OF_RANGE below the log start or past the log end, never more than the
partition's and the response's byte limits (the first batch of a response goes out whole).

Long polling: while the response would hold fewer than ``min_bytes`` and ``max_wait_ms`` has not
passed, the request waits for any fetched partition's log to change, then reads again, so a
consumer tailing a topic sees appends within its poll interval; a wait that ends with nothing
changed answers with what was read before it, not with a second read of every partition. Where
the kernel reports the partition folders' changes (``serve/changes.py``: inotify), the wait
sleeps until one does; elsewhere it looks (``change_token``) every :data:`POLL_SECONDS`, less
often where one look at many partitions takes long: at most :data:`POLL_SHARE` of the wait goes
to looking.

Fetch sessions (KIP-227): none are created. A full fetch (session id 0) is answered with session
id 0, which tells the client there is no session, so every request stays a full one; an
incremental fetch naming a session gets FETCH_SESSION_ID_NOT_FOUND, as from a broker that evicted
it. Topics are named by name up to v12 and by id (``partition.metadata``) from v13. A
partition's ``current_leader_epoch`` (v9+) is checked as Kafka checks it (epochs.py).
"""

from __future__ import annotations

import asyncio
import datetime
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

from kafkatier.serve import partition_view
from kafkatier.serve.apis.versions import FETCH
from kafkatier.serve.catalog import TopicInfo
from kafkatier.serve.changes import FolderChanges
from kafkatier.serve.context import ServeContext
from kafkatier.serve.faults import read_or_error
from kafkatier.serve.partition_view import FetchedPartition, Sources
from kafkatier.serve.protocol import build, payload_module
from kafkatier.serve.zero_copy import OPEN_SPANS, Span, Spliced, close_spans
from kafkatier.storage.file_budget import default_max_open_files

POLL_SECONDS = 0.05
POLL_SHARE = 0.1
"""At most this share of a long poll's wait goes to looking for changes: a look is two ``stat``
calls a partition whose bounds are kept, else a listing and a ``stat`` (about 20 us, ad hoc), so
with thousands of partitions looking every :data:`POLL_SECONDS` would keep a core busy for one
idle consumer."""


MOST_OPEN_SPANS: Final = max(16, default_max_open_files() // 2)
"""Open ``.log`` spans (one a partition with records in a response, held until the response is
written) past which a response takes no more partitions' records, as a broker's does past the
request's ``fetch.max.bytes``: the partitions left get none and the client fetches them next.
Half of the process's descriptor budget (a quarter of ``ulimit -n``): a Fetch of 2,048
partitions under the common limit of 1,024 otherwise opened a file for each and answered the
partitions past the limit with KAFKA_STORAGE_ERROR (EMFILE), a warning each."""


@dataclass(frozen=True)
class Wanted:
    """One partition of the request, resolved against the catalog."""

    topic: TopicInfo | None
    key: Any  # the topic's name (v4-12) or id (v13+), as the request named it
    partition: int
    offset: int
    max_bytes: int
    current_leader_epoch: int = -1

    @property
    def log_dir(self) -> Path | None:
        return None if self.topic is None else self.topic.partitions.get(self.partition)


async def handle(ctx: ServeContext, version: int, request: Any) -> Any:
    module = payload_module(FETCH, version, EntityType.response)
    if getattr(request, "session_id", 0) != 0:  # v7+: fetch sessions (sessionless only)
        return build(module.FetchResponse, throttle_time=datetime.timedelta(0),
                     error_code=ErrorCode.fetch_session_id_not_found, session_id=0,
                     responses=())  # fmt: skip
    wanted = _resolve(request, await ctx.blocking(ctx.catalog.topics), version)
    committed = request.isolation_level == 1
    deadline = time.monotonic() + request.max_wait.total_seconds()
    results: list[Result] = []
    try:
        while True:
            # taken before the read, so that a change during it shows; none for a fetch that
            # does not wait (max.wait.ms 0)
            seen = 0 if ctx.changes is None else ctx.changes.version
            waits = time.monotonic() < deadline
            tokens = await ctx.blocking(_tokens, wanted, ctx.sources) if waits else []
            close_spans(_records(results))  # an earlier read that was too small
            results = await ctx.blocking(_read_all, wanted, request.max_bytes, committed,
                                         ctx.sources)  # fmt: skip
            size = sum(len(r.records) for r in results if isinstance(r, FetchedPartition))
            failed = any(not isinstance(r, FetchedPartition) or r.out_of_range for r in results)
            if size >= request.min_bytes or failed or time.monotonic() >= deadline:
                break
            if not await _wait_for_change(ctx, wanted, tokens, deadline, seen):
                break  # nothing changed until the deadline: what was read is the answer
    except BaseException:
        close_spans(_records(results))
        raise
    for r in results:
        if isinstance(r, FetchedPartition) and r.records:
            ctx.metrics.bytes_served(len(r.records), r.remote)
    spans = [part for part in _records(results) if not isinstance(part, bytes)]
    return Spliced(_response(module, wanted, results, committed), spans)


def _records(results: list[Result]) -> list[bytes | Span]:
    return [r.records for r in results if isinstance(r, FetchedPartition)]


def _resolve(request: Any, topics: dict[str, TopicInfo], version: int) -> list[Wanted]:
    by_id = {info.topic_id: info for info in topics.values()}
    wanted: list[Wanted] = []
    for topic in request.topics:
        key = topic.topic_id if version >= 13 else topic.topic
        info = by_id.get(key) if version >= 13 else topics.get(key)
        wanted.extend(
            Wanted(info, key, p.partition, p.fetch_offset, p.partition_max_bytes,
                   getattr(p, "current_leader_epoch", -1))
            for p in topic.partitions
        )
    return wanted


def _tokens(wanted: list[Wanted], sources: Sources) -> list[tuple[int, ...]]:
    return [
        partition_view.change_token(w.log_dir, w.topic.name, w.partition, sources)
        for w in wanted
        if w.log_dir is not None and w.topic is not None
    ]


async def _wait_for_change(
    ctx: ServeContext, wanted: list[Wanted], tokens: list[tuple[int, ...]], deadline: float,
    seen: int,
) -> bool:  # fmt: skip
    """True once a fetched partition's log changed since ``tokens`` (and ``seen``, the folder
    changes' count, were taken), False at the deadline without a change."""
    changes = ctx.changes
    if changes is not None and await ctx.blocking(_all_watched, wanted, ctx.sources):
        return await _woken(ctx, (changes, seen), wanted, tokens, deadline)
    pause = POLL_SECONDS
    while time.monotonic() < deadline:
        await asyncio.sleep(min(pause, max(deadline - time.monotonic(), 0)))
        began = time.monotonic()
        if await ctx.blocking(_tokens, wanted, ctx.sources) != tokens:
            return True
        took = time.monotonic() - began
        pause = max(POLL_SECONDS, took * (1 / POLL_SHARE - 1))
    return False


async def _woken(
    ctx: ServeContext, changes_since: tuple[FolderChanges, int], wanted: list[Wanted],
    tokens: list[tuple[int, ...]], deadline: float,
) -> bool:  # fmt: skip
    """:func:`_wait_for_change` where every fetched partition is watched: asleep until some
    watched folder changes, then a look at this fetch's own partitions; after a change
    elsewhere, the next look no sooner than :data:`POLL_SHARE` allows (a busy writer of other
    partitions costs a waiting fetch what looking every time would, at most)."""
    changes, since = changes_since
    while True:
        if not await changes.wait(since, deadline - time.monotonic()):
            return False
        since = changes.version  # before the look: a change after it wakes the next wait
        began = time.monotonic()
        if await ctx.blocking(_tokens, wanted, ctx.sources) != tokens:
            return True
        took = time.monotonic() - began
        await asyncio.sleep(min(took * (1 / POLL_SHARE - 1), max(deadline - time.monotonic(), 0)))


def _all_watched(wanted: list[Wanted], sources: Sources) -> bool:
    return all(
        sources.bounds.watched(partition_view.folder(w.log_dir, w.topic.name, w.partition))
        for w in wanted
        if w.log_dir is not None and w.topic is not None
    )


Result = FetchedPartition | ErrorCode | None


def _read_all(
    wanted: list[Wanted], max_bytes: int, committed: bool, sources: Sources
) -> list[Result]:
    """Each partition's answer (None: not in the log dirs; an error code: fenced), within the
    response's byte limit."""
    results: list[Result] = []
    used = 0
    for w in wanted:
        log_dir = w.log_dir
        if log_dir is None or w.topic is None:
            results.append(None)
            continue
        fenced = sources.epochs.fencing(log_dir, w.topic.name, w.partition,
                                        w.current_leader_epoch)  # fmt: skip
        if fenced != ErrorCode.none:
            results.append(fenced)
            continue
        budget = max(min(w.max_bytes, max_bytes - used), 0)
        if used and OPEN_SPANS.count >= MOST_OPEN_SPANS:
            budget = 0  # as past fetch.max.bytes: no records, the client asks again
        found = read_or_error(partition_view.fetch, log_dir, w.topic.name, w.partition,
                              w.offset, budget, committed, used == 0, sources)  # fmt: skip
        if isinstance(found, FetchedPartition):
            used += len(found.records)
        results.append(found)
    return results


def _response(module: Any, wanted: list[Wanted], results: list[Result], committed: bool) -> Any:
    """The partitions in the request's order, a topic entry for each run of one topic's
    partitions, as Kafka's ``FetchResponse.of`` builds it: a request may name a topic twice
    (the Java client rotates its partitions, interleaving topics), and the record spans are
    spliced into the encoded response in request order (``zero_copy.splice``)."""
    runs: list[tuple[Any, list[Any]]] = []
    for w, found in zip(wanted, results, strict=True):
        if not runs or runs[-1][0] != w.key:
            runs.append((w.key, []))
        runs[-1][1].append(_partition(module, w, found, committed))
    topics = tuple(
        build(module.FetchableTopicResponse, topic=key, topic_id=key, partitions=tuple(parts))
        for key, parts in runs
    )
    return build(module.FetchResponse, throttle_time=datetime.timedelta(0),
                 error_code=ErrorCode.none, session_id=0, responses=topics)  # fmt: skip


def _partition(module: Any, w: Wanted, found: Result, committed: bool) -> Any:
    """One partition's answer; aborted transactions are a list for read_committed (maybe
    empty) and null for read_uncommitted, as Kafka sends them."""
    if isinstance(found, ErrorCode):
        return build(module.PartitionData, partition_index=w.partition, error_code=found,
                     high_watermark=-1, aborted_transactions=None, records=b"")  # fmt: skip
    if found is None:
        by_id = not isinstance(w.key, str)  # v13+ names topics by id
        offline = w.topic is not None and w.topic.offline(w.partition)
        unknown = (ErrorCode.unknown_topic_id if by_id and w.topic is None
                   else ErrorCode.kafka_storage_error if offline
                   else ErrorCode.unknown_topic_or_partition)  # fmt: skip
        return build(module.PartitionData, partition_index=w.partition, error_code=unknown,
                     high_watermark=-1, aborted_transactions=None, records=b"")  # fmt: skip
    bounds = found.bounds
    aborted = tuple(
        build(module.AbortedTransaction, producer_id=t.producer_id, first_offset=t.first_offset)
        for t in found.aborted
    ) if committed else None
    return build(
        module.PartitionData, partition_index=w.partition,
        error_code=ErrorCode.offset_out_of_range if found.out_of_range else ErrorCode.none,
        high_watermark=bounds.high_watermark, last_stable_offset=bounds.last_stable,
        log_start_offset=bounds.log_start, aborted_transactions=aborted,
        records=found.records if isinstance(found.records, bytes) else found.records.token,
    )
