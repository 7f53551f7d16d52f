"""Log dirs the serve tests read: topics ``kafkatier produce`` writes (every codec), and the
transactional sample of tests/sink/source/test_datasource.py (aborted and open transactions)."""

from __future__ import annotations

import json
from pathlib import Path

from kafkatier.cli.main import main as kafkatier

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
PARTITIONS = 3
RECORDS = 240
T0 = 1_700_000_000_000


def produce_codecs(log_dir: Path) -> None:
    """``codec-<name>`` topics of :data:`PARTITIONS` partitions, keys, headers and timestamps
    one second apart, written by ``kafkatier produce``."""
    source = log_dir.parent / "records.jsonl"
    with source.open("w") as out:
        for i in range(RECORDS):
            row = {"key": f"key-{i}", "value": f"value-{i}-" + "x" * (i % 50),
                   "timestamp": T0 + 1000 * i,
                   "headers": [{"key": "n", "value": str(i)}] if i % 3 else []}  # fmt: skip
            out.write(json.dumps(row) + "\n")
    for codec in CODECS:
        code = kafkatier(["produce", str(log_dir), "--topic", f"codec-{codec}", "--input",
                          str(source), "--partitions", str(PARTITIONS), "--compression", codec,
                          "--config", "segment.bytes=8192"])  # fmt: skip
        assert code == 0
