"""A partition the server cannot read: answered with its own error code, the request's other
partitions served, as a broker answers a partition whose log dir failed.

Its directory gone between the catalog's listing and the read (a topic deleted or recreated while
consumers read it) is UNKNOWN_TOPIC_OR_PARTITION, which sends the client to its metadata; any other
failure to read it (a file the server may not read, an I/O error, a file that is not what its
name says) is KAFKA_STORAGE_ERROR, logged once per partition and :data:`LOG_EVERY_S` with the
file and the cause. Before, the exception closed the client's connection, so one unreadable
partition starved every healthy one that shared its fetch requests.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import resource
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, TypeVar

from kio.schema.errors import ErrorCode

from kafkatier.storage.checkpoint.metadata import partition_dir_name
from kafkatier.storage.errors import KafkaTierError

log = logging.getLogger("kafkatier.serve")
T = TypeVar("T")
LOG_EVERY_S: Final = 5.0


def read_or_error(
    read: Callable[..., T], log_dir: Path, topic: str, partition: int, *args: Any
) -> T | ErrorCode:  # fmt: skip
    """``read(log_dir, topic, partition, *args)``, or the partition's error code where it
    fails (module doc). A file gone between the listing and its read is read once more, from
    a new listing: the sidecar's local retention removes uploaded segments under readers (the
    read then goes to the remote copy), which Kafka's deferred deletion hides from its own."""
    failure: Exception | None = None
    for _attempt in range(2):
        try:
            return read(log_dir, topic, partition, *args)
        except FileNotFoundError as exc:
            if not (log_dir / partition_dir_name(topic, partition)).is_dir():
                return ErrorCode.unknown_topic_or_partition  # gone, not a file of it unreadable
            failure = exc
        except (OSError, KafkaTierError) as exc:
            failure = exc
            break
    _UNREADABLE.warn((log_dir, topic, partition),
                     "cannot read %s-%d in %s, answering KAFKA_STORAGE_ERROR: %s", topic,
                     partition, log_dir, failure)  # fmt: skip
    return ErrorCode.kafka_storage_error


class RepeatedWarnings:
    """A warning logged once per key and ``every`` seconds, the next one saying how many were
    held back: a client that reconnects and sends the same refused request again (an old
    client's Fetch v3, hundreds of times a second) is one line a minute, not a flood."""

    def __init__(self, every: float = 60.0, most: int = 4096) -> None:
        self.every, self.most = every, most
        self._seen: dict[Any, tuple[float, int]] = {}
        self._lock = threading.Lock()

    def warn(self, key: Any, message: str, *args: Any) -> None:
        now = time.monotonic()
        with self._lock:
            last, held = self._seen.get(key, (-self.every, 0))
            if now - last < self.every:
                self._seen[key] = (last, held + 1)
                return
            if len(self._seen) >= self.most:  # many keys: the oldest are forgotten
                self._seen.clear()
            self._seen[key] = (now, 0)
        more = f" ({held} more since, not logged)" if held else ""
        log.warning(message + "%s", *args, more)


_UNREADABLE = RepeatedWarnings(every=LOG_EVERY_S)
"""Unreadable partitions, one warning per partition and :data:`LOG_EVERY_S`."""


_OUT_OF_FILES: Final = (errno.EMFILE, errno.ENFILE)
_ACCEPTS = RepeatedWarnings()
"""Connections refused for want of descriptors: one warning a minute, however many."""


def loop_errors(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The event loop's exception handler: a connection that cannot be accepted because the
    process is out of descriptors is one line a minute naming the limit (asyncio logged each
    attempt with its traceback: a flood of 400 connections under ``ulimit -n 256`` wrote 4,284
    of them, 25,705 lines, in seconds, while asyncio went on retrying); anything else as
    asyncio's default handler has it."""
    failure = context.get("exception")
    accepting = str(context.get("message", "")).startswith("socket.accept()")
    if accepting and isinstance(failure, OSError) and failure.errno in _OUT_OF_FILES:
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        _ACCEPTS.warn(
            "accept",
            "cannot accept a connection: %s (ulimit -n %d is reached: raise "
            "it, or serve fewer clients at once)",
            os.strerror(failure.errno),
            soft,
        )
        return
    loop.default_exception_handler(context)
