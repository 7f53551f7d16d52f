"""The layering check of ``make test`` (.ci/check_imports.py): the tree passes it, and it fails,
naming the import at fault, on each kind of fault it exists to catch (trees built in tmp_path)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / ".ci" / "check_imports.py"


def load_checker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_imports", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


checker = load_checker()


def tree(root: Path, files: dict[str, str]) -> Path:
    """A checkout-shaped tree: the four layer folders as packages, plus ``files``."""
    for top in ("storage", "sink", "tiering", "cli"):
        (root / top).mkdir(parents=True, exist_ok=True)
        (root / top / "__init__.py").write_text('"""x."""\n')
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if not (path.parent / "__init__.py").exists():
            (path.parent / "__init__.py").write_text('"""x."""\n')
        path.write_text(textwrap.dedent(text))
    return root


def test_the_checkout_passes() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "no cycles" in done.stdout


CLEAN = {
    "storage/wire.py": "X = 1\n",
    "storage/record/batch.py": "from kafkatier.storage import wire\n",
    "storage/index/offset.py": "from kafkatier.storage.record.batch import wire\n",
    "storage/log/segment.py": "from kafkatier.storage.index.offset import wire\n",
    "tiering/upload.py": "from kafkatier.storage.log.segment import wire\n",
    "sink/source/read.py": "from kafkatier.tiering.upload import wire\n",
    "cli/main.py": "import kafkatier.sink.source.read\n",
}
"""Every layer and a few storage packages, each importing only downward."""


def test_a_clean_tree_passes(tmp_path: Path) -> None:
    assert checker.problems(tree(tmp_path, CLEAN)) == []


def test_a_module_cycle_through_a_lazy_import_fails(tmp_path: Path) -> None:
    root = tree(tmp_path, {
        "storage/log/log.py": "from kafkatier.storage.log.append import check\n",
        "storage/log/append.py": "def check():\n    from kafkatier.storage.log.log import Log\n",
    })  # fmt: skip
    found = checker.problems(root)
    assert any(p.startswith("import cycle between modules") and "storage/log/append.py:2" in p
               for p in found), found  # fmt: skip


def test_a_cycle_under_type_checking_fails(tmp_path: Path) -> None:
    root = tree(tmp_path, {
        "storage/records.py": "from kafkatier.storage.builder import build\n",
        "storage/builder.py": """\
            from typing import TYPE_CHECKING
            if TYPE_CHECKING:
                from kafkatier.storage.records import RecordBatch
            """,
    })  # fmt: skip
    assert any("kafkatier.storage.builder, kafkatier.storage.records" in p
               for p in checker.problems(root))  # fmt: skip


def test_a_cycle_between_packages_fails_without_a_module_cycle(tmp_path: Path) -> None:
    upward = "from kafkatier.storage.log.segment import wire\n"  # index -> log, log -> index
    root = tree(tmp_path, {**CLEAN, "storage/index/time.py": upward})
    found = checker.problems(root)
    assert not any(p.startswith("import cycle between modules") for p in found)
    assert any(p.startswith("import cycle between the parts of kafkatier.storage:")
               and "storage/index/time.py:1" in p for p in found), found  # fmt: skip


@pytest.mark.parametrize(("importer", "imported"), [
    ("tiering/local.py", "kafkatier.sink.source_log"),
    ("storage/log.py", "kafkatier.tiering.store"),
    ("sink/sink.py", "kafkatier.cli.main"),
])  # fmt: skip
def test_an_upward_import_fails(tmp_path: Path, importer: str, imported: str) -> None:
    target = "/".join(imported.split(".")[1:]) + ".py"
    root = tree(tmp_path, {importer: f"import {imported}\n", target: "X = 1\n"})
    found = checker.problems(root)
    assert any(p.startswith(f"{importer}:1: ") and "lower layer" in p for p in found), found
    done = subprocess.run([sys.executable, str(SCRIPT), str(root)], capture_output=True,
                          text=True)  # fmt: skip
    assert done.returncode == 1
    assert f"{importer}:1: " in done.stderr


def test_a_package_init_importing_its_own_modules_is_a_cycle(tmp_path: Path) -> None:
    """``from pkg import module`` runs ``pkg/__init__`` first: an ``__init__`` that imports the
    package's modules, even for type checking only, and those modules import each other."""
    root = tree(tmp_path, {
        "storage/wire.py": "X = 1\n",
        "storage/log/log.py": "from kafkatier.storage import wire\n",
        "storage/__init__.py": """\
            from typing import TYPE_CHECKING
            if TYPE_CHECKING:
                from kafkatier.storage.log.log import Log
            """,
    })  # fmt: skip
    found = checker.problems(root)
    assert any(p.startswith("import cycle between modules: kafkatier.storage, ")
               and "storage/log/log.py:1" in p for p in found), found  # fmt: skip
