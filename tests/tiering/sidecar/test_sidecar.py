"""The sidecar process: --once, the watched loop with metrics and SIGTERM, and status."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tier_fixtures import append_more, only, write_tiered

from kafkatier.cli.main import main
from kafkatier.storage.log.readonly import ReadOnlyPartition
from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.metadata.local import LocalPartition
from kafkatier.tiering.metadata.manifest_store import ManifestStore
from kafkatier.tiering.sidecar.status import collect_status, partition_status
from kafkatier.tiering.store.object_store import FsspecStore


def write_conf(path: Path, logs: Path, url: str, **extra: object) -> Path:
    lines = [f"log.dirs={logs}", f"remote.storage.url={url}", "remote.log.orphan.grace.ms=0"]
    lines += [f"{k}={v}" for k, v in extra.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def sidecar_cmd(conf: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "kafkatier.cli.main", "sidecar", "--config", str(conf), *extra]


def _finished(store: FsspecStore, partition: int = 0) -> int:
    return len(ManifestStore(store).load(only(store, "tiered", partition))[0].finished())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_once_then_status(tmp_path, capsys) -> None:
    logs = write_tiered(tmp_path / "logs", partitions=2)
    store = FsspecStore(f"file://{tmp_path / 'remote'}")
    conf = write_conf(tmp_path / "sidecar.properties", logs, store.url)
    assert main(["sidecar", "--config", str(conf), "--once"]) == 0
    assert _finished(store, 0) > 0 and _finished(store, 1) > 0
    capsys.readouterr()
    assert main(["status", "--config", str(conf), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["topic"], r["partition"]) for r in rows] == [("tiered", 0), ("tiered", 1)]
    for row in rows:
        assert row["lag_segments"] == 0 and row["lag_bytes"] == 0
        with ReadOnlyPartition(logs, "tiered", row["partition"]) as part:
            assert row["remote_end"] == part.active_segment.base_offset
            assert row["local_end"] == part.log_end_offset()
        assert row["remote_start"] == 0 and row["remote_segments"] == row["local_segments"] - 1
    append_more(logs, "tiered", 0, steps=20, start=200)
    assert main(["status", "--config", str(conf)]) == 0
    text = capsys.readouterr().out
    assert "tiered-0" in text and "lag" in text
    lagging = next(line for line in text.splitlines() if line.startswith("tiered-0"))
    assert lagging.split()[-1] != "0"  # lag bytes after new rolls


def test_status_from_listings_is_status_from_opened_partitions(tmp_path) -> None:
    """``status`` reads sizes and ends from listings and the last segment's headers; the
    sidecar's view opens every segment: both see the same, lag, open transaction and all."""
    logs = write_tiered(tmp_path / "logs", partitions=3, overrides={"segment.bytes": "1200"})
    store = FsspecStore(f"file://{tmp_path / 'remote'}")
    conf = write_conf(tmp_path / "sidecar.properties", logs, store.url)
    assert main(["sidecar", "--config", str(conf), "--once"]) == 0
    append_more(logs, "tiered", 1, steps=9, start=400)  # rolls: lag
    config = TieringConfig.load(conf)
    opened = []
    for p in range(3):
        with LocalPartition(logs, "tiered", p) as part:
            remote, _ = ManifestStore(store).find("tiered", p, part.topic_id())
            opened.append(partition_status(part, store, remote))
    assert collect_status(config, store) == opened
    assert opened[1].lag_segments > 0 and len({s.local_end for s in opened}) > 1


def test_status_imports_neither_spark_nor_the_decoder(tmp_path) -> None:
    """What ``kafkatier status`` pays at start-up: its own module's imports only."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "kafkatier.cli.main",
                           "status", "--config", str(tmp_path / "none.properties")],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2 and "none.properties" in done.stderr
    imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    assert "kafkatier.tiering.sidecar.status" in imported
    assert not {"pyspark", "numba", "pyarrow", "kafkatier.cli.run"} & imported


def test_bad_config_is_a_usage_error(tmp_path) -> None:
    conf = tmp_path / "bad.properties"
    conf.write_text("log.dirs=/x\nremote.storage.url=file:///y\nno.such.key=1\n")
    assert main(["sidecar", "--config", str(conf), "--once"]) == 2


def test_watched_loop_uploads_new_rolls_serves_metrics_and_stops_on_sigterm(tmp_path) -> None:
    logs = write_tiered(tmp_path / "logs")
    store = FsspecStore(f"file://{tmp_path / 'remote'}")
    port = _free_port()
    conf = write_conf(tmp_path / "sidecar.properties", logs, store.url,
                      **{"remote.log.manager.task.interval.ms": 600_000,
                         "remote.log.metrics.port": port})
    proc = subprocess.Popen(sidecar_cmd(conf, "--log-format", "json"),
                            stderr=subprocess.PIPE, text=True)
    try:
        _wait(lambda: _finished(store) > 0, proc)
        before = _finished(store)
        append_more(logs, "tiered", 0, steps=20, start=300)  # rolls: inotify wakes the loop
        _wait(lambda: _finished(store) > before, proc)
        body = _wait_metrics(port, proc)
        assert "kafkatier_tier_segments_uploaded_total" in body
        assert 'kafkatier_tier_upload_lag_bytes{topic="tiered",partition="0"}' in body
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    logs_out = proc.stderr.read() if proc.stderr else ""
    first = json.loads(logs_out.splitlines()[0])
    assert {"ts", "level", "logger", "msg"} <= set(first)


def _wait(condition, proc: subprocess.Popen, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        time.sleep(0.1)
    raise AssertionError("condition not reached in time")


def _wait_metrics(port: int, proc: subprocess.Popen) -> str:
    found: list[str] = []

    def fetch() -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                found.append(r.read().decode())
                return "kafkatier_tier_passes_total 0" not in found[-1]
        except OSError:
            return False

    _wait(fetch, proc)
    return found[-1]


def test_sidecar_runs_with_the_environment_credentials_only(tmp_path, s3_env, s3_url) -> None:
    logs = write_tiered(tmp_path / "logs")
    conf = write_conf(tmp_path / "s.properties", logs, s3_url,
                      **{"remote.storage.s3.endpoint.url": s3_env.endpoint,
                         "remote.storage.s3.region": "us-east-1"})
    env = {**os.environ, **s3_env.env}
    done = subprocess.run(sidecar_cmd(conf, "--once"), env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert s3_env.env["AWS_SECRET_ACCESS_KEY"] not in done.stderr + done.stdout
