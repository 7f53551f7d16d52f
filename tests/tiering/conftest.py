"""Fixtures of the tiering tests. The real S3 server (``s3_server``, ``s3_env``, ``s3_url``,
``s3_store``) lives in tests/conftest.py, shared with the Spark reader's remote tests; the
fault-injecting proxy in front of it is here."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fault_proxy import FaultProxy


@pytest.fixture
def proxy(s3_env) -> Iterator[FaultProxy]:  # type: ignore[no-untyped-def]
    server = FaultProxy(int(s3_env.endpoint.rsplit(":", 1)[1]))
    yield server
    server.close()
