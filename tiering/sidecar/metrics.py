"""Prometheus text-format metrics of the sidecar, on an optional HTTP port (127.0.0.1 only).

Counters: segments and bytes uploaded, upload failures, local segments/bytes deleted, orphans
removed, remote segments expired (total retention), remote compactions with the records they
removed and the remote bytes before and after, passes, and the requests sent to the object store
by operation (``kafkatier_tier_store_requests_total{operation="GetObject"}``: what tiering costs
at the store's per-request prices). Gauges per partition (as of the last pass that examined it):
upload lag in bytes and segments, remote size in bytes.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Protocol

from kafkatier.tiering.sidecar.status import PartitionStatus

if TYPE_CHECKING:
    from kafkatier.tiering.sidecar.tierer import PassResult

_COUNTERS = {
    "kafkatier_tier_segments_uploaded_total": "uploaded_segments",
    "kafkatier_tier_bytes_uploaded_total": "uploaded_bytes",
    "kafkatier_tier_local_segments_deleted_total": "local_segments_deleted",
    "kafkatier_tier_local_bytes_deleted_total": "local_bytes_deleted",
    "kafkatier_tier_orphans_removed_total": "orphans_removed",
    "kafkatier_tier_remote_segments_expired_total": "remote_segments_expired",
    "kafkatier_tier_remote_compactions_total": "remote_compactions",
    "kafkatier_tier_remote_records_removed_total": "remote_records_removed",
    "kafkatier_tier_remote_compaction_bytes_before_total": "remote_bytes_before_compaction",
    "kafkatier_tier_remote_compaction_bytes_after_total": "remote_bytes_after_compaction",
}
"""Counter name -> the ``PartitionPass`` field it sums over every partition of every pass."""


class Metrics:
    """Thread-safe counters and per-partition gauges, rendered on demand."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counters: dict[str, int] = dict.fromkeys(
            [*_COUNTERS, "kafkatier_tier_upload_failures_total", "kafkatier_tier_passes_total"], 0
        )
        self.requests: dict[str, int] = {}
        self.gauges: dict[str, dict[tuple[str, int], int]] = {
            "kafkatier_tier_upload_lag_bytes": {},
            "kafkatier_tier_upload_lag_segments": {},
            "kafkatier_tier_remote_size_bytes": {},
        }

    def record_pass(self, result: PassResult, statuses: list[PartitionStatus]) -> None:
        with self._lock:
            for name, attr in _COUNTERS.items():
                self.counters[name] += result.total(attr)
            self.counters["kafkatier_tier_upload_failures_total"] += result.failures
            self.counters["kafkatier_tier_passes_total"] += 1
            for kind, n in result.requests.items():
                self.requests[kind] = self.requests.get(kind, 0) + n
            for s in statuses:
                if s.stale:  # another incarnation's leftovers: the gauges are the live topic's
                    continue
                tp = (s.topic, s.partition)
                self.gauges["kafkatier_tier_upload_lag_bytes"][tp] = s.lag_bytes
                self.gauges["kafkatier_tier_upload_lag_segments"][tp] = s.lag_segments
                self.gauges["kafkatier_tier_remote_size_bytes"][tp] = s.remote_bytes

    def count_failure(self) -> None:
        with self._lock:
            self.counters["kafkatier_tier_upload_failures_total"] += 1

    def render(self) -> str:
        lines: list[str] = []
        with self._lock:
            for name, value in self.counters.items():
                lines += [f"# TYPE {name} counter", f"{name} {value}"]
            name = "kafkatier_tier_store_requests_total"
            lines.append(f"# TYPE {name} counter")
            for kind, n in sorted(self.requests.items()):
                lines.append(f'{name}{{operation="{kind}"}} {n}')
            for name, values in self.gauges.items():
                lines.append(f"# TYPE {name} gauge")
                for (topic, partition), value in sorted(values.items()):
                    lines.append(f'{name}{{topic="{topic}",partition="{partition}"}} {value}')
        return "\n".join(lines) + "\n"


class Renders(Protocol):
    """Metrics in Prometheus' text format: the sidecar's, and ``kafkatier serve``'s."""

    def render(self) -> str: ...


def serve_metrics(
    metrics: Renders, port: int, host: str | None = None
) -> ThreadingHTTPServer | None:
    """Serve ``/metrics`` on ``host`` (127.0.0.1 unless given: a container needs 0.0.0.0):``port``
    in a daemon thread (None when port < 0; port 0 takes a free one, ``server_address``)."""
    if port < 0:
        return None

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = metrics.render().encode()
            self.send_response(200 if self.path == "/metrics" else 404)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer((host or "127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
