"""A ``kafkatier serve`` server in this process: its own event loop in a thread, a free port on
127.0.0.1, stopped (connections closed, thread pool shut down) when the test ends."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkatier.serve.config import ServeConfig
from kafkatier.serve.server import Server


@contextlib.contextmanager
def serving(*log_dirs: Path, **props: str) -> Iterator[int]:
    """Serve ``log_dirs``; yields the bound port. ``props`` are extra settings (dots as __)."""
    settings = {"log.dirs": ",".join(str(d) for d in log_dirs),
                "listeners": "PLAINTEXT://127.0.0.1:0",
                **{k.replace("__", "."): v for k, v in props.items()}}  # fmt: skip
    server = Server(ServeConfig.from_properties(settings, source="test"))
    started = threading.Event()
    box: dict[str, Any] = {}

    async def main() -> None:
        box["loop"], box["stop"] = asyncio.get_running_loop(), asyncio.Event()
        try:
            await server.start()
        finally:
            started.set()
        await box["stop"].wait()
        await server.stop()

    thread = threading.Thread(target=lambda: asyncio.run(main()), daemon=True)
    thread.start()
    assert started.wait(10) and server.bound, "the server did not start"
    try:
        yield server.bound["PLAINTEXT"]
    finally:
        box["loop"].call_soon_threadsafe(box["stop"].set)
        thread.join(10)
        assert not thread.is_alive(), "the server did not stop"


@pytest.fixture
def serve() -> Callable[..., contextlib.AbstractContextManager[int]]:
    return serving
