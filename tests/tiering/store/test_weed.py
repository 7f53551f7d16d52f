"""The embedded S3 server (``weed mini``) cleans up after itself: a long-running user, and the
test suite, start many (each run used to leave three to five unix sockets in /tmp, and its logs
went to /tmp too)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from kafkatier.tiering.errors import RemoteStoreError
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


SERVE_ONE = """
import sys, time
from pathlib import Path
from kafkatier.tiering.store.weed import weed_server
with weed_server(Path(sys.argv[1])):
    print("ready", flush=True)
    time.sleep(600)
"""


def test_a_server_dies_with_the_command_killed_and_a_held_data_dir_is_one_line(
    tmp_path: Path,
) -> None:
    """A command killed with SIGKILL left its ``weed mini`` running, holding the data dir: every
    later command failed to start its own with twenty lines of a Go stack trace. The server now
    stops with the process that started it; a data dir held all the same is named in one line."""
    data = tmp_path / "s3"
    owner = subprocess.Popen([sys.executable, "-c", SERVE_ONE, str(data)],
                             stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert owner.stdout is not None and owner.stdout.readline().strip() == "ready"
        with pytest.raises(RemoteStoreError) as held, weed_server(data, timeout=30):
            pass
        message = str(held.value)
        assert "another process holds its data dir" in message and "\n" not in message, message
    finally:
        owner.kill()
        owner.wait()
    deadline = time.monotonic() + 10
    while _servers_of(data) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _servers_of(data) == []
    with weed_server(data, timeout=60):  # the data dir is free again
        pass


def _servers_of(data: Path) -> list[str]:
    found = subprocess.run(["pgrep", "-f", "--", f"-logdir={data} "], capture_output=True,
                           text=True, check=False)  # fmt: skip
    return found.stdout.split()
