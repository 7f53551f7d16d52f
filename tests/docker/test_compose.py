"""docker/compose.yaml, checked without an engine: it parses, every path it builds from or mounts
exists, each kafkatier command is one our own parser accepts, and the configuration it mounts is
valid for the loader every command uses. The services are the ones issue 7 names: an S3 server
(MinIO), the job and the sidecar, with credentials only from the environment or a secret."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kafkatier.cli.config.loader import load_config
from kafkatier.cli.main import build_parser

DOCKER = Path(__file__).resolve().parents[2] / "docker"
COMPOSE = DOCKER / "compose.yaml"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(loaded, dict)
    return loaded


def _kafkatier_services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        name: svc for name, svc in compose["services"].items()
        if svc.get("image", "").startswith("kafkatier") or "build" in svc
    }


def test_minio_the_job_the_sidecar_and_serve_are_there(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert services["minio"]["image"].startswith("minio/minio:")
    commands = {name: svc["command"][0] for name, svc in _kafkatier_services(compose).items()}
    assert sorted(commands.values()) == ["run", "serve", "sidecar"], commands


def test_the_build_points_at_the_dockerfile(compose: dict[str, Any]) -> None:
    builds = [svc["build"] for svc in compose["services"].values() if "build" in svc]
    assert len(builds) == 1
    context = (DOCKER / builds[0]["context"]).resolve()
    assert (context / builds[0]["dockerfile"]).is_file()
    assert (context / "pyproject.toml").is_file()


def test_commands_are_accepted_by_kafkatier(compose: dict[str, Any]) -> None:
    for name, svc in _kafkatier_services(compose).items():
        args = build_parser(svc["command"][0]).parse_args(svc["command"])
        assert args.command == svc["command"][0], name


def test_mounted_config_is_valid_and_agrees_with_the_services(compose: dict[str, Any]) -> None:
    for name, svc in _kafkatier_services(compose).items():
        mounts = [v.split(":") for v in svc["volumes"] if v.startswith("./")]
        assert mounts, f"{name} mounts no configuration"
        for host, container, *_ in mounts:
            assert (DOCKER / host).is_file(), f"{name}: {host} missing"
            assert container in svc["command"], f"{name} does not use {container}"
            config = load_config(DOCKER / host)
            assert config.tiering.endpoint_url == "http://minio:9000"
            assert config.embedded_dir is None
            assert config.log_dir.is_absolute()
            assert all(t.config.remote_storage_enable for t in config.topics.values())


def test_the_job_leaves_tiering_to_the_sidecar(compose: dict[str, Any]) -> None:
    job = compose["services"]["job"]
    host = next(v.split(":")[0] for v in job["volumes"] if v.startswith("./"))
    run = load_config(DOCKER / host).run
    assert not run.sidecar and not run.reset and not run.verify


def test_credentials_come_from_a_secret_or_the_environment(compose: dict[str, Any]) -> None:
    for svc in _kafkatier_services(compose).values():
        env = svc.get("environment", {})
        assert "AWS_SECRET_ACCESS_KEY" not in env and "AWS_ACCESS_KEY_ID" not in env
        assert env["AWS_SHARED_CREDENTIALS_FILE"] == "/run/secrets/aws_credentials"
        assert svc["secrets"] == ["aws_credentials"]
    minio_env = compose["services"]["minio"]["environment"]
    assert all(v.startswith("${AWS_") for v in minio_env.values()), "no literal credentials"
    assert "aws-credentials" in (DOCKER.parent / ".gitignore").read_text()


def test_the_sidecar_metrics_port_is_published(compose: dict[str, Any]) -> None:
    sidecar = compose["services"]["sidecar"]
    host = next(v.split(":")[0] for v in sidecar["volumes"] if v.startswith("./"))
    tiering = load_config(DOCKER / host).tiering
    port = tiering.metrics_port
    assert tiering.metrics_host == "0.0.0.0", "127.0.0.1 in a container is unreachable from outside"
    assert f"{port}:{port}" in sidecar["ports"]


def test_serve_listens_where_its_published_port_reaches(compose: dict[str, Any]) -> None:
    """Every interface inside its container, the published port advertised to clients, its
    metrics published; the job does not start a second server on the shared offsets dir."""
    serve = compose["services"]["serve"]
    host = next(v.split(":")[0] for v in serve["volumes"] if v.startswith("./"))
    config = load_config(DOCKER / host)
    listener, advertised = config.serve.listeners[0], config.serve.advertised[0]
    assert listener.binds_all and advertised.host == "localhost"
    assert f"{advertised.port}:{listener.port}" in serve["ports"]
    assert config.serve.metrics_host == "0.0.0.0"
    assert f"{config.serve.metrics_port}:{config.serve.metrics_port}" in serve["ports"]
    assert not config.run.serve, "run.serve.enable=false: serve is its own service"
