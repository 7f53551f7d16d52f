"""The object-store contract (object_store.py) on S3 through a botocore client
(boto3's, without boto3 itself), configured the standard way.

Settings, client and the requests that move no object data (HEAD, listings, DELETE) live in
s3bucket.py (:class:`~kafkatier.tiering.store.s3bucket.S3Bucket`); this module adds the transfers.
They are the same requests as boto3's managed ``upload_file``/``download_file`` (one PUT or GET
below ``multipart_threshold``, else ``multipart_chunksize`` parts, ``max_concurrency`` in
flight) but stream through s3parts.py, which hashes and verifies on the way. Conditional puts
send ``If-None-Match: *`` / ``If-Match: <etag>`` on PutObject (SeaweedFS 4.x honours both and
answers 412, as AWS S3 does), so a manifest update is a compare-and-swap without any fallback.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from pathlib import Path
from typing import Any

import botocore.exceptions

from kafkatier.tiering.errors import (
    ObjectNotFoundError,
    PreconditionFailedError,
    RemoteVerifyError,
)
from kafkatier.tiering.store.object_store import ObjectInfo, Progress
from kafkatier.tiering.store.s3bucket import S3Bucket, s3_status
from kafkatier.tiering.store.s3parts import (
    FileRange,
    Sent,
    Sink,
    check_answer,
    check_complete,
    crc32c_b64,
    file_etag,
    md5_etag,
    receive_parts,
    send_parts,
)
from kafkatier.tiering.store.s3small import Unanswered

__all__ = ["IO_CHUNK", "S3Store"]

IO_CHUNK = 256 << 10
"""Pieces a ranged download is read in (s3transfer's ``io_chunksize``)."""
_BODY_ERRORS = (
    botocore.exceptions.ReadTimeoutError,
    botocore.exceptions.ResponseStreamingError,
    botocore.exceptions.ConnectionClosedError,
    botocore.exceptions.IncompleteReadError,
    botocore.exceptions.FlexibleChecksumError,
    ConnectionError,
)


class S3Store(S3Bucket):
    """An :class:`~kafkatier.tiering.store.object_store.ObjectStore` on one ``s3://bucket/prefix``
    URL."""

    def put_file(self, key: str, path: Path, *, progress: Progress | None = None) -> ObjectInfo:
        """Upload ``path``, read once: one PutObject below the multipart threshold, else a
        multipart upload of ``multipart_chunksize`` parts, ``max_concurrency`` in flight. Every
        answer is checked against the bytes sent (s3parts.py), so the returned info (with the
        SHA-256 of those bytes) describes a verified copy."""
        size = Path(path).stat().st_size
        if size < self.settings["multipart_threshold"] or size == 0:
            return self._put_small(key, Path(path).read_bytes(), progress)
        full = self._key(key)
        upload_id = self.client.create_multipart_upload(
            Bucket=self.bucket, Key=full, ChecksumAlgorithm="CRC32C"
        )["UploadId"]
        try:
            sent = self._send_parts(key, full, upload_id, Path(path), progress)
            response = self.client.complete_multipart_upload(
                Bucket=self.bucket, Key=full, UploadId=upload_id,
                MultipartUpload={"Parts": [
                    {"PartNumber": n, "ETag": p.etag, "ChecksumCRC32C": p.crc32c}
                    for n, p in enumerate(sent.parts, 1)]},
            )  # fmt: skip
            etag = check_complete(response, sent.parts, key)
        except BaseException:
            with contextlib.suppress(Exception):  # no stray parts left behind
                self.client.abort_multipart_upload(Bucket=self.bucket, Key=full,
                                                   UploadId=upload_id)  # fmt: skip
            raise
        if sent.size != size:
            raise RemoteVerifyError(f"{sent.size} bytes sent of {size}", key=key, file=str(path))
        return ObjectInfo(key, sent.size, etag, sent.sha256)

    def _put_small(self, key: str, data: bytes, progress: Progress | None) -> ObjectInfo:
        self._limiter.consume(len(data))
        crc = crc32c_b64(data)
        response = self.client.put_object(
            Bucket=self.bucket, Key=self._key(key), Body=data, ChecksumCRC32C=crc
        )
        proof = check_answer(response, lambda: md5_etag(data), crc, key, "uploaded object")
        if progress is not None:
            progress(len(data))
        return ObjectInfo(key, len(data), proof.etag, hashlib.sha256(data).hexdigest())

    def _send_parts(
        self, key: str, full: str, upload_id: str, path: Path, progress: Progress | None
    ) -> Sent:
        def send(number: int, body: FileRange, crc: str) -> dict[str, Any]:
            self._limiter.consume(len(body))
            response: dict[str, Any] = self.client.upload_part(
                Bucket=self.bucket, Key=full, UploadId=upload_id, PartNumber=number, Body=body,
                ChecksumCRC32C=crc,
            )  # fmt: skip
            if progress is not None:
                progress(len(body))
            return response

        s = self.settings
        return send_parts(path, s["multipart_chunksize"], s["max_concurrency"], self.pool, send,
                          key)  # fmt: skip

    def put_bytes(
        self, key: str, data: bytes, *, if_none_match: bool = False, if_match: str | None = None
    ) -> str:
        extra: dict[str, str] = {}
        if if_none_match:
            extra["IfNoneMatch"] = "*"
        if if_match is not None:
            extra["IfMatch"] = if_match
        try:
            response = self.client.put_object(
                Bucket=self.bucket, Key=self._key(key), Body=data, **extra
            )
        except botocore.exceptions.ClientError as exc:
            if s3_status(exc) in (409, 412):  # 409: a concurrent conditional write in flight
                raise PreconditionFailedError("conditional put lost", key=key) from None
            raise
        return str(response["ETag"])

    def get_bytes(self, key: str, start: int = 0, end: int | None = None) -> bytes:
        """Bytes [start, end) as one ranged GET (``end`` None: to the end of the object)."""
        extra: dict[str, str] = {}
        if start or end is not None:
            if end is not None and end <= start:
                return b""
            extra["Range"] = _byte_range(start, end)
        got = self._read(key, extra)
        if got is None:
            raise ObjectNotFoundError("no such object", key=key)
        return got[0]

    def get_with_etag(self, key: str) -> tuple[bytes, str] | None:
        """A small object (a manifest) whole: through s3small.py when it can answer."""
        small = self.small_gets
        if small is not None:
            with contextlib.suppress(Unanswered):
                return small.get(self._key(key))
        return self._read(key, {})

    def _read(self, key: str, extra: dict[str, str]) -> tuple[bytes, str] | None:
        got: list[bytes] = []
        etag = self._read_into(key, extra, lambda _pos, data: got.append(data), None)
        return None if etag is None else (b"".join(got), etag)

    def _read_into(
        self, key: str, extra: dict[str, str], sink: Sink, chunk: int | None = IO_CHUNK
    ) -> str | None:
        """GetObject, its body handed to ``sink`` (offset in the body, bytes) in ``chunk``-sized
        pieces (None: one piece), and its entity tag; None when the object does not exist.
        Pieces, as s3transfer reads them: a large body read as one buffer costs a fresh
        allocation, page faults included, every time. botocore retries the request but not a
        body cut short (reset, timeout), so the whole GET is retried here, with backoff (the
        sink sees the offsets again from 0)."""
        attempts = self.settings["max_attempts"]
        for attempt in range(attempts):
            try:
                response = self.client.get_object(Bucket=self.bucket, Key=self._key(key), **extra)
                body, pos = response["Body"], 0
                for piece in [body.read()] if chunk is None else body.iter_chunks(chunk):
                    sink(pos, piece)
                    pos += len(piece)
                return str(response["ETag"])
            except botocore.exceptions.ClientError as exc:
                if s3_status(exc) == 404:
                    return None
                raise
            except _BODY_ERRORS:
                if attempt + 1 == attempts:
                    raise
                time.sleep(min(0.05 * 2**attempt, 2.0))
        raise AssertionError("unreachable")

    def get_file(
        self, key: str, path: Path, *, progress: Progress | None = None, size: int | None = None
    ) -> str:
        """Download to ``path`` and return the SHA-256 of the bytes written (hashed as they
        arrive). ``size``, when known, saves a HEAD: one GET below the multipart threshold,
        else ranged GETs of part size through the shared pool (s3parts.py); an object whose
        size differs from ``size`` fails with :class:`RemoteVerifyError`."""
        if size is None:
            info = self.head(key)
            if info is None:
                raise ObjectNotFoundError("no such object", key=key)
            size = info.size
        if size < self.settings["multipart_threshold"]:
            data = self.get_bytes(key)
            if len(data) != size:
                raise RemoteVerifyError(f"object has {len(data)} bytes, expected {size}", key=key)
            self._limiter.consume(len(data))
            Path(path).write_bytes(data)
            if progress is not None:
                progress(len(data))
            return hashlib.sha256(data).hexdigest()

        def get(start: int, end: int | None, sink: Sink) -> None:
            def counted(pos: int, data: bytes) -> None:
                self._limiter.consume(len(data))
                sink(pos, data)

            if self._read_into(key, {"Range": _byte_range(start, end)}, counted) is None:
                raise ObjectNotFoundError("no such object", key=key)

        s = self.settings
        return receive_parts(Path(path), size, s["multipart_chunksize"], s["max_concurrency"],
                             self.pool, get, key, progress)  # fmt: skip

    def expected_etag(self, path: Path) -> str:
        """The ETag S3 gives ``path`` uploaded with this store's part size: MD5 of the bytes for
        a single PUT, else MD5 of the parts' MD5s with ``-<parts>`` (put_file checks it while
        uploading; this reads the file, for callers holding only a path)."""
        s = self.settings
        return file_etag(Path(path), s["multipart_threshold"], s["multipart_chunksize"])


def _byte_range(start: int, end: int | None) -> str:
    """The HTTP Range of bytes [start, end) (``end`` None: to the end of the object)."""
    return f"bytes={start}-{'' if end is None else end - 1}"
