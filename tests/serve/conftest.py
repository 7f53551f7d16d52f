"""A ``kafkatier serve`` server in this process (serve/thread.py): its own event loop in a
thread, a free port on 127.0.0.1, stopped (connections closed, thread pool shut down) when the
test ends."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import pytest
from serve_server import serving


@pytest.fixture
def serve() -> Callable[..., contextlib.AbstractContextManager[int]]:
    return serving
