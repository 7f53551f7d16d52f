"""Fixtures of the tiering tests. The real S3 server (``s3_server``, ``s3_env``, ``s3_url``,
``s3_store``) lives in tests/conftest.py, shared with the Spark reader's remote tests; the
fault-injecting proxy in front of it, and ``store`` (every backend the object-store contract
is run against), are here."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fault_proxy import FaultProxy

from kafkatier.tiering.store.object_store import FsspecStore, ObjectStore
from kafkatier.tiering.store.s3store import S3Store


@pytest.fixture
def proxy(s3_env) -> Iterator[FaultProxy]:  # type: ignore[no-untyped-def]
    server = FaultProxy(int(s3_env.endpoint.rsplit(":", 1)[1]))
    yield server
    server.close()


@pytest.fixture(params=["file", "memory", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    """One store of each backend: fsspec file:// and memory://, and S3 on the real server."""
    if request.param == "file":
        return FsspecStore(f"file://{tmp_path / 'remote'}")
    if request.param == "memory":
        return FsspecStore(f"memory://kt-{uuid.uuid4().hex[:8]}/root")
    result: S3Store = request.getfixturevalue("s3_store")
    return result
