"""The metrics endpoint's listening address (the rest is exercised by test_sidecar.py)."""

from __future__ import annotations

import socket
import urllib.request

import pytest

from kafkatier.tiering.metrics import Metrics, serve_metrics


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(("host", "expected"), [(None, "127.0.0.1"), ("0.0.0.0", "0.0.0.0")])
def test_metrics_listen_on_the_configured_address(host: str | None, expected: str) -> None:
    server = serve_metrics(Metrics(), _free_port(), host)
    assert server is not None
    try:
        bound, port = server.server_address[:2]
        assert bound == expected
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
            assert reply.status == 200
    finally:
        server.shutdown()
        server.server_close()


def test_metrics_off_serves_nothing() -> None:
    assert serve_metrics(Metrics(), -1, "0.0.0.0") is None
