"""The object-store contract the tiering layer needs, and its fsspec implementation.

Keys are ``/``-separated paths relative to the store's root (the remote URL). The contract is
the small one Aiven's tiered-storage plugin relies on: upload a file (multipart when large),
ranged and whole downloads, conditional put of a small object (create only if absent, update
only if the entity tag still matches: the commit point of every manifest change), listing by
prefix, listing the sub-folders of a folder (S3's ``Delimiter="/"``: the keys below each one are
not paged through) and idempotent delete. Entity tags are opaque strings; a store returns them
with each write and read so the caller can make the next conditional update.

:class:`FsspecStore` serves ``file://``, ``memory://`` and any other fsspec URL (unit tests,
local mirrors). Its entity tag is the MD5 of the content; conditional puts are serialised by a
process lock plus, for local files, an ``fcntl`` lock file, so two processes on one host also
see compare-and-swap semantics. S3 goes through :mod:`kafkatier.tiering.store.s3store`.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from kafkatier.tiering.errors import ObjectNotFoundError, PreconditionFailedError
from kafkatier.tiering.store.requests import DELETE, GET, HEAD, LIST, PUT, RequestCounts

Progress = Callable[[int], None]
"""Called with the number of bytes just transferred (progress bars, rate limits)."""

_LOCK = threading.Lock()


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """What a store knows about one object without reading it."""

    key: str
    size: int
    etag: str
    sha256: str = ""
    """Set by ``put_file`` only: the SHA-256 of the bytes sent, hashed as they were read, when
    the store has also checked the stored copy (size, entity tag) against those bytes."""
    last_modified_ms: int = 0
    """Set by ``list``: when the object was written, by the store's clock."""


class RateLimiter:
    """A token bucket shared by every transfer thread: ``consume`` sleeps to hold the rate."""

    def __init__(self, bytes_per_second: int) -> None:
        self.rate = bytes_per_second
        self._lock = threading.Lock()
        self._next = time.monotonic()

    def consume(self, n: int) -> None:
        if self.rate <= 0 or n <= 0:
            return
        with self._lock:
            now = time.monotonic()
            start = max(self._next, now)
            self._next = start + n / self.rate
            wait = self._next - now
        if wait > 0:
            time.sleep(wait)


class ObjectStore(Protocol):
    """The remote-storage contract (module docstring); implementations must be picklable."""

    url: str
    requests: RequestCounts
    """The requests this store sent, by kind (requests.py)."""

    def put_file(self, key: str, path: Path, *, progress: Progress | None = None) -> ObjectInfo: ...

    def put_bytes(
        self, key: str, data: bytes, *, if_none_match: bool = False, if_match: str | None = None
    ) -> str: ...

    def get_bytes(self, key: str, start: int = 0, end: int | None = None) -> bytes: ...

    def get_with_etag(self, key: str) -> tuple[bytes, str] | None: ...

    def get_file(
        self, key: str, path: Path, *, progress: Progress | None = None, size: int | None = None
    ) -> str | None:
        """Returns the SHA-256 of the bytes written when the store hashed them on the way."""

    def head(self, key: str) -> ObjectInfo | None: ...

    def list_prefixes(self, prefix: str) -> list[str]:
        """The immediate sub-folders of the keys starting with ``prefix``, sorted, each relative
        to the root and ending in ``/`` (``list_prefixes("p/")`` of ``p/a/x``, ``p/a/y/z`` and
        ``p/b`` is ``["p/a/"]``), without listing the objects below them. Every folder holding
        an object is named; a store on a file system may also name a folder emptied by deletes,
        so callers check the object they look for."""

    def list(self, prefix: str) -> list[ObjectInfo]: ...

    def delete(self, key: str) -> None: ...

    def expected_etag(self, path: Path) -> str: ...

    def probe(self) -> None:
        """One cheap request that fails as any would when the store itself cannot be used
        (unreachable, no or refused credentials, no bucket): commands call it before work."""


def md5_etag(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


class FsspecStore:
    """An :class:`ObjectStore` over any fsspec filesystem (module docstring)."""

    def __init__(self, url: str, *, rate_limit_bps: int = 0, **storage_options: Any) -> None:
        self.url = url.rstrip("/")
        self.rate_limit_bps = rate_limit_bps
        self._limiter = RateLimiter(rate_limit_bps)
        self.storage_options = storage_options
        import fsspec  # here: the S3 store's users (status, restore) need none of it

        fs, root = fsspec.core.url_to_fs(self.url, **storage_options)
        self._fs = fs
        self._root = root.rstrip("/")
        self.requests = RequestCounts()

    def __getstate__(self) -> dict[str, Any]:
        return {"url": self.url, "rate": self.rate_limit_bps, "options": self.storage_options}

    def probe(self) -> None:
        self._fs.exists(self._root)  # for a remote fsspec backend: authenticates and connects

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(  # type: ignore[misc]
            state["url"], rate_limit_bps=state["rate"], **state["options"]
        )

    def _path(self, key: str) -> str:
        return f"{self._root}/{key.lstrip('/')}"

    @property
    def _is_local(self) -> bool:
        return "file" in _protocols(self._fs)

    def put_file(self, key: str, path: Path, *, progress: Progress | None = None) -> ObjectInfo:
        self.requests.add(PUT)
        target = self._path(key)
        self._fs.makedirs(target.rsplit("/", 1)[0], exist_ok=True)
        digest, sha, size = hashlib.md5(usedforsecurity=False), hashlib.sha256(), 0
        with open(path, "rb") as src, self._fs.open(target + ".part", "wb") as dst:
            while chunk := src.read(1 << 20):
                self._limiter.consume(len(chunk))
                dst.write(chunk)
                digest.update(chunk)
                sha.update(chunk)
                size += len(chunk)
                if progress is not None:
                    progress(len(chunk))
        self._fs.mv(target + ".part", target)  # the copy is the bytes this process wrote
        return ObjectInfo(key, size, digest.hexdigest(), sha.hexdigest())

    def put_bytes(
        self, key: str, data: bytes, *, if_none_match: bool = False, if_match: str | None = None
    ) -> str:
        self.requests.add(PUT)
        target = self._path(key)
        self._fs.makedirs(target.rsplit("/", 1)[0], exist_ok=True)
        with self._cas_lock(target):
            if if_none_match or if_match is not None:
                current = self._read(key)  # part of this one conditional request
                if if_none_match and current is not None:
                    raise PreconditionFailedError("object already exists", key=key)
                if if_match is not None and (current is None or current[1] != if_match):
                    raise PreconditionFailedError("object changed", key=key)
            with self._fs.open(target + ".part", "wb") as dst:
                dst.write(data)
            self._fs.mv(target + ".part", target)
        return md5_etag(data)

    @contextlib.contextmanager
    def _cas_lock(self, target: str) -> Iterator[None]:
        with _LOCK:
            if not self._is_local:
                yield
                return
            with open(target + ".lock", "a+b") as handle:
                fcntl.flock(handle, fcntl.LOCK_EX)
                try:
                    yield
                finally:
                    fcntl.flock(handle, fcntl.LOCK_UN)

    def get_bytes(self, key: str, start: int = 0, end: int | None = None) -> bytes:
        """Bytes [start, end) of the object (``end`` None: to its end)."""
        self.requests.add(GET)
        try:
            with self._fs.open(self._path(key), "rb") as src:
                src.seek(start)
                return bytes(src.read(-1 if end is None else max(end - start, 0)))
        except FileNotFoundError:
            raise ObjectNotFoundError("no such object", key=key) from None

    def get_with_etag(self, key: str) -> tuple[bytes, str] | None:
        self.requests.add(GET)
        return self._read(key)

    def _read(self, key: str) -> tuple[bytes, str] | None:
        try:
            with self._fs.open(self._path(key), "rb") as src:
                data = bytes(src.read())
        except FileNotFoundError:
            return None
        return data, md5_etag(data)

    def get_file(
        self, key: str, path: Path, *, progress: Progress | None = None, size: int | None = None
    ) -> str:
        """Download to ``path``, returning the bytes' SHA-256; ``size`` is only a hint."""
        self.requests.add(GET)
        sha = hashlib.sha256()
        try:
            with self._fs.open(self._path(key), "rb") as src, open(path, "wb") as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
                    sha.update(chunk)
                    if progress is not None:
                        progress(len(chunk))
        except FileNotFoundError:
            raise ObjectNotFoundError("no such object", key=key) from None
        return sha.hexdigest()

    def head(self, key: str) -> ObjectInfo | None:
        self.requests.add(HEAD)
        try:
            info = self._fs.info(self._path(key))
        except FileNotFoundError:
            return None
        if info.get("type") == "directory":
            return None
        got = self._read(key)  # fsspec has no entity tags: the MD5, as put_bytes answers
        return None if got is None else ObjectInfo(key, int(info["size"]), got[1])

    def list_prefixes(self, prefix: str) -> list[str]:
        """One directory listing of the folder ``prefix`` lies in (its sub-directories)."""
        self.requests.add(LIST)
        folder, _, _ = prefix.rpartition("/")
        base = self._path(folder)
        self._fs.invalidate_cache(base)  # a caching fsspec listing would miss new folders
        try:
            entries = self._fs.ls(base, detail=True)
        except FileNotFoundError:
            return []
        found: set[str] = set()
        for entry in entries:
            name = str(entry["name"]).rstrip("/").rsplit("/", 1)[-1]
            key = f"{folder}/{name}/" if folder else f"{name}/"
            if entry.get("type") == "directory" and key.startswith(prefix):
                found.add(key)
        return sorted(found)

    def list(self, prefix: str) -> list[ObjectInfo]:
        """Every object whose key starts with ``prefix`` (sizes; etags left empty)."""
        self.requests.add(LIST)
        base = self._path(prefix.rsplit("/", 1)[0] if "/" in prefix else "")
        try:
            found = self._fs.find(base, detail=True)
        except FileNotFoundError:
            return []
        result: list[ObjectInfo] = []
        for path, info in sorted(found.items()):
            key = path[len(self._root) + 1 :] if path.startswith(self._root) else path
            key = key.lstrip("/")
            if key.startswith(prefix) and not key.endswith((".part", ".lock")):
                result.append(ObjectInfo(key, int(info["size"]), "", last_modified_ms=_ms(info)))
        return result

    def delete(self, key: str) -> None:
        self.requests.add(DELETE)
        with contextlib.suppress(FileNotFoundError):
            self._fs.rm_file(self._path(key))

    def expected_etag(self, path: Path) -> str:
        """The entity tag ``put_file(path)`` yields: the MD5 of the bytes."""
        digest = hashlib.md5(usedforsecurity=False)
        with open(path, "rb") as src:
            while block := src.read(1 << 20):
                digest.update(block)
        return digest.hexdigest()


def _ms(info: dict[str, Any]) -> int:
    """An fsspec entry's modification time in ms (``mtime``, else ``created``; float or
    datetime by filesystem)."""
    stamp = info.get("mtime", info.get("created", 0))
    seconds = stamp.timestamp() if hasattr(stamp, "timestamp") else float(stamp or 0)
    return int(seconds * 1000)


def _protocols(fs: Any) -> tuple[str, ...]:
    proto = fs.protocol
    return (proto,) if isinstance(proto, str) else tuple(proto)
