"""The object-store contract, one suite run against fsspec file://, memory:// and real S3 (the
``store`` fixture, conftest.py)."""

from __future__ import annotations

import hashlib
import os
import pickle
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import botocore.exceptions
import pytest

from kafkatier.tiering.errors import (
    ObjectNotFoundError,
    PreconditionFailedError,
    RemoteStoreError,
    RemoteVerifyError,
)
from kafkatier.tiering.store import s3bucket
from kafkatier.tiering.store.object_store import FsspecStore, ObjectStore
from kafkatier.tiering.store.s3store import S3Store


def test_put_file_then_get_whole_and_ranged(store: ObjectStore, tmp_path: Path) -> None:
    data = os.urandom(300_000)
    src = tmp_path / "src.bin"
    src.write_bytes(data)
    seen: list[int] = []
    info = store.put_file("a/b/seg.log", src, progress=seen.append)
    assert info.size == len(data)
    assert sum(seen) == len(data)
    assert store.get_bytes("a/b/seg.log") == data
    assert store.get_bytes("a/b/seg.log", 1000, 1010) == data[1000:1010]
    assert store.get_bytes("a/b/seg.log", 299_990) == data[299_990:]
    out = tmp_path / "out.bin"
    store.get_file("a/b/seg.log", out)
    assert out.read_bytes() == data


def test_conditional_create_and_update(store: ObjectStore) -> None:
    etag1 = store.put_bytes("m/manifest.json", b"one", if_none_match=True)
    with pytest.raises(PreconditionFailedError):
        store.put_bytes("m/manifest.json", b"two", if_none_match=True)
    etag2 = store.put_bytes("m/manifest.json", b"two", if_match=etag1)
    assert etag2 != etag1
    with pytest.raises(PreconditionFailedError):
        store.put_bytes("m/manifest.json", b"three", if_match=etag1)
    got = store.get_with_etag("m/manifest.json")
    assert got == (b"two", etag2)
    with pytest.raises(PreconditionFailedError):
        store.put_bytes("m/absent.json", b"x", if_match=etag2)


def test_concurrent_conditional_updates_one_winner_each_round(store: ObjectStore) -> None:
    etag = store.put_bytes("c/m", b"0", if_none_match=True)
    wins: list[int] = []

    def attempt(i: int) -> None:
        try:
            store.put_bytes("c/m", f"w{i}".encode(), if_match=etag)
            wins.append(i)
        except PreconditionFailedError:
            pass

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1
    assert store.get_bytes("c/m") == f"w{wins[0]}".encode()


def test_list_by_prefix_and_idempotent_delete(store: ObjectStore) -> None:
    for key in ("p/t-0/a", "p/t-0/b/c", "p/t-1/a", "q/x"):
        store.put_bytes(key, key.encode())
    assert sorted(i.key for i in store.list("p/t-0/")) == ["p/t-0/a", "p/t-0/b/c"]
    assert sorted(i.key for i in store.list("p/")) == ["p/t-0/a", "p/t-0/b/c", "p/t-1/a"]
    assert store.list("nothing/") == []
    store.delete("p/t-0/a")
    store.delete("p/t-0/a")
    store.delete("never/there")
    assert store.head("p/t-0/a") is None
    assert store.head("p/t-1/a") is not None
    with pytest.raises(ObjectNotFoundError):
        store.get_bytes("p/t-0/a")


def test_list_prefixes_names_the_sub_folders_without_their_objects(store: ObjectStore) -> None:
    for key in ("p/t-0/a", "p/t-0/b/c", "p/t-1/x/y/z", "p/top", "p/u-2/m", "q/x", "root"):
        store.put_bytes(key, key.encode())
    assert store.list_prefixes("") == ["p/", "q/"]
    assert store.list_prefixes("p/") == ["p/t-0/", "p/t-1/", "p/u-2/"]
    assert store.list_prefixes("p/t-") == ["p/t-0/", "p/t-1/"]  # a partial name, as S3's Prefix
    assert store.list_prefixes("p/t-0/") == ["p/t-0/b/"]
    assert store.list_prefixes("p/t-1/x/") == ["p/t-1/x/y/"]
    assert store.list_prefixes("p/top/") == []  # an object, not a folder
    assert store.list_prefixes("nothing/") == []
    assert store.list_prefixes("q/") == []


def test_list_prefixes_follows_continuation_pages(
    s3_store: S3Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SeaweedFS's delimiter listing across ListObjectsV2 pages (continuation tokens), with a
    page of two entries: no folder lost or repeated at a page boundary."""
    monkeypatch.setattr(s3bucket, "LIST_PAGE_SIZE", 2)
    folders = [f"f{i}/" for i in range(7)]
    for i, folder in enumerate(folders):
        for n in range(i % 3 + 1):  # some folders with several objects, one loose object
            s3_store.put_bytes(f"{folder}o{n}", b"x")
    s3_store.put_bytes("loose", b"x")
    calls = _count_s3_calls(s3_store)
    assert s3_store.list_prefixes("") == folders
    assert calls["ListObjectsV2"] >= 4  # 7 folders + 1 object, two a page


def _count_s3_calls(store: S3Store) -> Counter[str]:
    """Every S3 operation the store's client sends from now on, by name (botocore's events)."""
    seen: Counter[str] = Counter()

    def count(model: Any, **_: Any) -> None:
        seen[model.name] += 1

    store.client.meta.events.register("before-call.s3", count)
    return seen


def test_store_survives_pickling(store: ObjectStore) -> None:
    store.put_bytes("k", b"v")
    clone = pickle.loads(pickle.dumps(store))
    if isinstance(store, FsspecStore) and store.url.startswith("memory://"):
        assert clone.url == store.url
    assert clone.get_bytes("k") == b"v"


def test_s3_multipart_upload_etag_matches_local_computation(
    s3_store: S3Store, tmp_path: Path
) -> None:
    src = tmp_path / "big.bin"
    src.write_bytes(os.urandom(11 << 20))  # three 5 MiB parts
    info = s3_store.put_file("big/seg.log", src)
    assert info.etag.strip('"').endswith("-3")
    assert info.etag == s3_store.expected_etag(src)
    small = tmp_path / "small.bin"
    small.write_bytes(b"abc")
    assert s3_store.put_file("small", small).etag == s3_store.expected_etag(small)
    assert s3_store.get_bytes("big/seg.log", (5 << 20) - 2, (5 << 20) + 2) == \
        src.read_bytes()[(5 << 20) - 2 : (5 << 20) + 2]


def test_s3_rejects_a_wrong_secret(s3_env, s3_url, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret")
    store = S3Store(s3_url, endpoint_url=s3_env.endpoint, region="us-east-1", max_attempts=1)
    with pytest.raises(RemoteStoreError, match="refused the credentials"):
        store.put_bytes("x", b"y")


def test_put_file_reports_the_sha256_it_sent_and_get_file_the_one_it_wrote(
    store: ObjectStore, tmp_path: Path
) -> None:
    data = os.urandom(200_000)
    src = tmp_path / "src.bin"
    src.write_bytes(data)
    info = store.put_file("h/seg.log", src)
    assert info.sha256 == hashlib.sha256(data).hexdigest()
    out = tmp_path / "out.bin"
    assert store.get_file("h/seg.log", out, size=len(data)) == hashlib.sha256(data).hexdigest()
    assert out.read_bytes() == data


def test_s3_ranged_download_streams_parts_in_order(s3_store: S3Store, tmp_path: Path) -> None:
    data = os.urandom((11 << 20) + 12345)  # two full 5 MiB parts and a short one
    src = tmp_path / "big.bin"
    src.write_bytes(data)
    info = s3_store.put_file("big/seg.log", src)
    assert info.sha256 == hashlib.sha256(data).hexdigest() and info.size == len(data)
    seen: list[int] = []
    out = tmp_path / "out.bin"
    digest = s3_store.get_file("big/seg.log", out, size=len(data), progress=seen.append)
    assert digest == hashlib.sha256(data).hexdigest() and out.read_bytes() == data
    assert sum(seen) == len(data) and len(seen) == 3
    assert s3_store.get_file("big/seg.log", tmp_path / "nosize.bin") == digest  # HEAD first
    for wrong in (len(data) - 1, len(data) + 1):  # the object is not the size the caller said
        with pytest.raises(RemoteVerifyError):
            s3_store.get_file("big/seg.log", tmp_path / "wrong.bin", size=wrong)


class _Tamper:
    """The store's boto3 client with one operation altered on its way: ``request`` edits the
    call's arguments after the store computed its checksums (a flip the transport does not
    catch), ``answer`` edits the server's reply (a server that echoes another checksum, or
    none). Every other call goes to the real client."""

    def __init__(self, client: Any, op: str, request: Any = None, answer: Any = None) -> None:
        self._client, self._op, self._request, self._answer = client, op, request, answer

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._client, name)
        if name != self._op:
            return real

        def call(**kwargs: Any) -> Any:
            if self._request is not None:
                kwargs = self._request(dict(kwargs))
            got = real(**kwargs)
            return got if self._answer is None else self._answer(dict(got))

        return call


def _flip(kwargs: dict[str, Any]) -> dict[str, Any]:
    sent = kwargs["Body"]  # bytes, or the part's stream
    body = bytearray(sent.read() if hasattr(sent, "read") else sent)
    body[len(body) // 2] ^= 0x10
    kwargs["Body"] = bytes(body)
    return kwargs


def _no_crc(kwargs: dict[str, Any]) -> dict[str, Any]:
    kwargs.pop("ChecksumCRC32C", None)
    return kwargs


def _tampered(s3_store: S3Store, op: str, request: Any = None, answer: Any = None) -> S3Store:
    s3_store._client = _Tamper(s3_store.client, op, request, answer)
    return s3_store


def _no_upload_left(store: S3Store, key: str) -> None:
    full = store._key(key)
    assert store.head(key) is None
    uploads = store.client.list_multipart_uploads(Bucket=store.bucket, Prefix=full)
    assert not uploads.get("Uploads"), uploads  # aborted: no stray parts


def test_s3_part_flipped_in_transit_is_refused_and_the_upload_aborted(
    s3_store: S3Store, tmp_path: Path
) -> None:
    src = tmp_path / "big.bin"
    src.write_bytes(os.urandom(11 << 20))
    store = _tampered(s3_store, "upload_part", request=_flip)
    with pytest.raises(botocore.exceptions.ClientError, match="BadDigest"):
        store.put_file("flip/seg.log", src)  # S3 recomputed the CRC32C we sent
    _no_upload_left(store, "flip/seg.log")


def test_s3_answer_naming_another_checksum_is_refused(s3_store: S3Store, tmp_path: Path) -> None:
    src = tmp_path / "big.bin"
    src.write_bytes(os.urandom(11 << 20))

    def other(answer: dict[str, Any]) -> dict[str, Any]:
        answer["ChecksumCRC32C"] = "AAAAAA=="
        return answer

    with pytest.raises(RemoteVerifyError, match="part 1 differs"):
        _tampered(s3_store, "upload_part", answer=other).put_file("echo/seg.log", src)
    _no_upload_left(s3_store, "echo/seg.log")


def test_s3_without_checksum_echo_falls_back_to_the_md5_etag(
    s3_store: S3Store, tmp_path: Path
) -> None:
    """A server that ignores ``x-amz-checksum-crc32c``: the entity tag must be the MD5 of the
    bytes sent, which catches a flip it stored without complaint."""
    src = tmp_path / "small.bin"
    src.write_bytes(os.urandom(100_000))

    def silent(answer: dict[str, Any]) -> dict[str, Any]:
        answer.pop("ChecksumCRC32C", None)
        return answer

    store = _tampered(s3_store, "put_object", request=_no_crc, answer=silent)
    assert store.put_file("quiet/ok", src).etag == s3_store.expected_etag(src)
    store = _tampered(s3_store, "put_object", request=lambda k: _flip(_no_crc(k)), answer=silent)
    with pytest.raises(RemoteVerifyError, match="etag"):
        store.put_file("quiet/flipped", src)
