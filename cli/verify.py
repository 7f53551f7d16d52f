"""``kafkatier verify``: check Kafka log dirs for corruption and inconsistency, read-only."""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path

from kafkatier.cli.commands import summary
from kafkatier.cli.progress import BYTES, progress_bar

EPILOG = """\
what is checked:
  .log          every batch: framing, CRC, records decode; offsets strictly increase within
                and across segments (gaps are fine: compaction); the segment's base offset is
                not above its first batch; no torn batch at the end
  .index        each entry points to a batch start, and its offset is the last offset of that
                batch (or of a later batch of the same append); entries increase; a rolled
                segment's index has no zero-filled tail
  .timeindex    timestamps increase and match the batches' max timestamps; a rolled segment's
                last entry is its max timestamp (Kafka's retention reads it)
  .txnindex     exactly the aborted transactions a replay of producer state finds, with the
                same last stable offsets
  .snapshot     CRC, and every producer's epoch, sequence, offsets, timestamp, coordinator
                epoch and open transaction as a replay of the log up to that offset gives them
  leader-epoch-checkpoint   parses, increases, agrees with the batches' leader epochs
  partition.metadata, meta.properties   parse
  offset checkpoints   parse; each offset lies within its partition's log
Missing files (a .log between segments, an index) are reported by path.

output: one line per problem, 'FILE[:POSITION]: message', then a summary line.

exit codes: 0 no errors (warnings are leftovers Kafka tidies up itself), 1 errors found,
2 usage error (e.g. a path that does not exist).

examples:
  kafkatier verify /data/kafka-logs
  kafkatier verify /data/kafka-logs/events-0 /data/kafka-logs/events-1
  kafkatier verify /data/kafka-logs/events-0/00000000000000000000.log --json
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "verify",
        help=summary("verify"),
        description="Check Kafka log dirs, partition dirs or single files without modifying "
        "them: batches, indexes, producer snapshots, transaction indexes and checkpoints.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("paths", nargs="+", type=Path, metavar="PATH",
                        help="a log dir, partition dir or Kafka file")  # fmt: skip
    parser.add_argument("--json", action="store_true",
                        help="JSON Lines: an object per problem, then a summary")  # fmt: skip
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # the checks' modules imported here, not at the top: ``verify --help`` needs none of them
    from kafkatier.storage.verify.paths import NotKafkaPathError, log_bytes, verify_paths
    from kafkatier.storage.verify.problem import VerifyStats

    missing = [p for p in args.paths if not p.exists()]
    if missing:
        print(f"kafkatier verify: error: no such file or directory: {missing[0]}",
              file=sys.stderr)  # fmt: skip
        return 2
    stats = VerifyStats()
    try:
        total = functools.partial(log_bytes, args.paths)
        with progress_bar(sys.stderr.isatty(), total, desc="verify", **BYTES) as progress:
            problems = verify_paths(args.paths, stats=stats, progress=progress)
    except NotKafkaPathError as exc:
        print(f"kafkatier verify: error: {exc}", file=sys.stderr)
        return 2
    for problem in problems:
        print(json.dumps(problem.to_json()) if args.json else str(problem))
    print(json.dumps(stats.to_json(problems)) if args.json else stats.summary(problems))
    return 1 if any(p.severity == "error" for p in problems) else 0

