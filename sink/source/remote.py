"""Remote segments for the ``kafkatier`` data source: a topic whose older segments the tiering
sidecar moved to the remote store (and local retention deleted) reads as one log.

With the remote options (:data:`REMOTE_OPTIONS`, the sidecar's own property names, or
``kafkatier.config`` naming the sidecar's properties file) the planner also lists partitions
that exist only remotely, ``earliest`` is the remote log start (the manifest's, which remote
retention moves) and timestamps resolve over the remote segments first; an executor reads the
offsets below the partition's *local* log start, as it is when the task runs, from the remote
``log`` objects in ranged GETs, and the rest from the local files. Only FINISHED segments up to
the first gap count (``PartitionManifest.contiguous``). Everything remote is below the LSO
(the sidecar uploads nothing else), so it adds no open transaction; aborted ones come from the
remote ``txnindex`` objects.

A reader reads one log dir (``path``): a partition kept in another log dir of the same writer
but tiered to the same store looks remote-only here, and reads up to its remote end.

The store travels to the executors pickled inside each task: settings only (URL, endpoint,
region, profile); credentials come from each process's AWS chain, never from options, and no
message names them.
"""

from __future__ import annotations

import contextlib
import functools
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from kafkatier.storage.checkpoint.metadata import parse_partition_dir_name
from kafkatier.storage.config.internal_topics import matches_pattern
from kafkatier.storage.errors import ConfigError, KafkaTierError
from kafkatier.storage.java_properties import read_properties
from kafkatier.storage.log.bounds import PartitionBounds
from kafkatier.storage.log.readonly import TopicPartition
from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.errors import RemoteStoreError
from kafkatier.tiering.metadata.identity import (
    parse_partition_folder,
    parse_topic_folder,
)
from kafkatier.tiering.metadata.manifest import MANIFEST_NAME
from kafkatier.tiering.read.incarnation import incarnation_of
from kafkatier.tiering.read.remote_reader import RemoteLogReader
from kafkatier.tiering.store.object_store import ObjectStore

CONFIG_OPTION = "kafkatier.config"
URL_OPTION = "remote.storage.url"
_SETTINGS = {
    "remote.storage.s3.endpoint.url": "endpoint_url",
    "remote.storage.s3.region": "region",
    "remote.storage.s3.profile": "profile",
}
REMOTE_OPTIONS = (URL_OPTION, *_SETTINGS, CONFIG_OPTION)


@dataclass(frozen=True)
class RemoteSettings:
    """Where the remote copy is; ``origin`` is the option errors name (the URL's, or
    ``kafkatier.config`` when the URL came from the sidecar's file)."""

    url: str
    endpoint_url: str | None = None
    region: str | None = None
    profile: str | None = None
    origin: str = URL_OPTION
    log_dirs: tuple[str, ...] = ()

    def error(self, problem: str) -> ConfigError:
        return ConfigError(f"kafkatier option {self.origin!r}: {problem}", setting=self.origin)

    def open_store(self) -> ObjectStore:
        """The store (a ``file://`` root must exist; a missing bucket shows at the first listing,
        which planning always makes: :func:`remote_partitions`)."""
        config = TieringConfig(
            log_dirs=(), remote_url=self.url, endpoint_url=self.endpoint_url,
            region=self.region, profile=self.profile,
        )  # fmt: skip
        with self.errors():
            store = config.open_store()
            parsed = urlparse(self.url)
            if parsed.scheme == "file" and not Path(parsed.path).is_dir():
                raise FileNotFoundError(f"{parsed.path} is not a directory")
        return store

    @contextlib.contextmanager
    def errors(self) -> Iterator[None]:
        """Store failures as a ConfigError naming the option (type and message only: botocore's
        messages carry no credentials)."""
        try:
            yield
        except RemoteStoreError as exc:  # the store the option names cannot be used
            raise self.error(str(exc)) from None
        except ConfigError as exc:  # a URL no store takes (``TieringConfig.open_store``)
            raise self.error(f"{exc.message}: {self.url}") from None
        except KafkaTierError:
            raise  # already typed and named (a manifest, a segment object, a record)
        except Exception as exc:
            raise self.error(
                f"cannot read the remote store {self.url}: {type(exc).__name__}: {exc}"
            ) from None


def parse_remote(opts: dict[str, str]) -> RemoteSettings | None:
    """The remote settings from the options (explicit options override the file's)."""
    values: dict[str, str | None] = {}
    origin = URL_OPTION
    log_dirs: tuple[str, ...] = ()
    if opts.get(CONFIG_OPTION, "").strip():
        path = opts[CONFIG_OPTION].strip()
        try:
            config = TieringConfig.load(Path(path))
        except (OSError, KafkaTierError) as exc:
            raise ConfigError(
                f"kafkatier option {CONFIG_OPTION!r}: cannot use {path}: {exc}",
                setting=CONFIG_OPTION,
            ) from None
        values = {"url": config.remote_url, "endpoint_url": config.endpoint_url,
                  "region": config.region, "profile": config.profile}  # fmt: skip
        if not opts.get("remote.storage.s3.endpoint.url", "").strip():
            _refuse_embedded(Path(path))
        origin = CONFIG_OPTION
        log_dirs = tuple(str(d) for d in config.log_dirs)
    if opts.get(URL_OPTION, "").strip():
        values["url"], origin = opts[URL_OPTION].strip(), URL_OPTION
    for name, attr in _SETTINGS.items():
        if opts.get(name, "").strip():
            values[attr] = opts[name].strip()
    url = values.get("url")
    if not url:
        if any(name in opts for name in _SETTINGS):
            raise ConfigError(
                f"kafkatier option {URL_OPTION!r}: required with {', '.join(_SETTINGS)}",
                setting=URL_OPTION,
            )
        return None
    return RemoteSettings(
        url, values.get("endpoint_url"), values.get("region"), values.get("profile"),
        origin=origin, log_dirs=log_dirs,
    )  # fmt: skip


def _refuse_embedded(path: Path) -> None:
    """A configuration whose store is the embedded S3 server, which runs only inside the
    kafkatier command that starts it (a free port, keys of its own): the reader went to AWS's
    S3 endpoint for the bucket the URL names instead."""
    embedded = read_properties(path).get("remote.storage.embedded", "").strip().lower()
    if embedded == "true":
        raise ConfigError(
            f"kafkatier option {CONFIG_OPTION!r}: {path} sets remote.storage.embedded=true: that "
            "S3 server, its endpoint and its credentials exist only inside the kafkatier "
            "command that starts it; point the reader at a store it can reach (the option "
            "'remote.storage.s3.endpoint.url', with that store's AWS credentials)",
            setting=CONFIG_OPTION,
        )


_LISTINGS: dict[tuple[object, ...], tuple[float, list[TopicPartition]]] = {}


def remote_partitions(
    settings: RemoteSettings,
    store: ObjectStore,
    topics: Iterable[str] | None,
    pattern: str | None,
    *,
    max_age_s: float = 0,
) -> list[TopicPartition]:
    """Partitions with a manifest: one listing per subscribed topic (its prefix), or of the
    whole store for a pattern. The store's contract lists every object under a prefix, segment
    objects included, so a streaming query, which plans every trigger, reuses a listing for
    ``max_age_s``: a partition is new to the remote store only once it was local, where the
    reader finds it meanwhile."""
    key = (settings, None if topics is None else tuple(sorted(topics)), pattern)
    listed = _LISTINGS.get(key)
    if listed is not None and time.monotonic() - listed[0] < max_age_s:
        return listed[1]
    found = _list_partitions(settings, store, topics, pattern)
    _LISTINGS[key] = (time.monotonic(), found)
    return found


def _list_partitions(
    settings: RemoteSettings,
    store: ObjectStore,
    topics: Iterable[str] | None,
    pattern: str | None,
) -> list[TopicPartition]:
    regex = None if pattern is None else re.compile(pattern)
    prefixes = [f"{t}-" for t in topics] if topics is not None else [""]
    found: set[TopicPartition] = set()
    with settings.errors():
        for prefix in prefixes:
            for info in store.list(prefix):
                parsed = _manifest_partition(info.key)
                if parsed is None:
                    continue
                if (topics is not None and parsed[0] in topics) or (
                    regex is not None and matches_pattern(regex, parsed[0])
                ):
                    found.add(parsed)
    return sorted(found)


def _manifest_partition(key: str) -> TopicPartition | None:
    """(topic, partition) of a manifest key, in either layout (``tiering.metadata.identity``):
    ``<topic>-<topicId>/<partition>/manifest.json`` or ``<topic>-<partition>/manifest.json``."""
    parts = key.split("/")
    if len(parts) == 3 and parts[2] == MANIFEST_NAME:
        folder = parse_topic_folder(parts[0])
        number = parse_partition_folder(parts[1])
        return None if folder is None or number is None else (folder[0], number)
    if len(parts) == 2 and parts[1] == MANIFEST_NAME:
        return parse_partition_dir_name(parts[0])
    return None


def remote_reader(
    settings: RemoteSettings,
    store: ObjectStore,
    log_dir: str | Path,
    tp: TopicPartition,
    chunk_bytes: int,
) -> RemoteLogReader:
    """The partition's remote segments as its manifest lists them now: of the incarnation
    whose topic id the partition directory under ``log_dir`` records, else of the only one the
    store holds (``tiering.read.incarnation``); never another topic's under the same name."""
    with settings.errors():
        rp, manifest = incarnation_of(store, Path(log_dir), *tp,
                                      hint="read from a log dir that holds the topic")
        return RemoteLogReader(store, rp, manifest=manifest, chunk_bytes=chunk_bytes)


@functools.lru_cache(maxsize=16)
def store_for(settings: RemoteSettings) -> ObjectStore:
    """One store per settings and process (a streaming query plans every trigger)."""
    return settings.open_store()


def earliest(remote: RemoteLogReader, local_start: int | None) -> int:
    """The partition's log start over both tiers: the lower of the first remote and the local
    log start, but never below the manifest's log start (which remote retention moves, and
    which Kafka's log start follows)."""
    first = remote.first_offset
    starts = [s for s in (first, local_start) if s is not None]
    return max(min(starts, default=remote.log_start_offset), remote.log_start_offset)


def joined_bounds(local: PartitionBounds | None, remote: RemoteLogReader) -> PartitionBounds:
    """One partition's bounds over its remote and local segments. The ends are the local ones:
    everything remote is below the local LSO, except for a partition with no local directory,
    which ends where the remote does."""
    below = local.log_start if local is not None else remote.end_offset
    remote_bytes = sum(s.size for s in remote.segments if s.base_offset < below)
    if local is None:
        return PartitionBounds(earliest(remote, None), remote.end_offset, remote.end_offset,
                               size_bytes=remote_bytes)  # fmt: skip
    return PartitionBounds(
        earliest(remote, local.log_start),
        max(local.high_watermark, remote.end_offset),
        max(local.last_stable, remote.end_offset),
        local.aborted,
        local.size_bytes + remote_bytes,
    )
