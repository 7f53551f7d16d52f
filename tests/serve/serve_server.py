"""A ``kafkatier serve`` server in this process (serve/thread.py): its own event loop in a
thread, a free port on 127.0.0.1, stopped (connections closed, thread pool shut down) when the
block ends."""

from __future__ import annotations

import contextlib
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from kafkatier.serve.config import ServeConfig
from kafkatier.serve.thread import ServeThread


@contextlib.contextmanager
def server_thread(*log_dirs: Path, **props: str) -> Iterator[ServeThread]:
    """Serve ``log_dirs``; yields the running server. ``props`` are extra settings (dots as
    __)."""
    settings = {"log.dirs": ",".join(str(d) for d in log_dirs),
                "listeners": "PLAINTEXT://127.0.0.1:0",
                **{k.replace("__", "."): v for k, v in props.items()}}  # fmt: skip
    thread = ServeThread(ServeConfig.from_properties(settings, source="test"))
    thread.start(timeout=10)
    try:
        yield thread
    finally:
        thread.stop(timeout=10)
        assert not thread.is_alive(), "the server did not stop"


@contextlib.contextmanager
def serving(*log_dirs: Path, **props: str) -> Iterator[int]:
    """:func:`server_thread`, yielding the bound port."""
    with server_thread(*log_dirs, **props) as thread:
        yield thread.server.bound["PLAINTEXT"]


def scrape(port: int) -> dict[str, float]:
    """The samples of a ``/metrics`` page by name and labels, as Prometheus would parse them."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    found = {}
    for line in text.splitlines():
        match = re.fullmatch(r"([a-z_]+(?:\{[^}]*\})?) (-?\d+)", line)
        if match:
            found[match[1]] = float(match[2])
    return found
