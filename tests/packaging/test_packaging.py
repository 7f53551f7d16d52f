"""The import root ``kafkatier`` works from the built wheel, not only from the editable install."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MODULES = ("kafkatier.storage.records", "kafkatier.sink", "kafkatier.tiering", "kafkatier.cli.main")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(out), str(REPO)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    return next(out.glob("kafkatier-*.whl"))


def test_wheel_maps_top_level_folders_under_kafkatier(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    for package in ("storage", "sink", "tiering", "cli"):
        assert f"kafkatier/{package}/__init__.py" in names
    assert not any(n.startswith(("storage/", "tests/", "bench/")) for n in names)
    entry_points = zipfile.ZipFile(wheel).read(
        next(n for n in names if n.endswith("entry_points.txt"))
    ).decode()
    assert "kafkatier = kafkatier.cli.main:main" in entry_points


def test_modules_import_from_the_unpacked_wheel(wheel: Path, tmp_path: Path) -> None:
    zipfile.ZipFile(wheel).extractall(tmp_path)
    code = (
        "import importlib, sys\n"
        f"for name in {MODULES!r}:\n"
        "    print(importlib.import_module(name).__file__)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env,
        cwd=tmp_path,
    ).stdout.split()  # fmt: skip
    assert len(out) == len(MODULES)
    assert all(path.startswith(str(tmp_path)) for path in out), out
