"""Every benchmark in bench/ starts: its imports resolve from a plain ``python bench/X.py`` (the
README's commands, with no pytest ``pythonpath``) and ``--help`` prints its usage. A script
that imported a test helper without putting its folder on the path (bench/tiering.py's
``tier_fixtures``) failed at its first line for a week before anyone ran it again."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
HELPERS = {  # modules and subprocesses of other benchmarks, not run by hand
    "soak_writer.py", "soak_check.py", "s3_counting.py",
}
SCRIPTS = sorted(
    p.name for p in BENCH.glob("*.py") if not p.name.startswith("_") and p.name not in HELPERS
)


def test_the_scripts_are_found() -> None:
    assert {"compaction.py", "tiering.py", "sink_stream.py"} <= set(SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_benchmark_answers_help(script: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # as the README runs it
    done = subprocess.run(
        [sys.executable, str(BENCH / script), "--help"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage:" in done.stdout
