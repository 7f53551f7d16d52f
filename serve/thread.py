"""The server on its own event loop in a daemon thread, for a process that has other work on
its main thread: ``kafkatier run`` (the Spark job) and the tests."""

from __future__ import annotations

import asyncio
import contextlib
import threading

from kafkatier.serve.config import ServeConfig
from kafkatier.serve.server import Server


class ServeThread:
    """:class:`Server` on its own event loop in a daemon thread; :meth:`start` returns once it
    listens (or raises what stopped it: a port in use is a ConfigError naming ``listeners``)."""

    def __init__(self, config: ServeConfig) -> None:
        self.server = Server(config)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._started = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="kafkatier-serve", daemon=True)

    def start(self, timeout: float = 60) -> str | None:
        """Start listening; returns the ``host:port`` of the first advertised PLAINTEXT listener
        (its bound port when it asked for port 0), or None when every listener is secured."""
        self._thread.start()
        if not self._started.wait(timeout):
            raise TimeoutError(f"kafkatier serve did not start within {timeout:.0f} s")
        if self._error is not None:
            raise self._error
        config = self.server.config
        for listener in config.advertised:
            if config.security_of(listener.name).protocol == "PLAINTEXT":
                port = self.server.bound.get(listener.name, listener.port)
                return f"{listener.host}:{port}"
        return None

    def _main(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        try:
            await self.server.start()
        except BaseException as exc:  # handed to start()'s caller
            self._error = exc
            await self.server.stop()
            return
        finally:
            self._started.set()
        try:
            await self._stop.wait()
        finally:
            await self.server.stop()

    def stop(self, timeout: float = 30) -> None:
        if self._loop is not None and self._stop is not None and self._thread.is_alive():
            # A server that failed to start ends its thread by itself; asyncio.run may have
            # closed the loop already while the thread is still alive (its last steps).
            with contextlib.suppress(RuntimeError):  # "Event loop is closed": nothing to stop
                self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout)

    def is_alive(self) -> bool:
        return self._thread.is_alive()
