"""What every request handler shares: the configuration, the topic catalog, where clients are
told to connect, the thread pool that runs blocking disk reads off the event loop, the group
coordinator and the committed offsets; and, per request, who sent it (:data:`CLIENT`)."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from kafkatier.serve.catalog import Catalog
from kafkatier.serve.changes import FolderChanges
from kafkatier.serve.config import Listener, ServeConfig
from kafkatier.serve.faults import RepeatedWarnings
from kafkatier.serve.group.coordinator import GroupCoordinator
from kafkatier.serve.group.offset_store import OffsetStore
from kafkatier.serve.metrics import ServeMetrics
from kafkatier.serve.partition_view import Sources
from kafkatier.serve.partition_view import bounds as partition_bounds
from kafkatier.serve.remote_topics import RemoteTopics
from kafkatier.serve.remote_view import RemoteTier
from kafkatier.storage.errors import KafkaTierError
from kafkatier.storage.java_properties import read_properties
from kafkatier.storage.log.bounds_cache import BoundsCache
from kafkatier.storage.log.dir_watch import DirectoryWatch
from kafkatier.storage.log.tail_cache import TailCache

T = TypeVar("T")
NODE_ID = 0
"""The one broker's node id."""




@dataclass(frozen=True)
class ClientInfo:
    """The client of the request being handled: its ``client.id``, address and the listener it
    connected to (whose advertised address Metadata and FindCoordinator give back)."""

    client_id: str
    host: str
    listener: str = ""


CLIENT: contextvars.ContextVar[ClientInfo] = contextvars.ContextVar(
    "CLIENT", default=ClientInfo("", "")  # noqa: B039 (frozen: immutable)
)
"""Set by the connection (host) and dispatch (client id) for the handler of each request."""


@dataclass
class ServeContext:
    config: ServeConfig
    executor: ThreadPoolExecutor
    advertised: tuple[Listener, ...]  # ports resolved once bound (a listener on port 0)
    offsets: OffsetStore
    """Committed offsets of every group (``__consumer_offsets`` in ``offsets.log.dir``)."""
    catalog: Catalog = field(init=False)
    cluster_id: str = field(init=False)
    sources: Sources = field(init=False)
    """The local files (with their tail cache) and the remote store, if configured."""
    coordinator: GroupCoordinator = field(init=False)
    metrics: ServeMetrics = field(init=False)
    closes: RepeatedWarnings = field(init=False)
    """Connections closed for a bad request, logged without a flood (``faults``)."""
    changes: FolderChanges | None = field(init=False)
    """What wakes long polls (None: no inotify here; they look for changes themselves)."""

    def __post_init__(self) -> None:
        self.cluster_id = cluster_id(self.config.log_dirs)
        tiering = self.config.tiering
        store = tiering.open_store() if tiering is not None else None
        remote = RemoteTier(store) if store is not None else None
        mirror = RemoteTopics(store) if store is not None else None
        self.catalog = Catalog(self.config.log_dirs, mirror)
        # the partition folders' changes from the kernel: no stat a partition a fetch, and
        # long polls woken by them
        watch = DirectoryWatch.open()
        self.sources = Sources(TailCache(), remote, bounds=BoundsCache(watch=watch))
        self.changes = None if watch is None else FolderChanges(watch, asyncio.get_running_loop())
        self.coordinator = GroupCoordinator(self.config.groups, self.offsets.groups(),
                                            has_offsets=self.offsets.has_offsets)  # fmt: skip
        self.metrics = ServeMetrics()
        self.closes = RepeatedWarnings()
        self.metrics.lags = self.group_lags
        if remote is not None:
            self.metrics.remote_cache = lambda: (remote.hits, remote.loads)
            chunks = remote.chunks
            self.metrics.remote_chunks = lambda: (chunks.hits, chunks.misses, chunks.ahead)

    def group_lags(self) -> dict[tuple[str, str, int], int]:
        """(group, topic, partition) -> high watermark less the committed offset (blocking)."""
        topics = self.catalog.topics()
        lags: dict[tuple[str, str, int], int] = {}
        for group in self.offsets.groups():
            for (topic, partition), value in self.offsets.committed(group).items():
                info = topics.get(topic)
                log_dir = None if info is None else info.partitions.get(partition)
                if log_dir is None or value.offset < 0:
                    continue
                end = partition_bounds(log_dir, topic, partition, self.sources).high_watermark
                lags[(group, topic, partition)] = max(end - value.offset, 0)
        return lags

    def close(self) -> None:
        """Stop watching the partition folders and let go of the remote store."""
        if self.changes is not None:
            self.changes.close()
        watch = self.sources.bounds.watch
        if watch is not None:
            watch.close()
        if self.sources.remote is not None:
            self.sources.remote.close()

    def advertised_for(self, listener: str) -> Listener:
        """Where clients of ``listener`` are told to connect: its advertised entry (bound port
        resolved), so a client never leaves the listener, and security, it came in on."""
        return next((a for a in self.advertised if a.name == listener), self.advertised[0])

    async def blocking(self, func: Callable[..., T], *args: object) -> T:
        """``func(*args)`` in the thread pool, awaited without blocking the loop."""
        return await asyncio.get_running_loop().run_in_executor(self.executor, func, *args)


def cluster_id(log_dirs: tuple[Path, ...]) -> str:
    """``cluster.id`` of the first log dir's ``meta.properties``, else ``kafkatier``."""
    for log_dir in log_dirs:
        try:
            found = read_properties(log_dir / "meta.properties").get("cluster.id", "").strip()
        except (OSError, KafkaTierError):
            continue
        if found:
            return found
    return "kafkatier"
