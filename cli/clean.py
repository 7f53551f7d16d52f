"""``kafkatier clean``: one pass of retention and compaction over a log dir, as a broker would;
with ``--remote``, one pass of compaction over the tiered copies in the remote store. The
parser; the work is cli/clean_run.py, imported only when the command runs (``clean --help``
loads none of the log engine)."""

from __future__ import annotations

import argparse
from pathlib import Path

from kafkatier.cli.commands import summary

EPILOG = """\
what a pass does, per partition (Kafka's rules, kafka-format.md §10-§11):
  retention     segments wholly below the log start offset go (any cleanup.policy); with
                cleanup.policy containing delete, then the oldest segments while the log
                exceeds retention.bytes, then those whose newest record is older than
                retention.ms. Deleted files are renamed .deleted and removed after
                file.delete.delay.ms (those left at exit are removed the next time the log
                dir is opened, as a broker does at startup).
  compaction    with cleanup.policy containing compact: Kafka's log cleaner keeps the latest
                record per key, from the cleaner-offset-checkpoint on.

  --remote      compaction of the tiered copy instead (the sidecar's remote pass, by hand):
                for each compacted topic with remote.storage.enable=true in the log dirs
                of the sidecar properties file given as --config FILE (and each partition
                only the remote store still has), the segments that exist only remotely
                are compacted with the same cleaner, rewritten under new object keys and
                swapped in by one conditional manifest update; leftovers of killed runs are
                swept first. LOG_DIR is not given then.
  --delete-stale
                with --remote: also delete the remote data of every earlier incarnation of a
                topic the log dirs hold (a topic deleted and created again under its name
                leaves its old data under the old topic id; kafkatier status lists it as
                stale). With --topic TOPIC, and no log dir holds TOPIC: all of its remote
                data (a topic deleted and not created again). Kafka deletes a deleted topic's
                remote data; kafkatier leaves it to you, since another log dir sharing the
                remote store may still own that id, and a log dir lost with its disk looks
                like a deleted topic.

Settings come from LOG_DIR/kafkatier-topic.<topic>.properties (Kafka's names and defaults);
--config overrides them for this run only. Every setting is checked before any file is
touched, and so is that a compacted partition has keyed records.

exit codes: 0 done, 1 failed (or compaction not available), 2 usage or configuration error.

examples:
  kafkatier clean /data/kafka-logs
  kafkatier clean /data/kafka-logs --topic events --config retention.ms=86400000
  kafkatier clean /data/kafka-logs --topic users --config cleanup.policy=compact --json
  kafkatier clean --remote --config /etc/kafkatier/sidecar.properties --topic users
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "clean",
        help=summary("clean"),
        description="Run one pass of retention (cleanup.policy=delete) and compaction "
        "(cleanup.policy=compact) over every partition in LOG_DIR, or one topic's.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("log_dir", metavar="LOG_DIR", type=Path, nargs="?",
                        help="Kafka log directory (not with --remote)")  # fmt: skip
    parser.add_argument("--topic", help="only this topic's partitions")
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                        help="a setting for this run only, Kafka's name (repeatable); with "
                        "--remote, also the sidecar properties FILE")  # fmt: skip
    parser.add_argument("--remote", action="store_true",
                        help="compact the tiered copies in the remote store (see below)")
    parser.add_argument("--delete-stale", action="store_true",
                        help="with --remote: delete earlier incarnations' remote data (below)")
    parser.add_argument("--json", action="store_true",
                        help="JSON Lines: an object per partition, then the totals")  # fmt: skip
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kafkatier.cli.clean_run import clean

    return clean(args)
