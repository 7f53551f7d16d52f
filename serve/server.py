"""The server: one asyncio listener per configured listener, a thread pool for disk reads, the
group coordinator's timers, and a clean stop (listeners closed, open connections cancelled, the
timers stopped, ``__consumer_offsets`` closed cleanly, the pool shut down).

A listener on port 0 takes a free port; the advertised listener of the same name then carries
the bound port, so Metadata points clients back at this server.
"""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import functools
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from http.server import ThreadingHTTPServer

from kafkatier.serve.config import Listener, ServeConfig
from kafkatier.serve.connection import serve_connection
from kafkatier.serve.context import ServeContext
from kafkatier.serve.faults import loop_errors
from kafkatier.serve.group.offset_store import OffsetStore
from kafkatier.storage.errors import ConfigError
from kafkatier.tiering.metadata.local import local_partitions
from kafkatier.tiering.sidecar.metrics import serve_metrics

log = logging.getLogger("kafkatier.serve")
READ_THREADS = 8


class Server:
    def __init__(self, config: ServeConfig) -> None:
        self.config = config
        self.executor = ThreadPoolExecutor(READ_THREADS, thread_name_prefix="kafkatier-serve")
        self._servers: list[asyncio.Server] = []
        self._connections: set[asyncio.Task[None]] = set()
        self._offsets: OffsetStore | None = None
        self._timers: asyncio.Task[None] | None = None
        self._cleaner: asyncio.Task[None] | None = None
        self._expiry: asyncio.Task[None] | None = None
        self._metrics: ThreadingHTTPServer | None = None
        self._ctx: ServeContext | None = None
        self.metrics_port: int | None = None
        """The metrics endpoint's bound port, when there is one."""
        self.bound: dict[str, int] = {}
        """Listener name -> bound port."""

    async def start(self) -> ServeContext:
        config = self.config
        check_dirs(config)
        asyncio.get_running_loop().set_exception_handler(loop_errors)
        self._offsets = await asyncio.get_running_loop().run_in_executor(
            self.executor, lambda: OffsetStore(config.offsets_dir, config.offsets_partitions,
                                               segment_bytes=config.offsets_segment_bytes),
        )  # fmt: skip
        ctx = self._ctx = ServeContext(config, self.executor, config.advertised, self._offsets)
        self._timers = asyncio.create_task(ctx.coordinator.run())
        self._expiry = asyncio.create_task(self._every(
            config.offsets_check_ms, lambda: self._expire(ctx),
            "expiring committed offsets (offsets.retention.minutes)"))
        if config.cleaner_backoff_ms is not None:  # Kafka's log cleaner over its offsets topic
            self._cleaner = asyncio.create_task(self._every(
                config.cleaner_backoff_ms, lambda: ctx.blocking(ctx.offsets.clean),
                f"compacting __consumer_offsets in {config.offsets_dir}"))
        for listener in self.config.listeners:
            try:
                server = await asyncio.start_server(
                    functools.partial(self._accept, ctx, listener.name), listener.host or None,
                    listener.port,
                )
            except OSError as exc:  # a port in use, an address not of this machine
                raise ConfigError(
                    f"cannot listen on {listener.host}:{listener.port}: {_listen_fix(exc)}",
                    setting="listeners",
                    value=f"{listener.name}://{listener.host}:{listener.port}",
                    source=self.config.sources.get("listeners", ""),
                ) from None
            self._servers.append(server)
            self.bound[listener.name] = server.sockets[0].getsockname()[1]
            log.info("listening on %s://%s:%d (%s)", listener.name, listener.host,
                     self.bound[listener.name], config.security_of(listener.name).protocol)
        ctx.advertised = tuple(self._resolved(a) for a in self.config.advertised)
        try:
            self._metrics = serve_metrics(ctx.metrics, config.metrics_port, config.metrics_host)
        except OSError as exc:
            raise ConfigError(
                f"cannot serve metrics on {config.metrics_host}:{config.metrics_port}: "
                f"{os.strerror(exc.errno) if exc.errno else exc}", setting="serve.metrics.port",
            ) from None
        if self._metrics is not None:
            self.metrics_port = self._metrics.server_address[1]
            log.info("metrics on http://%s:%d/metrics", config.metrics_host, self.metrics_port)
        return ctx

    def _resolved(self, advertised: Listener) -> Listener:
        if advertised.port == 0 and advertised.name in self.bound:
            return dataclasses.replace(advertised, port=self.bound[advertised.name])
        return advertised

    async def _accept(self, ctx: ServeContext, listener: str, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:  # fmt: skip
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await serve_connection(ctx, listener, reader, writer)
        except asyncio.CancelledError:
            pass  # stop() ends every connection; asyncio's own callback must not see it raised
        finally:
            self._connections.discard(task)

    async def stop(self) -> None:
        if self._metrics is not None:
            self._metrics.shutdown()
            self._metrics.server_close()
        for server in self._servers:
            server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        for server in self._servers:
            await server.wait_closed()
        tasks = [t for t in (self._timers, self._cleaner, self._expiry) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.executor.shutdown(wait=True, cancel_futures=True)
        if self._ctx is not None:
            self._ctx.close()
        if self._offsets is not None:
            self._offsets.close()

    @staticmethod
    async def _every(ms: int, work: Callable[[], Awaitable[int]], what: str) -> None:
        """``work()`` every ``ms`` milliseconds, logging how many records it removed; a failed
        round is one line, and the next round tries again."""
        while True:
            await asyncio.sleep(ms / 1000)
            try:
                removed = await work()
            except Exception as exc:
                log.error("%s failed: %s", what, exc)
                continue
            if removed:
                log.info("%s: %d records removed", what, removed)

    @staticmethod
    def _expire(ctx: ServeContext) -> Awaitable[int]:
        """The commits of groups without members older than ``offsets.retention.minutes``
        deleted (the group members are read here, on the event loop)."""
        active = frozenset(g for g, group in ctx.coordinator.groups.items() if group.members)
        older_than = ctx.offsets.clock() - ctx.config.offsets_retention_ms
        return ctx.blocking(ctx.offsets.expire, older_than, active.__contains__)

    async def run(self, stop: asyncio.Event) -> None:
        """Serve until ``stop`` is set."""
        try:  # a start that fails half-way (a port in use) still releases what it opened
            await self.start()
            await stop.wait()
        finally:
            await self.stop()


def _listen_fix(exc: OSError) -> str:
    """Why a listener could not bind, and the fix that fits: a port in use wants another port;
    a host that does not resolve or is no address of this machine wants another host."""
    if isinstance(exc, socket.gaierror):
        return (f"the host does not resolve ({exc.strerror or exc}); fix: a host name or address "
                "of this machine in listeners (empty or 0.0.0.0: every interface)")  # fmt: skip
    reason = os.strerror(exc.errno) if exc.errno else str(exc)
    if exc.errno == errno.EADDRINUSE:
        return f"{reason}; fix: another port in listeners (port 0 takes a free one)"
    if exc.errno == errno.EADDRNOTAVAIL:
        return (f"{reason}: the host is no address of this machine; fix: one of its addresses "
                "in listeners (empty or 0.0.0.0: every interface; advertised.listeners names "
                "the address clients use)")  # fmt: skip
    return f"{reason}; fix: another host or port in listeners"


def check_dirs(config: ServeConfig) -> None:
    """Refuse, before listening, a log dir that is not a readable directory and an
    ``offsets.log.dir`` that is not a directory, naming the setting (a broker does not start
    without a usable log dir); a log dir not there yet is served once it appears (the sink or
    a restore may create it), with a warning. Before, such a server listened and then closed
    every client's connection, or failed every commit."""
    sources = config.sources
    for path in config.log_dirs:
        if not path.exists():
            log.warning("log dir %s does not exist: nothing is served from it until it does", path)
            continue
        try:
            os.listdir(path)
        except OSError as exc:
            raise ConfigError(f"cannot read log dir {path}: {exc.strerror or exc}",
                              setting="log.dirs", source=sources.get("log.dirs", "")) from None
    local_partitions(list(config.log_dirs))  # a partition in two of them: refused, as Kafka does
    offsets = config.offsets_dir
    if offsets.exists() and not offsets.is_dir():
        raise ConfigError(f"{offsets} is not a directory", setting="offsets.log.dir",
                          source=sources.get("offsets.log.dir", "")) from None
