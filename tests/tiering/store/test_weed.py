"""The embedded S3 server (``weed mini``) cleans up after itself: a long-running user, and the
test suite, start many (each run used to leave three to five unix sockets in /tmp, and its logs
went to /tmp too)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import pytest

from kafkatier.tiering.store.weed import SOCKET_DIR, weed_server


def test_a_stopped_server_leaves_no_sockets_or_logs_in_the_temporary_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    temporary = tmp_path / "tmp"  # where its logs went: Go's temporary directory
    temporary.mkdir()
    monkeypatch.setenv("TMPDIR", str(temporary))
    with weed_server(tmp_path / "s3") as server:
        s3_socket = SOCKET_DIR / f"seaweedfs-s3-{urlsplit(server.endpoint).port}.sock"
        assert s3_socket.exists()
    assert not s3_socket.exists()
    assert list(temporary.iterdir()) == []
    assert any(p.name.startswith("weed.") for p in (tmp_path / "s3").iterdir())
