"""Small whole objects (manifests) fetched with one signed GET each, beside boto3's pipeline.

``kafkatier status`` and every sidecar pass read one manifest (a few hundred bytes) per
partition. Through boto3 a GET costs about 2 ms of CPU in botocore's request pipeline (endpoint
rules, event hooks, parameter validation, response parsing) under the GIL, which bounds a pass
over thousands of partitions whatever the number of threads: 1,024 manifest GETs took 2.2 s of
CPU through boto3 and 0.7 s signed with botocore's own SigV4 signer and sent through the
client's own HTTP session (its connection pool, proxies, TLS settings and timeouts), measured
side by side against SeaweedFS on this machine.

Over a plain ``http://`` endpoint with no proxy configured (SeaweedFS or MinIO beside the
job), the GET goes out on a keep-alive ``http.client`` connection of the calling thread, signed
here (AWS Signature Version 4, the signing key derived once a day): ``python
bench/status_gets.py 1024`` (status of 1,024 partitions against SeaweedFS, both sides in one
run) gave 1.20 s of CPU this way against 2.25 s through botocore's request objects and session.
Over TLS or through a proxy it goes through the client's own HTTP session, as above.

Only the answers a caller expects are taken from here: 200 (the bytes and the entity tag, as
GetObject gives them) and 404 ``NoSuchKey`` (no object). As boto3 does for GetObject, the
request asks for the object's stored checksum (``x-amz-checksum-mode: ENABLED``) and the bytes
are checked against it (CRC32, CRC32C, SHA-1 or SHA-256; not a multipart object's composite
checksum, which boto3 does not check either): a bit flipped on the way is never taken. Anything
else (a refusal, a redirect, a throttle, a server error, no credentials, a connection error, a
checksum that does not match or of another algorithm) raises :class:`Unanswered` and the caller
sends the request again through boto3, whose retries, checks and errors stay the store's: this
path never decides a failure. It is used only with an explicit endpoint URL (S3-compatible
servers): with AWS's own endpoints, FIPS, dual-stack or access points choose the URL through
botocore's endpoint rules, which this path does not apply. Each GET sent is counted as
``GetObject`` in the store's request counts, as the boto3 hook counts it.
"""

from __future__ import annotations

import base64
import hashlib
import zlib
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest

from kafkatier.storage.record.crc import crc32c
from kafkatier.tiering.store.requests import GET, RequestCounts
from kafkatier.tiering.store.sigv4 import LeanHttp, lean_possible

_NO_SUCH_KEY = b"<Code>NoSuchKey</Code>"


class Unanswered(Exception):
    """An answer this path does not take: boto3 must send the request (module docstring)."""


class SignedGets:
    """GETs of whole small objects of one bucket through a boto3 client's endpoint, HTTP
    session and credentials (module docstring)."""

    def __init__(self, client: Any, session: Any, bucket: str, counts: RequestCounts) -> None:
        self.http = client._endpoint.http_session  # the client's pool, proxies, TLS, timeouts
        self.url = f"{client.meta.endpoint_url.rstrip('/')}/{quote(bucket, safe='')}/"
        self.region = client.meta.region_name or "us-east-1"
        self.credentials = session.get_credentials()
        self.counts = counts
        config = client.meta.config
        self.lean = (
            LeanHttp(self.url, (config.connect_timeout, config.read_timeout))
            if lean_possible(self.url, config.proxies)
            else None
        )

    def get(self, key: str) -> tuple[bytes, str] | None:
        """(bytes, entity tag), or None when there is no such key; :class:`Unanswered` else."""
        if self.credentials is None:
            raise Unanswered  # boto3 says why, in the store's words
        frozen = self.credentials.get_frozen_credentials()
        try:
            if self.lean is not None:
                status, body, headers = self.lean.get(quote(key, safe="/~"), frozen, self.region)
            else:
                status, body, headers = self._session_get(key, frozen)
        except Exception as exc:  # boto3 sends it again and reports what it finds
            raise Unanswered from exc
        finally:
            self.counts.add(GET)
        etag = headers.get("ETag")
        if status == 200 and etag is not None and _intact(body, headers):
            return body, str(etag)
        if status == 404 and _NO_SUCH_KEY in body:
            return None
        raise Unanswered

    def _session_get(self, key: str, frozen: Any) -> tuple[int, bytes, Any]:
        """Signed by botocore, sent through the client's HTTP session."""
        request = AWSRequest(method="GET", url=self.url + quote(key, safe="/~"),
                             headers={"x-amz-checksum-mode": "ENABLED"})  # fmt: skip
        S3SigV4Auth(frozen, "s3", self.region).add_auth(request)
        response = self.http.send(request.prepare())
        return response.status_code, response.content, response.headers


_CHECKSUMS: dict[str, Callable[[bytes], bytes]] = {
    "crc32c": lambda data: crc32c(data).to_bytes(4, "big"),
    "crc32": lambda data: zlib.crc32(data).to_bytes(4, "big"),
    "sha1": lambda data: hashlib.sha1(data).digest(),
    "sha256": lambda data: hashlib.sha256(data).digest(),
}


def _intact(body: bytes, headers: Any) -> bool:
    """Whether ``body`` matches the checksum the response carries (none: nothing to check)."""
    for name, value in headers.items():
        algorithm = name.lower().removeprefix("x-amz-checksum-")
        if algorithm == name.lower() or algorithm in ("mode", "type") or "-" in value:
            continue  # not a checksum, or a multipart object's composite one
        digest = _CHECKSUMS.get(algorithm)
        if digest is None or digest(body) != base64.b64decode(value):
            return False
    return True
