"""Counting the requests a store sends, by kind, so a user sees what tiering costs.

S3 bills per request, and per-partition requests are what makes an idle sidecar expensive at
thousands of partitions. :class:`RequestCounts` is kept by every store: the S3 store counts each
HTTP attempt botocore sends (retries included, as S3 bills them) under the operation's name
(``GetObject``, ``PutObject``, ``ListObjectsV2``, ``UploadPart``, ...); a store on fsspec counts
its calls under the same names. A pass reads a :meth:`snapshot` before and after and reports the
difference (:func:`since`).
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

GET = "GetObject"
PUT = "PutObject"
HEAD = "HeadObject"
LIST = "ListObjectsV2"
DELETE = "DeleteObject"


class RequestCounts:
    """Thread-safe counts of requests by kind (module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()

    def add(self, kind: str, n: int = 1) -> None:
        with self._lock:
            self._counts[kind] += n

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    def on_send(self, event_name: str = "", **_: Any) -> None:
        """botocore's ``before-send`` hook: ``event_name`` is ``before-send.s3.<Operation>``."""
        self.add(event_name.rsplit(".", 1)[-1])


def since(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """The requests counted between two snapshots, kinds with none left out."""
    return {k: n - before.get(k, 0) for k, n in sorted(after.items()) if n != before.get(k, 0)}
