"""The copy of a local partition's remote manifest kept in its partition directory, so that
``kafkatier status`` shows the remote side of thousands of partitions without a request each.

Kafka's tiered storage does the same: its remote log metadata manager materialises what it
consumed of the remote metadata on the broker's disk, and its tools report from there. Here the
commands that read or commit a manifest through a :class:`~.manifest_store.ManifestCache` made
with these copies (the sidecar's passes, ``kafkatier clean --remote``, ``kafkatier restore``
once a partition is in place) write what they saw into the partition it belongs to (same
topic name, number and topic id); kafkatier's own commands are the only writers of the
manifests, so the copy is what the store holds unless a write of another machine, a lifecycle
rule or a hand changed the store since (``status --refresh`` reads every manifest from the
store).

The file, ``kafkatier-remote-manifest`` (a name neither Kafka's log loader nor kafkatier's
gives a meaning; both leave unknown files alone)::

    {"key": "<manifest key>", "etag": "<entity tag>", "bytes": <length>, "crc32": <of them>}\\n
    <the manifest's bytes, exactly as stored>

Rewritten in place (one ``pwrite`` and a truncate), not renamed over: creating or renaming a
file changes the partition directory's modification time, which a quiet partition's
fingerprint watches (tiering/sidecar/quiet.py), so only the copy's creation costs the sidecar
one more look at the partition. Not fsynced: it is a cache. A copy that cannot be parsed, is
cut short or torn (a reader racing a rewrite: the CRC), or names another key (another topic id)
counts as none, and the reader asks the store. A manifest that does not parse as the one its
key names is never kept: the last good bytes stay, marked ``"superseded": true`` (readers ask
the store, which names the fault; the errors point to these bytes for setting it right). When
a conditional write fails, the copy is emptied before the manifest is read again, so a copy
never outlives the knowledge it was taken from.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import zlib
from pathlib import Path

from kafkatier.storage.checkpoint.metadata import partition_dir_name
from kafkatier.tiering.metadata.identity import (
    parse_partition_folder,
    parse_topic_folder,
    topic_id_of,
)
from kafkatier.tiering.metadata.manifest import MANIFEST_NAME

COPY_NAME = "kafkatier-remote-manifest"

log = logging.getLogger(__name__)


def read_copy(
    partition_dir: Path, key: str, *, superseded: bool = False
) -> tuple[bytes, str] | None:
    """The manifest bytes and entity tag recorded in ``partition_dir`` for ``key``; None when
    there is no usable copy (module docstring), or when the store has since been seen holding
    a manifest that does not parse there, unless ``superseded`` (the last good bytes)."""
    try:
        raw = (Path(partition_dir) / COPY_NAME).read_bytes()
        head, _, data = raw.partition(b"\n")
        meta = json.loads(head)
        intact = meta["bytes"] == len(data) and meta["crc32"] == zlib.crc32(data)
        current = superseded or not meta.get("superseded", False)
        if intact and current and meta["key"] == key and isinstance(meta["etag"], str):
            return data, meta["etag"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


class ManifestCopies:
    """Writes the copies of the manifests of the partitions held in ``log_dirs``."""

    def __init__(self, log_dirs: tuple[Path, ...] | list[Path]) -> None:
        self.log_dirs = [Path(d) for d in log_dirs]
        self._lock = threading.Lock()
        self._written: dict[str, str] = {}  # key -> entity tag of the copy this process wrote
        self._dirs: dict[str, Path] = {}  # key -> the partition directory found for it

    def record(self, key: str, data: bytes | None, etag: str | None) -> None:
        """Keep ``data`` (tagged ``etag``, a manifest its reader checked) as the copy of
        manifest ``key``; a manifest known not to exist empties the copy. Failures are logged
        and ignored: it is a cache."""
        if data is None or etag is None:
            self.forget(key)
            return
        with self._lock:
            if self._written.get(key) == etag:
                return  # an idle pass writes nothing
            directory = self._partition_dir(key)
            if directory is None:
                return
            try:
                _write(directory, key, data, etag)
                self._written[key] = etag
            except OSError as exc:
                log.debug("could not keep the copy of %s in %s: %s", key, directory, exc)

    def supersede(self, key: str) -> None:
        """The store holds a manifest at ``key`` that its readers refuse: the copy keeps the
        last good bytes, marked superseded (module docstring)."""
        with self._lock:
            self._written.pop(key, None)
            directory = self._partition_dir(key)
            last = None if directory is None else read_copy(directory, key, superseded=True)
            if directory is not None and last is not None:
                with contextlib.suppress(OSError):
                    _write(directory, key, last[0], last[1], superseded=True)

    def known(self, key: str) -> bytes | None:
        """The manifest bytes the partition's copy of ``key`` holds; None without a copy."""
        directory = self._partition_dir(key)
        found = None if directory is None else read_copy(directory, key, superseded=True)
        return None if found is None else found[0]

    def forget(self, key: str) -> None:
        """Empty the copy of ``key``: what it recorded is no longer known to hold."""
        with self._lock:
            self._written.pop(key, None)
            directory = self._partition_dir(key)
            path = None if directory is None else directory / COPY_NAME
            if path is not None and path.exists():
                with contextlib.suppress(OSError):  # deleted meanwhile
                    os.truncate(path, 0)

    def _partition_dir(self, key: str) -> Path | None:
        """The local partition directory of manifest ``key`` (name, number and topic id
        alike); None for a legacy key, or when no log dir holds that partition (not
        remembered: a restore may create it later)."""
        found = self._dirs.get(key)
        if found is not None and found.is_dir():
            return found
        self._dirs.pop(key, None)  # deleted since, or never seen: look again
        found = self._find(key)
        if found is not None:
            self._dirs[key] = found
        return found

    def _find(self, key: str) -> Path | None:
        parts = key.split("/")
        if len(parts) != 3 or parts[2] != MANIFEST_NAME:
            return None
        topic, partition = parse_topic_folder(parts[0]), parse_partition_folder(parts[1])
        if topic is None or partition is None:
            return None
        for log_dir in self.log_dirs:
            candidate = log_dir / partition_dir_name(topic[0], partition)
            with contextlib.suppress(OSError):  # unreadable: no copy there
                if candidate.is_dir() and topic_id_of(candidate) == topic[1]:
                    return candidate
        return None


def _write(
    directory: Path, key: str, data: bytes, etag: str, *, superseded: bool = False
) -> None:
    meta: dict[str, object] = {"key": key, "etag": etag, "bytes": len(data),
                               "crc32": zlib.crc32(data)}  # fmt: skip
    if superseded:
        meta["superseded"] = True
    content = json.dumps(meta).encode() + b"\n" + data
    fd = os.open(directory / COPY_NAME, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, content, 0)
        os.ftruncate(fd, len(content))
    finally:
        os.close(fd)
