"""Benchmark: what each partition costs, on every path, over the same partition counts.

    python bench/scale.py [--partitions 8,64,256,1024,4096] [--paths read,sink,produce,tiering]

One path at a time, each in its own process (one Spark session, one S3 server at a time on this
2-core machine), each beside its own baseline in the same run:

* ``read``: ``spark.read.format("kafkatier")`` beside Spark's Parquet scan of the same rows in as
  many files (bench/scale_read.py);
* ``sink``: one micro-batch of 5,000 and of 200,000 rows, first and warm, beside Spark's Parquet
  sink of the same batch (bench/scale_sink.py);
* ``produce``: whole-process ``kafkatier produce`` of 100,000 records into a new and into an
  existing topic (bench/scale_produce.py);
* ``tiering``: sidecar passes (upload, idle), ``status`` and ``restore`` against SeaweedFS, the S3
  requests of each counted at the server's door, beside boto3 downloading the same objects
  (bench/scale_tiering.py).

Each prints its table with the command that reproduces it; extra arguments after ``--`` go to
every path's script.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PATHS = ("read", "sink", "produce", "tiering")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", default="8,64,256,1024,4096")
    parser.add_argument("--paths", default=",".join(PATHS))
    parser.add_argument("extra", nargs="*", help="after --: passed to every path's script")
    args = parser.parse_args()
    failed = []
    for path in args.paths.split(","):
        if path not in PATHS:
            parser.error(f"unknown path {path!r} (one of {', '.join(PATHS)})")
        command = [sys.executable, str(HERE / f"scale_{path}.py"), "--partitions",
                   args.partitions, *args.extra]  # fmt: skip
        print(f"\n## {path}: {' '.join(command)}", flush=True)
        began = time.monotonic()
        if subprocess.run(command, check=False).returncode != 0:
            failed.append(path)
        print(f"({path}: {time.monotonic() - began:.0f} s)", flush=True)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
