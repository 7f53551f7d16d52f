"""``kafkatier demo`` (what ``make run`` runs) writes, reopens, reads back and verifies."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kafkatier.cli.main import main


def test_demo_reads_back_every_committed_row_and_verifies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = 2000
    assert main(["demo", "--dir", str(tmp_path / "logs"), "--records", str(rows)]) == 0
    out = capsys.readouterr().out
    committed = [int(n) for n in re.findall(r"(\d+) records read_committed", out)]
    uncommitted = [int(n) for n in re.findall(r"(\d+) read_uncommitted", out)]
    assert len(committed) == 3
    # every sample row plus one committed 5-row transaction per partition; aborted rows only
    # in read_uncommitted
    assert sum(committed) == rows + 3 * 5
    assert sum(uncommitted) == rows + 3 * 10
    assert "verify: clean" in out
    assert (tmp_path / "logs" / ".kafka_cleanshutdown").exists()


def test_demo_runs_twice_on_the_same_dir(tmp_path: Path) -> None:
    target = str(tmp_path / "logs")
    assert main(["demo", "--dir", target, "--records", "100"]) == 0
    assert main(["demo", "--dir", target, "--records", "100"]) == 0
