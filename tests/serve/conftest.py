"""A ``kafkatier serve`` server in this process (serve/thread.py): its own event loop in a
thread, a free port on 127.0.0.1, stopped (connections closed, thread pool shut down) when the
test ends."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kafkatier.serve.config import ServeConfig
from kafkatier.serve.thread import ServeThread


@contextlib.contextmanager
def serving(*log_dirs: Path, **props: str) -> Iterator[int]:
    """Serve ``log_dirs``; yields the bound port. ``props`` are extra settings (dots as __)."""
    settings = {"log.dirs": ",".join(str(d) for d in log_dirs),
                "listeners": "PLAINTEXT://127.0.0.1:0",
                **{k.replace("__", "."): v for k, v in props.items()}}  # fmt: skip
    thread = ServeThread(ServeConfig.from_properties(settings, source="test"))
    thread.start(timeout=10)
    try:
        yield thread.server.bound["PLAINTEXT"]
    finally:
        thread.stop(timeout=10)
        assert not thread.is_alive(), "the server did not stop"


@pytest.fixture
def serve() -> Callable[..., contextlib.AbstractContextManager[int]]:
    return serving
