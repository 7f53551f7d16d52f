"""Every command that talks to the remote store, walked through the store's own faults (no
credentials, credentials refused, endpoint unreachable, bucket missing) and through bad paths:
each answers with one line on stderr naming the store and the cause, exits 1, and prints no
traceback unless asked with ``--debug``."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

import pytest
from tier_fixtures import write_tiered

from kafkatier.cli.main import main
from kafkatier.tiering.config import TieringConfig
from kafkatier.tiering.sidecar.tierer import Tierer
from kafkatier.tiering.store.weed import WeedServer


def _commands(conf: Path, target: Path) -> dict[str, list[str]]:
    return {
        "sidecar": ["sidecar", "--config", str(conf), "--once"],
        "status": ["status", "--config", str(conf)],
        "restore": ["restore", "--config", str(conf), "--topic", "tiered", "--to", str(target),
                    "--quiet"],
        "clean": ["clean", "--remote", "--config", str(conf), "--topic", "tiered"],
        "run": ["run", "--config", str(conf)],  # refused before Spark starts
    }  # fmt: skip


def _conf(tmp_path: Path, logs: Path, url: str, endpoint: str) -> Path:
    conf = tmp_path / "sidecar.properties"
    conf.write_text(f"log.dirs={logs}\nremote.storage.url={url}\n"
                    f"remote.storage.s3.endpoint.url={endpoint}\n"
                    "remote.storage.s3.region=us-east-1\n"
                    "remote.storage.s3.max.attempts=1\n")  # fmt: skip
    return conf


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _no_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def _wrong_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "not-a-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-a-secret")


FAULTS: dict[str, tuple[Callable[[pytest.MonkeyPatch, Path], None], bool, str, str]] = {
    # fault: (environment, use a missing bucket, use a dead endpoint, what the line must say)
    "no credentials": (_no_credentials, False, "", "no usable AWS credentials"),
    "wrong credentials": (_wrong_credentials, False, "", "refused the credentials"),
    "missing bucket": (lambda mp, p: None, True, "", "does not exist at http://127.0.0.1:"),
    "unreachable endpoint": (lambda mp, p: None, False, "dead", "cannot reach http://127.0.0.1:"),
}


@pytest.fixture
def tiered_logs(tmp_path: Path, s3_store, s3_env: WeedServer) -> tuple[Path, str]:  # type: ignore[no-untyped-def]
    """A tiered topic uploaded to the real S3 server (so that restore and status have work)."""
    logs = write_tiered(tmp_path / "logs")
    conf = _conf(tmp_path, logs, s3_store.url, s3_env.endpoint)
    assert Tierer(TieringConfig.load(conf)).run_once().failures == 0
    return logs, s3_store.url


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_each_command_names_the_store_fault_in_one_line(
    fault: str,
    tiered_logs: tuple[Path, str],
    s3_env: WeedServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    environment, missing_bucket, dead, expected = FAULTS[fault]
    logs, url = tiered_logs
    if missing_bucket:
        url = url.replace(f"s3://{s3_env.bucket}/", "s3://no-such-bucket-kt/")
    endpoint = f"http://127.0.0.1:{_free_port()}" if dead else s3_env.endpoint
    conf = _conf(tmp_path, logs, url, endpoint)
    environment(monkeypatch, tmp_path)
    capsys.readouterr()
    for name, argv in _commands(conf, tmp_path / "restored").items():
        assert main(argv) == 1, name
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1, (name, err)
        assert err[0].startswith(f"kafkatier {name}: error: remote store {url}: "), err
        assert expected in err[0], (name, err)
    assert not (tmp_path / "restored").exists() or not any((tmp_path / "restored").iterdir())


def test_debug_shows_the_traceback_after_the_line(
    tiered_logs: tuple[Path, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    logs, url = tiered_logs
    conf = _conf(tmp_path, logs, url, f"http://127.0.0.1:{_free_port()}")
    capsys.readouterr()
    assert main(["--debug", "status", "--config", str(conf)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("kafkatier status: error: remote store ")
    assert "Traceback (most recent call last)" in err
