"""The long-running sidecar: tiering passes on file-system events and on a timer.

``watchdog`` (inotify on Linux) watches every log dir recursively; a new or renamed ``.log``,
``.snapshot`` or checkpoint file (a roll, a flush, a writer's checkpoint) wakes the loop, which
waits ``DEBOUNCE_S`` for the burst of related events to settle and then runs a pass. A periodic
rescan every ``remote.log.manager.task.interval.ms`` is the safety net for missed events and for
what happened while the sidecar was down. SIGTERM and SIGINT end the loop after the current
pass; a pass is never cut in the middle by them (SIGKILL is, and the next run converges: see
tiering/copy/upload.py and tiering/copy/orphans.py).
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from types import FrameType

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from kafkatier.storage.cleaner.warm import warming
from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.errors import RemoteStoreError
from kafkatier.tiering.sidecar.metrics import Metrics, serve_metrics
from kafkatier.tiering.sidecar.tierer import PassResult, Tierer
from kafkatier.tiering.store.object_store import ObjectStore

log = logging.getLogger("kafkatier.tiering")
DEBOUNCE_S = 0.1
_INTERESTING = (".log", ".snapshot", "checkpoint", ".properties")


class _Wake(FileSystemEventHandler):
    def __init__(self, event: threading.Event) -> None:
        self.event = event

    def on_any_event(self, event: FileSystemEvent) -> None:
        path = str(getattr(event, "dest_path", "") or event.src_path)
        if event.event_type in ("created", "moved", "closed") and path.endswith(_INTERESTING):
            self.event.set()


class Sidecar:
    """Runs :class:`Tierer` passes until stopped (module docstring)."""

    def __init__(self, config: TieringConfig, store: ObjectStore | None = None) -> None:
        self.config = config
        self.tierer = Tierer(config, store)
        self.metrics = Metrics()
        self.stop_event = threading.Event()
        self.wake_event = threading.Event()
        self.passes = 0

    def run_pass(self) -> PassResult:
        result = self.tierer.run_once()
        self.passes += 1
        self.metrics.record_pass(result, list(self.tierer.statuses.values()))
        requests = ", ".join(f"{n} {kind}" for kind, n in result.requests.items()) or "none"
        log.info("pass %d: %d segments (%d bytes) uploaded, %d local segments deleted, "
                 "%d partitions failed, %d of %d partitions quiet; %.2f s; S3 requests: %s",
                 self.passes, result.total("uploaded_segments"), result.total("uploaded_bytes"),
                 result.total("local_segments_deleted"), result.failures,
                 sum(1 for p in result.partitions if p.skipped), len(result.partitions),
                 result.seconds, requests)  # fmt: skip
        return result

    def run(self, *, on_pass: Callable[[PassResult], None] | None = None) -> None:
        server = serve_metrics(
            self.metrics, self.config.metrics_port, self.config.metrics_host
        )
        observer = Observer()
        for log_dir in self.config.log_dirs:
            if log_dir.is_dir():
                observer.schedule(_Wake(self.wake_event), str(log_dir), recursive=True)
        observer.start()
        try:
            with warming():  # the first compaction finds its kernels compiled
                self._loop(on_pass)
        finally:
            observer.stop()
            observer.join(timeout=10)
            if server is not None:
                server.shutdown()

    def _loop(self, on_pass: Callable[[PassResult], None] | None) -> None:
        while not self.stop_event.is_set():
            self.wake_event.clear()
            try:
                result = self.run_pass()
            except RemoteStoreError as exc:
                if self.passes == 0 and not self.tierer.reached:  # a setting to fix, not to
                    raise  # wait out (an outage after the store answered once is waited out)
                log.error("tiering pass failed; retrying at the next wake-up: %s", exc)
                self.metrics.count_failure()
            except Exception:  # e.g. files vanishing under a concurrent writer: next pass
                log.exception("tiering pass failed; retrying at the next wake-up")
                self.metrics.count_failure()
            else:
                if on_pass is not None:
                    on_pass(result)
            self.wake_event.wait(self.config.interval_ms / 1000)
            if self.wake_event.is_set() and not self.stop_event.is_set():
                self.stop_event.wait(DEBOUNCE_S)

    def stop(self) -> None:
        self.stop_event.set()
        self.wake_event.set()

    def install_signal_handlers(self) -> None:
        def handle(signum: int, frame: FrameType | None) -> None:
            log.info("signal %d: stopping after the current pass", signum)
            self.stop()

        signal.signal(signal.SIGTERM, handle)
        signal.signal(signal.SIGINT, handle)
