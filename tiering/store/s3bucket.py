"""One ``s3://bucket/prefix`` through botocore (boto3's engine): its settings, client, and the
requests that move no object data (HEAD, listings, DELETE).
:class:`~kafkatier.tiering.store.s3store.S3Store` adds the transfers on top; this module keeps
the addressing in one place and s3store.py short.

Endpoint, region and addressing style come from the caller (the sidecar config); credentials
come from botocore's usual chain (environment, shared credentials/config files, profile,
instance metadata) and are never read, printed or logged here.

The client and the part pool are created lazily and dropped when pickling: the store
travels in Spark closures and worker processes as its settings alone.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import botocore.exceptions
import botocore.session
from botocore.config import Config

from kafkatier.tiering.store.object_store import ObjectInfo, RateLimiter
from kafkatier.tiering.store.requests import RequestCounts
from kafkatier.tiering.store.s3failures import GuardedClient, translated
from kafkatier.tiering.store.s3small import SignedGets

MIB = 1 << 20
LIST_PAGE_SIZE = 1000
"""Keys (or common prefixes) per ListObjectsV2 page: S3's own maximum; tests lower it."""


class S3Bucket:
    """The settings, client and metadata requests of
    :class:`~kafkatier.tiering.store.s3store.S3Store`
    (module docstring); keys are relative to the URL's prefix, as in the store contract."""

    def __init__(
        self,
        url: str,
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        profile: str | None = None,
        multipart_threshold: int = 8 * MIB,
        multipart_chunksize: int = 8 * MIB,
        max_concurrency: int = 4,
        rate_limit_bps: int = 0,
        max_attempts: int = 5,
        connect_timeout: float = 10,
        read_timeout: float = 60,
    ) -> None:
        if not url.startswith("s3://"):
            raise ValueError(f"not an s3:// URL: {url}")
        self.url = url.rstrip("/")
        bucket, _, prefix = self.url[len("s3://") :].partition("/")
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.settings: dict[str, Any] = {
            "endpoint_url": endpoint_url,
            "region": region,
            "profile": profile,
            "multipart_threshold": multipart_threshold,
            "multipart_chunksize": multipart_chunksize,
            "max_concurrency": max_concurrency,
            "rate_limit_bps": rate_limit_bps,
            "max_attempts": max_attempts,
            "connect_timeout": connect_timeout,
            "read_timeout": read_timeout,
        }
        self._client: Any = None
        self._small: SignedGets | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._limiter = RateLimiter(rate_limit_bps)
        self._client_lock = threading.Lock()
        self.requests = RequestCounts()

    def __getstate__(self) -> dict[str, Any]:
        return {"url": self.url, "settings": self.settings}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["url"], **state["settings"])  # type: ignore[misc]

    def __repr__(self) -> str:  # settings only: credentials never live on this object
        name = type(self).__name__
        return f"{name}({self.url!r}, endpoint_url={self.settings['endpoint_url']!r})"

    @property
    def client(self) -> Any:
        with self._client_lock:
            if self._client is None:
                s = self.settings
                with translated(self.url, self.endpoint):
                    session = _session(s["profile"], s["region"])
                config = Config(
                    retries={"mode": "standard", "max_attempts": s["max_attempts"]},
                    s3={"addressing_style": "path"},
                    max_pool_connections=max(10, s["max_concurrency"] * 4),
                    connect_timeout=s["connect_timeout"],
                    read_timeout=s["read_timeout"],
                )
                with translated(self.url, self.endpoint):
                    client = session.create_client("s3", endpoint_url=s["endpoint_url"],
                                                   config=config)  # fmt: skip
                client.meta.events.register("before-send.s3", self.requests.on_send)
                self._client = GuardedClient(client, self.url, self.endpoint)
                if s["endpoint_url"]:
                    self._small = SignedGets(client, session, self.bucket, self.requests)
            return self._client

    @property
    def endpoint(self) -> str:
        """The endpoint requests go to, as a user would name it in the settings."""
        return self.settings["endpoint_url"] or "the AWS S3 endpoint of the region"

    @property
    def small_gets(self) -> SignedGets | None:
        """Lean GETs of small whole objects (s3small.py), with an explicit endpoint only."""
        return self._small if self.client is not None else None

    @property
    def pool(self) -> ThreadPoolExecutor:
        """The part transfers' workers, shared by every transfer of this store, so that
        ``max_concurrency`` bounds the part requests in flight however many files move."""
        with self._client_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max(self.settings["max_concurrency"], 1),
                                                thread_name_prefix="kt-s3-part")  # fmt: skip
            return self._pool

    def _key(self, key: str) -> str:
        key = key.lstrip("/")
        return f"{self.prefix}/{key}" if self.prefix else key

    def _pages(self, prefix: str, **extra: str) -> Any:
        """ListObjectsV2 pages under ``prefix`` (continuation tokens followed by the paginator)."""
        paginator = self.client.get_paginator("list_objects_v2")
        return paginator.paginate(Bucket=self.bucket, Prefix=self._key(prefix), **extra,
                                  PaginationConfig={"PageSize": LIST_PAGE_SIZE})  # fmt: skip

    def probe(self) -> None:
        """A listing of at most one key under the prefix: an unreachable endpoint, credentials
        missing or refused and a missing bucket all fail it (a HEAD could not tell the bucket)."""
        self.client.list_objects_v2(Bucket=self.bucket, Prefix=self._key(""), MaxKeys=1)

    def head(self, key: str) -> ObjectInfo | None:
        try:
            response = self.client.head_object(Bucket=self.bucket, Key=self._key(key))
        except botocore.exceptions.ClientError as exc:
            if s3_status(exc) == 404:
                return None
            raise
        return ObjectInfo(key, int(response["ContentLength"]), str(response["ETag"]))

    def list_prefixes(self, prefix: str) -> list[str]:
        """ListObjectsV2 with ``Delimiter="/"``: S3 rolls the keys below each sub-folder up into
        one CommonPrefixes entry, so a page covers up to 1000 folders, not their objects."""
        strip = len(self.prefix) + 1 if self.prefix else 0
        found: set[str] = set()
        for page in self._pages(prefix, Delimiter="/"):
            for item in page.get("CommonPrefixes", ()):
                found.add(item["Prefix"][strip:])
        return sorted(found)

    def list(self, prefix: str) -> list[ObjectInfo]:
        strip = len(self.prefix) + 1 if self.prefix else 0
        found: list[ObjectInfo] = []
        for page in self._pages(prefix):
            for item in page.get("Contents", ()):
                when = int(item["LastModified"].timestamp() * 1000)
                found.append(ObjectInfo(item["Key"][strip:], int(item["Size"]), item["ETag"],
                                        last_modified_ms=when))  # fmt: skip
        return found

    def delete(self, key: str) -> None:
        try:
            self.client.delete_object(Bucket=self.bucket, Key=self._key(key))
        except botocore.exceptions.ClientError as exc:
            if s3_status(exc) != 404:
                raise


def s3_status(exc: botocore.exceptions.ClientError) -> int:
    return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))


def _session(profile: str | None, region: str | None) -> Any:
    """A botocore session, as boto3's Session makes one for a client (profile, region, the
    standard credential chain) without importing boto3 and s3transfer, which cost about 0.2 s
    of every command's start-up and give a client nothing kafkatier calls."""
    session = botocore.session.Session(profile=profile)
    if region is not None:
        session.set_config_variable("region", region)
    return session
