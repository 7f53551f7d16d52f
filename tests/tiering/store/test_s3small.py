"""s3small: a manifest GET signed and sent beside boto3 answers exactly as GetObject through
boto3 does (bytes, entity tag, no object), on the real server; whatever else it meets (a
refusal, a checksum that does not match) it leaves to boto3."""

from __future__ import annotations

import base64
import zlib

import pytest

from kafkatier.tiering.errors import RemoteStoreError
from kafkatier.tiering.store.s3small import Unanswered, _intact
from kafkatier.tiering.store.s3store import S3Store

KEYS = ["m/manifest.json", "odd names/a b+c=d,e;f~g!h(i)'j*k.json", "ünï/çødé/m.json", "x/%41"]


@pytest.mark.parametrize("transport", ["lean http.client", "botocore session"])
def test_small_gets_answer_as_boto3_does(s3_store: S3Store, transport: str) -> None:
    small = s3_store.small_gets
    assert small is not None
    assert small.lean is not None  # the test server is plain http, no proxy: the lean path
    if transport == "botocore session":
        small.lean = None
    for n, key in enumerate(KEYS):
        etag = s3_store.put_bytes(key, f"manifest {n}".encode() * 50)
        before = s3_store.requests.snapshot().get("GetObject", 0)
        got = small.get(s3_store._key(key))
        assert s3_store.requests.snapshot()["GetObject"] == before + 1
        assert got == (f"manifest {n}".encode() * 50, etag) == s3_store._read(key, {})
        assert s3_store.get_with_etag(key) == got
    assert small.get(s3_store._key("m/absent.json")) is None
    assert s3_store.get_with_etag("m/absent.json") is None is s3_store._read("m/absent.json", {})


def test_what_it_cannot_answer_goes_to_boto3(s3_env, s3_url, monkeypatch) -> None:
    store = S3Store(s3_url, endpoint_url=s3_env.endpoint, region="us-east-1", max_attempts=1)
    store.put_bytes("m/manifest.json", b"{}")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret")
    refused = S3Store(s3_url, endpoint_url=s3_env.endpoint, region="us-east-1", max_attempts=1)
    assert refused.small_gets is not None
    with pytest.raises(Unanswered):
        refused.small_gets.get(refused._key("m/manifest.json"))
    with pytest.raises(RemoteStoreError, match="refused the credentials"):
        refused.get_with_etag("m/manifest.json")  # boto3's answer, as the store's one line


def test_bytes_are_taken_only_when_they_match_the_stored_checksum() -> None:
    body = b'{"segments": []}'
    crc = base64.b64encode(zlib.crc32(body).to_bytes(4, "big")).decode()
    assert _intact(body, {"ETag": '"x"'})  # no checksum: nothing to check, as boto3
    assert _intact(body, {"x-amz-checksum-crc32": crc, "x-amz-checksum-type": "FULL_OBJECT"})
    assert not _intact(body[:-1] + b"]", {"x-amz-checksum-crc32": crc})
    assert _intact(body, {"X-Amz-Checksum-Crc32C": "AAAAAA==-3"})  # composite: not checked
    assert not _intact(body, {"x-amz-checksum-crc64nvme": "AAAAAAAAAAA="})  # boto3 decides
