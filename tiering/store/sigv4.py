"""A lean signed GET for s3small.py: AWS Signature Version 4 over a keep-alive ``http.client``
connection of the calling thread, for plain ``http://`` endpoints without a proxy.

The request signed (path-style, no body, so the payload hash is SHA-256 of nothing)::

    GET\\n<bucket/key, URI-encoded as S3 wants: '/' kept, nothing encoded twice>\\n\\n
    host:<host[:port]>\\nx-amz-checksum-mode:ENABLED\\nx-amz-content-sha256:<hash>\\n
    x-amz-date:<YYYYMMDDTHHMMSSZ>\\n[x-amz-security-token:<token>\\n]\\n<signed names>\\n<hash>

signed with the key HMAC(HMAC(HMAC(HMAC("AWS4" + secret, day), region), "s3"), "aws4_request"),
kept per (secret, day, region). Only the bytes of an answer are taken here; what the answer
means is s3small's to decide (and anything else goes to boto3).
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import threading
import time
import urllib.request
from typing import Any
from urllib.parse import urlsplit

_EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


def lean_possible(base_url: str, proxies: dict[str, str] | None) -> bool:
    """Plain HTTP, and no proxy from the client's configuration or the environment."""
    parts = urlsplit(base_url)
    if parts.scheme != "http" or proxies:
        return False
    env = urllib.request.getproxies_environment()
    return "http" not in env or bool(urllib.request.proxy_bypass(parts.hostname or ""))


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


class LeanHttp:
    """Signed GETs under ``base_url`` (``http://host:port/bucket/``), one connection a thread."""

    def __init__(self, base_url: str, timeouts: tuple[float | None, float | None]) -> None:
        parts = urlsplit(base_url)
        self.host = parts.netloc
        self.hostname, self.port = parts.hostname or "", parts.port
        self.prefix = parts.path  # "/<bucket>/", the endpoint's own path before it
        self.timeout = max(t for t in timeouts if t is not None) if any(timeouts) else None
        self._local = threading.local()
        self._keys: dict[tuple[str, str, str], bytes] = {}

    def get(self, quoted_key: str, credentials: Any, region: str) -> tuple[int, bytes, Any]:
        """(status, body, headers: case-insensitive) of the signed GET of ``quoted_key``;
        raises on any failure of the connection (then dropped: the next GET opens anew)."""
        path = self.prefix + quoted_key
        headers = self._signed(path, credentials, region)
        conn = self._connection()
        try:
            conn.request("GET", path, headers=headers)
            response = conn.getresponse()
            body = response.read()
        except BaseException:
            conn.close()
            self._local.conn = None
            raise
        return response.status, body, response.headers

    def _connection(self) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = http.client.HTTPConnection(self.hostname, self.port, timeout=self.timeout)
            self._local.conn = conn
        return conn

    def _signed(self, path: str, credentials: Any, region: str) -> dict[str, str]:
        now = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        headers = {"host": self.host, "x-amz-checksum-mode": "ENABLED",
                   "x-amz-content-sha256": _EMPTY_SHA256, "x-amz-date": now}  # fmt: skip
        if credentials.token:
            headers["x-amz-security-token"] = credentials.token
        names = ";".join(sorted(headers))
        canonical = "\n".join(["GET", path, "", *(f"{n}:{headers[n]}" for n in sorted(headers)),
                               "", names, _EMPTY_SHA256])  # fmt: skip
        scope = f"{now[:8]}/{region}/s3/aws4_request"
        to_sign = "\n".join(["AWS4-HMAC-SHA256", now, scope,
                             hashlib.sha256(canonical.encode()).hexdigest()])  # fmt: skip
        signature = hmac.new(self._key(credentials.secret_key, now[:8], region),
                             to_sign.encode(), hashlib.sha256).hexdigest()  # fmt: skip
        headers["Authorization"] = (
            f"AWS4-HMAC-SHA256 Credential={credentials.access_key}/{scope}, "
            f"SignedHeaders={names}, Signature={signature}"
        )
        return headers

    def _key(self, secret: str, day: str, region: str) -> bytes:
        found = self._keys.get((secret, day, region))
        if found is None:
            found = _hmac(_hmac(_hmac(_hmac(("AWS4" + secret).encode(), day), region), "s3"),
                          "aws4_request")  # fmt: skip
            self._keys = {(secret, day, region): found}  # one day's key at a time
        return found
