"""The metrics endpoint's listening address, and the pass counters it exports (the rest is
exercised by test_sidecar.py)."""

from __future__ import annotations

import dataclasses
import socket
import urllib.request

import pytest

from kafkatier.tiering.sidecar.metrics import _COUNTERS, Metrics, serve_metrics
from kafkatier.tiering.sidecar.tierer import PartitionPass, PassResult


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(("host", "expected"), [(None, "127.0.0.1"), ("0.0.0.0", "0.0.0.0")])
def test_metrics_listen_on_the_configured_address(host: str | None, expected: str) -> None:
    server = serve_metrics(Metrics(), _free_port(), host)
    assert server is not None
    try:
        bound, port = server.server_address[:2]
        assert bound == expected
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
            assert reply.status == 200
    finally:
        server.shutdown()
        server.server_close()


def test_metrics_off_serves_nothing() -> None:
    assert serve_metrics(Metrics(), -1, "0.0.0.0") is None


def _samples(text: str) -> dict[str, int]:
    """Unlabelled samples of a Prometheus text rendering, each declared a counter."""
    lines = text.splitlines()
    counters = {
        ln.split()[2] for ln in lines if ln.startswith("# TYPE ") and ln.endswith(" counter")
    }
    found = {}
    for line in lines:
        if not line.startswith("#") and "{" not in line:
            name, value = line.split()
            assert name in counters, name
            found[name] = int(value)
    return found


def test_every_pass_counter_is_exported() -> None:
    """Each count a partition pass reports has a counter (none forgotten when one is added)."""
    fields = dataclasses.fields(PartitionPass)
    counts = [f.name for f in fields if f.type in ("int", int) and f.name != "partition"]
    assert {"remote_compactions", "remote_segments_expired"} <= set(counts)
    assert sorted(_COUNTERS.values()) == sorted(counts)


def test_remote_compaction_and_retention_counters_sum_over_partitions_and_passes() -> None:
    metrics = Metrics()
    first = PassResult(
        [
            PartitionPass(
                "a",
                0,
                remote_compactions=1,
                remote_records_removed=40,
                remote_bytes_before_compaction=9000,
                remote_bytes_after_compaction=5000,
                remote_segments_expired=2,
            ),
            PartitionPass(
                "a",
                1,
                remote_compactions=1,
                remote_records_removed=7,
                remote_bytes_before_compaction=3000,
                remote_bytes_after_compaction=2500,
            ),
        ]
    )
    second = PassResult([PartitionPass("a", 0, remote_segments_expired=3, error="boom")])
    metrics.record_pass(first, [])
    metrics.record_pass(second, [])
    samples = _samples(metrics.render())
    assert samples["kafkatier_tier_remote_compactions_total"] == 2
    assert samples["kafkatier_tier_remote_records_removed_total"] == 47
    assert samples["kafkatier_tier_remote_compaction_bytes_before_total"] == 12000
    assert samples["kafkatier_tier_remote_compaction_bytes_after_total"] == 7500
    assert samples["kafkatier_tier_remote_segments_expired_total"] == 5
    assert samples["kafkatier_tier_upload_failures_total"] == 1
    assert samples["kafkatier_tier_passes_total"] == 2


def test_store_requests_are_counted_by_operation_over_passes() -> None:
    metrics = Metrics()
    metrics.record_pass(PassResult([], requests={"PutObject": 5, "GetObject": 2}), [])
    metrics.record_pass(PassResult([], requests={"PutObject": 3}), [])
    metrics.record_pass(PassResult([]), [])  # an idle pass: nothing sent
    text = metrics.render()
    assert "# TYPE kafkatier_tier_store_requests_total counter" in text
    assert 'kafkatier_tier_store_requests_total{operation="PutObject"} 8' in text
    assert 'kafkatier_tier_store_requests_total{operation="GetObject"} 2' in text
    assert _samples(text)["kafkatier_tier_passes_total"] == 3
