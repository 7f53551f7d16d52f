"""The import root ``kafkatier`` works from the built wheel, not only from the editable install:
the wheel holds every module of the four top-level folders, subpackages included, and each of
them imports from the unpacked wheel (not from the checkout)."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TOP_LEVEL = ("storage", "sink", "tiering", "cli")


def source_modules() -> list[str]:
    """Every module of the checkout's top-level folders, by its installed name."""
    names = []
    for top in TOP_LEVEL:
        for path in sorted((REPO / top).rglob("*.py")):
            parts = path.relative_to(REPO).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            names.append(".".join(("kafkatier", *parts)))
    return names


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
    for package in TOP_LEVEL:
        assert f"kafkatier/{package}/__init__.py" in names
    in_wheel = {n[:-3] for n in names if n.endswith(".py")}
    missing = [m for m in source_modules() if m.replace(".", "/") not in in_wheel
               and m.replace(".", "/") + "/__init__" not in in_wheel]  # fmt: skip
    assert not missing, f"modules missing from the wheel: {missing}"
    java = [p.relative_to(REPO / "sink").as_posix() for p in (REPO / "sink").rglob("*.java")]
    assert java, "no JVM encoder sources found in sink/java"
    assert all(f"kafkatier/sink/{p}" in names for p in java)  # compiled on first use
    for c_file in ("kernels.c", "kernels.h"):  # the encoder's C kernels, built on first use
        assert f"kafkatier/storage/native/{c_file}" in names
    assert not any(n.startswith(("storage/", "tests/", "bench/")) for n in names)
    entry_points = zipfile.ZipFile(wheel).read(
        next(n for n in names if n.endswith("entry_points.txt"))
    ).decode()
    assert "kafkatier = kafkatier.cli.main:entry" in entry_points


def test_every_module_imports_from_the_unpacked_wheel(wheel: Path, tmp_path: Path) -> None:
    zipfile.ZipFile(wheel).extractall(tmp_path)
    modules = source_modules()
    assert len(modules) > 100  # the walk found the tree
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    print(importlib.import_module(name).__file__)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env,
        cwd=tmp_path,
    ).stdout.split()  # fmt: skip
    assert len(out) == len(modules)
    assert all(path.startswith(str(tmp_path)) for path in out), out
