"""Benchmark: ``kafkatier status``'s manifest GETs through s3small's lean path (http.client,
SigV4 signed in tiering/store/sigv4.py) beside botocore's request objects and HTTP session.

    python bench/status_gets.py [N]

One topic of N partitions (default 1,024) with one closed segment each, uploaded to the embedded
SeaweedFS server; then ``collect_status(refresh=True)`` (what ``kafkatier status --refresh``
runs after its start-up: every manifest read from the store, not from the copies) in this
process, 6 rounds alternating which side goes first, each with a fresh store. Prints the median
wall and CPU seconds of each side and the command.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "tiering"))
sys.path.insert(0, str(HERE.parent / "tests"))
from tier_fixtures import TIERED, fill  # noqa: E402

from kafkatier.storage.log.directory import LogDirectory  # noqa: E402
from kafkatier.tiering.config import TieringConfig  # noqa: E402
from kafkatier.tiering.sidecar.status import collect_status  # noqa: E402
from kafkatier.tiering.sidecar.tierer import Tierer  # noqa: E402
from kafkatier.tiering.store.weed import weed_server  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description="Status of N tiered partitions.")
    parser.add_argument("n", nargs="?", type=int, default=1024, help="partitions (default 1024)")
    n = parser.parse_args().n
    root = Path(tempfile.mkdtemp(prefix="bench-status-"))
    try:
        bench(root, n)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def bench(root: Path, n: int) -> None:
    with weed_server(root / "s3", bucket="bench-status") as server:
        os.environ.update(server.env)
        logs = root / "logs"
        with LogDirectory(logs) as log_dir:
            log_dir.topic_configs.update("tiered", TIERED, "bench")
            log_dir.create_partitions("tiered", n)
            for p in range(n):
                fill(log_dir.get_or_create("tiered", p), 12)
        conf = root / "p.properties"
        conf.write_text(f"log.dirs={logs}\nremote.storage.url=s3://bench-status/x\n"
                        f"remote.storage.s3.endpoint.url={server.endpoint}\n"
                        "remote.storage.s3.region=us-east-1\n")  # fmt: skip
        cfg = TieringConfig.load(conf)
        Tierer(cfg).run_once()
        runs: dict[str, list[tuple[float, float]]] = {"lean": [], "botocore": []}
        for r in range(6):
            for side in ("lean", "botocore") if r % 2 == 0 else ("botocore", "lean"):
                runs[side].append(timed_status(cfg, n, lean=side == "lean"))
    print(f"command: python bench/status_gets.py {n}  (collect_status in process, 6 rounds)")
    for side, got in runs.items():
        wall = statistics.median(w for w, _ in got)
        cpu = statistics.median(c for _, c in got)
        print(f"{side:9s} median {wall:.3f} s wall, {cpu:.3f} s CPU")


def timed_status(cfg: TieringConfig, n: int, *, lean: bool) -> tuple[float, float]:
    """One ``collect_status`` with a fresh store, its manifest GETs lean or through botocore."""
    store = cfg.open_store()
    small = store.small_gets  # type: ignore[attr-defined]
    assert small is not None and small.lean is not None
    if not lean:
        small.lean = None
    wall, cpu = time.perf_counter(), time.process_time()
    rows = collect_status(cfg, store, refresh=True)  # every manifest from the store
    assert len(rows) == n
    return time.perf_counter() - wall, time.process_time() - cpu


if __name__ == "__main__":
    main()
