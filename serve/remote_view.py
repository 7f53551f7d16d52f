"""The remote tier of a partition, for offsets below its local log start: segments the sidecar
copied to the remote store and local retention then deleted.

A partition's ``RemoteLogReader`` (tiering/read/remote_reader.py: its manifest, the cached
``index``/``timeindex`` objects, ranged GETs of :data:`CHUNK_BYTES` of the ``log`` object,
whose rest the server's :class:`~kafkatier.tiering.read.chunk_cache.ChunkCache` keeps for the
consumer's next fetches) is kept for
:data:`REFRESH_S` seconds, then built again from a fresh manifest, so the segments the sidecar
uploads or remote retention deletes show within seconds. At most :data:`MAX_READERS` are
kept (least recently used dropped). Everything here blocks on the store: the thread pool runs it.

A store that cannot be read (unreachable, refused, a manifest that does not parse) is logged
once per partition and :data:`REFRESH_S`, and local reads never wait on it. After a failure the
store counts as down for :data:`REFRESH_S`: meanwhile no partition asks it (one request at a
time probes it again after that), so an outage costs one wait on the store's retries and
timeouts per window, not one per partition per window, each holding a thread of the pool
that every request shares. Where the sidecar
left its copy of the partition's manifest (``kafkatier-remote-manifest``), that copy gives the
log start and the remote range meanwhile, and a fetch of an offset only the store holds gets
KAFKA_STORAGE_ERROR, which clients retry, as Kafka's broker keeps its log start when remote
storage fails; without one the partition is served from its local segments alone.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from pathlib import Path

from kafkatier.storage.checkpoint.metadata import partition_dir_name
from kafkatier.storage.errors import KafkaTierError
from kafkatier.tiering.errors import RemoteStoreError
from kafkatier.tiering.metadata.identity import RemotePartition, topic_id_of
from kafkatier.tiering.metadata.manifest import PartitionManifest
from kafkatier.tiering.metadata.manifest_store import copied_manifest
from kafkatier.tiering.read.chunk_cache import ChunkCache
from kafkatier.tiering.read.incarnation import incarnation_of
from kafkatier.tiering.read.remote_reader import RemoteLogReader, iter_batch_spans
from kafkatier.tiering.store.object_store import ObjectStore

REFRESH_S = 5.0
MAX_READERS = 1024
CHUNK_BYTES = 4 << 20
"""One ranged GET of a remote segment: four fetches of the default
``max.partition.fetch.bytes``."""
READ_AHEAD_THREADS = 4
"""GETs of the chunk after the one a consumer reads, in flight at once (chunk_cache.py)."""
log = logging.getLogger("kafkatier.serve")
HINT = "serve from a log dir that holds the topic"
RemoteView = tuple[RemotePartition, PartitionManifest]


class RemoteTier:
    """Remote readers of the partitions, by (log dir, topic, partition)."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self._readers: OrderedDict[
            tuple[Path, str, int], tuple[float, RemoteLogReader | None]
        ] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0  # readers found fresh in the cache
        self.loads = 0  # readers built from a fresh manifest
        # Runs of remote segments fetched, for the next fetches, and the next runs read ahead.
        self.chunks = ChunkCache(read_ahead=READ_AHEAD_THREADS)
        self._down_until = 0.0  # monotonic: the store failed, partitions do not ask it until
        self._probing = False  # a load asks the store after a failure: the others do not
        self._checked: dict[tuple[Path, str, int], int] = {}  # local start of the last load

    def close(self) -> None:
        """Stop reading ahead (the server is stopping)."""
        self.chunks.close()

    def reader(
        self, log_dir: Path, topic: str, partition: int, local: tuple[int, int] | None = None
    ) -> RemoteLogReader | None:
        """The partition's remote reader, or None when nothing of it is remote. ``local``:
        the local segments' first offset and the checkpointed log start, as the caller just
        read them (:func:`_behind`)."""
        key = (log_dir, topic, partition)
        with self._lock:
            cached = self._readers.get(key)
            fresh_enough = cached is not None and time.monotonic() - cached[0] < REFRESH_S
            if cached is not None and fresh_enough and not self._behind(key, cached[1], local):
                self._readers.move_to_end(key)
                self.hits += 1
                return cached[1]
        fresh = self._load(log_dir, topic, partition)
        with self._lock:
            self.loads += 1
            if local is not None:
                self._checked[key] = local[0]
            self._readers[key] = (time.monotonic(), fresh)
            while len(self._readers) > MAX_READERS:
                self._checked.pop(self._readers.popitem(last=False)[0], None)
        return fresh

    def _behind(
        self, key: tuple[Path, str, int], cached: RemoteLogReader | None,
        local: tuple[int, int] | None,
    ) -> bool:  # fmt: skip
        """Whether a kept reader is older than the local files just read: they start past
        the checkpointed log start, so the offsets below them are remote, but the reader ends
        before them (the sidecar uploaded more and local retention deleted it since the
        reader was built). Served as it was, a fetch there skipped to the local segments and
        ListOffsets EARLIEST gave the local start: consumers went past records the store
        holds. Loaded again once per local start: a gap a fresh manifest still shows is real
        (remote compaction emptied the last remote segments)."""
        if local is None or local[0] <= local[1] or self._checked.get(key) == local[0]:
            return False
        return cached is None or cached.segments[-1].end_offset + 1 < local[0]

    def _load(self, log_dir: Path, topic: str, partition: int) -> RemoteLogReader | None:
        if not self._may_ask():
            found = _copied(log_dir, topic, partition)
            return None if found is None else self._reader(*found)
        try:
            rp, manifest = incarnation_of(self.store, log_dir, topic, partition, hint=HINT)
        except Exception as exc:  # any store failure: serve the local segments meanwhile
            self._asked(ok=not isinstance(exc, RemoteStoreError))  # the store's, not one key's
            found = _copied(log_dir, topic, partition)
            log.warning("remote store %s unreadable for %s-%d, %s: %s: %s", self.store.url,
                        topic, partition, "serving local segments only" if found is None else
                        "offsets below the local segments answer KAFKA_STORAGE_ERROR until it "
                        "is back", type(exc).__name__, exc)  # fmt: skip
            return None if found is None else self._reader(*found)
        self._asked(ok=True)
        return self._reader(rp, manifest)

    def _may_ask(self) -> bool:
        """Whether this load may ask the store: yes while it answers; after a failure, no
        until :data:`REFRESH_S` has passed, then one load at a time (the probe)."""
        with self._lock:
            if not self._down_until:
                return True
            if self._probing or time.monotonic() < self._down_until:
                return False
            self._probing = True
            return True

    def _asked(self, *, ok: bool) -> None:
        with self._lock:
            self._down_until = 0.0 if ok else time.monotonic() + REFRESH_S
            self._probing = False

    def _reader(self, rp: RemotePartition, manifest: PartitionManifest) -> RemoteLogReader | None:
        fresh = RemoteLogReader(self.store, rp, manifest=manifest,
                                chunk_bytes=CHUNK_BYTES, chunks=self.chunks)  # fmt: skip
        return fresh if fresh.segments else None


def _copied(log_dir: Path, topic: str, partition: int) -> RemoteView | None:
    """The manifest the sidecar last saw, from its copy in the partition directory: with the
    store unreachable, the partition's log start and remote range are still known, so offsets
    only the store holds fail retriably (a reading of them fails) instead of being out of
    range, which sent consumers with ``auto.offset.reset=earliest`` past them for good."""
    directory = Path(log_dir) / partition_dir_name(topic, partition)
    if not directory.is_dir():
        return None
    try:
        return copied_manifest(directory, topic, partition, topic_id_of(directory))
    except (OSError, KafkaTierError):
        return None


def read_remote_run(
    remote: RemoteLogReader, offset: int, end: int, max_bytes: int, min_one: bool
) -> memoryview | None:
    """Whole remote batches holding offsets in [offset, end), at most ``max_bytes`` (one more
    batch when ``min_one``), as stored: the first ranged GET's run, trimmed to batches at or
    after ``offset`` (the index places a read at or before it). A view of the run, not a copy:
    the response is written from it (``zero_copy.MemorySpan``); the headers are read only up
    to the last batch sent. Empty where the first batch is larger than ``max_bytes`` and not
    ``min_one``; None where no remote batch holds an offset in the range (compaction removed
    every record from there on: the caller moves on to the next data, as Kafka does)."""
    for _key, _at, data in remote.byte_runs(offset, end):
        first = stop = -1
        for span in iter_batch_spans(data):  # byte_runs ends the data at the batch covering end - 1
            if span.last_offset < offset:
                continue
            if first < 0:
                first = span.position
            elif span.position + span.size - first > max_bytes:
                break
            stop = span.position + span.size
        if first < 0:
            continue
        if stop - first > max_bytes and not min_one:
            return memoryview(b"")
        return memoryview(data)[first:stop]
    return None
