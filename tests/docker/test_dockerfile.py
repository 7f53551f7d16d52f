"""What can be checked of docker/ without a Docker engine (this machine has only the client).

The Dockerfile is parsed with dockerfile-parse (the parser of OpenShift's build tools); every
path it copies must exist in the build context, the image must not run as root, and the command
it runs must be a real ``kafkatier`` subcommand line that our own argument parser accepts.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from dockerfile_parse import DockerfileParser

from kafkatier.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "docker" / "Dockerfile"


def _instructions(name: str) -> list[str]:
    parser = DockerfileParser(path=str(DOCKERFILE))
    return [i["value"] for i in parser.structure if i["instruction"] == name]


def test_every_copied_path_exists_in_the_build_context() -> None:
    copies = _instructions("COPY")
    assert copies, "the Dockerfile copies nothing"
    for value in copies:
        sources = shlex.split(value)[:-1]
        for source in sources:
            assert (ROOT / source).exists(), f"COPY {source}: not in the repository root"


def test_the_copied_sources_are_what_setup_packages() -> None:
    copied = {s.rstrip("/") for v in _instructions("COPY") for s in shlex.split(v)[:-1]}
    assert {"pyproject.toml", "setup.py"} <= copied, "the image could not build the package"
    setup = (ROOT / "setup.py").read_text()  # it maps each folder to kafkatier.<folder>
    for folder in ("storage", "sink", "tiering", "serve", "cli"):
        assert f'"{folder}"' in setup, f"setup.py no longer maps {folder}/"
        assert folder in copied, f"the image would lack {folder}/ (kafkatier.{folder})"


def test_the_image_runs_as_a_non_root_user() -> None:
    users = _instructions("USER")
    assert users, "no USER instruction: the image would run as root"
    assert users[-1].split(":")[0] not in {"root", "0"}


def test_the_base_image_has_a_python_the_project_supports() -> None:
    parser = DockerfileParser(path=str(DOCKERFILE))
    base = parser.baseimage
    assert base.startswith("python:"), base
    version = base.split(":")[1].split("-")[0]
    major, minor = (int(p) for p in version.split(".")[:2])
    assert (major, minor) >= (3, 11)
    assert 'requires-python = ">=3.11"' in (ROOT / "pyproject.toml").read_text()


def test_java_17_is_installed_for_spark() -> None:
    assert any("openjdk-17" in run for run in _instructions("RUN"))


@pytest.mark.parametrize("which", ["ENTRYPOINT", "CMD"])
def test_entrypoint_and_command_are_exec_form(which: str) -> None:
    values = _instructions(which)
    assert values and values[-1].lstrip().startswith("["), f"{which} should be exec form (JSON)"


def test_the_default_command_is_accepted_by_kafkatier() -> None:
    import json

    entry = json.loads(_instructions("ENTRYPOINT")[-1])
    cmd = json.loads(_instructions("CMD")[-1])
    assert entry[-1] == "kafkatier", entry
    args = cmd
    if args == ["--help"]:
        with pytest.raises(SystemExit) as stop:
            build_parser().parse_args(args)
        assert stop.value.code == 0
    else:
        assert build_parser().parse_args(args).command


def test_no_credentials_are_baked_into_the_image() -> None:
    text = DOCKERFILE.read_text()
    for name in ("AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=", "AWS_SESSION_TOKEN="):
        assert name not in text
    assert not any(v.startswith("AWS_") for v in _instructions("ARG"))


def test_the_build_context_ignores_the_virtualenv() -> None:
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert ".venv" in ignored and ".git" in ignored
